"""How a simulated user judges a conversation: which of its goals the agent reported done or
answered, which sentences are questions, confirmations or identity checks.

The judgement reads only what the agent said and the user's own goals (never the world or the
reward), so a policy cannot probe the reward through the user: replies to a fixed transcript are
the same whether the work was really done or the stated values are right.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from scaleenv.env.lexicon import act_pattern
from scaleenv.env.vocabulary import has_phrase, norm
from scaleenv.formats.task import Objective, Task
from scaleenv.utils.record_ids import RECORD_ID

_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)])\s+|\n+")  # 'description "Old color." Offer ...' too
_QUESTION_WORDS = re.compile(
    r"^\s*(what|which|when|where|who|whose|how)\b|"
    r"^\s*(could|can|would|will|may|shall|should|do|does|did|is|are|was|have|has)\s+(you|your|i|we|it|this|that|"
    r"these|those|there|they|he|she|the|my|our|any)\b|\b(please (provide|give|tell|share|confirm|send|verify|state|spell|let me know)|could you|can you|would you|"
    r"may i|tell me|let me know(?! if\b| when\b| whether\b)|(i|we) (still |also |just |first |now )?need (your|the|its|their|his|her|to know|a few|some|"
    r"more)|i('ll| will) need)\b", re.IGNORECASE)
_CONFIRM = act_pattern("confirm")
_IDENTITY = act_pattern("identity")
_DONE = act_pattern("done")
_FAIL = act_pattern("cannot")
# "failed" as the state a record is put in ("PLT-0064 is now marked failed", "status: failed"), not as news
# that the change did not go through
_STATE_WORD = re.compile(r"\b(marked|set|status|state|flagged|recorded|written off|(?:is|are) now|(?:changed|moved|updated) to|as)"
                         r"(\s+as)?[\s:]+[\"'`]?failed\b", re.IGNORECASE)


def _fails(sentence: str) -> bool:
    """Whether ``sentence`` says something could not be (or was not) done."""
    return bool(_FAIL.search(_STATE_WORD.sub(r"\1 STATE", sentence)))


_BLANKET = act_pattern("everything")
_VALUE = re.compile(r"\d|\b(is|are|was|were|has|have|equals?)\b|:")
_INTENT = re.compile(
    r"^\W*(please(?!\s+(note|be aware|find))|let me|let's|to confirm|so you want|you want|you'd like|once|if|when|"
    r"you would like|i need|we need|i want|we want|i'd like|i would like)\b|"
    r"\b(i|we)\s*('ll|will|would|am going to|'m going to|are going to|plan to|shall|need to|intend to|am about to|"
    r"'m about to)\b|\b(will be|going to|about to)\b", re.IGNORECASE)
"""A plan or a restated request ("I will renew ...", "You'd like ...", "Please change ..."), not a report."""
_REPORT_OPENING = re.compile(r"\s*(?:all\s+)?done\b[^?]*?[.!](?=\s)", re.IGNORECASE)
"""A message's opening report ("Done: the refill order is now marked picked up."), up to its first full stop."""

_PLAN = re.compile(
    r"\b(what (i|we)\s*('ll|will|would|am going to|'m going to|are going to|plan to|intend to) do|(my|the) plan|"
    r"here('s| is) what (i|we)\s*('ll|will|would|plan|intend)|the following (steps|changes)|(steps|plan):)", re.IGNORECASE)
"""A plan announced: what follows it in the message are its steps, not reports."""


_DONE_WORD = (r"(scheduled|registered|booked|confirmed|placed|added|created|recorded|paid|sent|marked|updated|changed|"
              r"cancell?ed|completed?|processed|transferred|refunded|voided|deposited|withdrawn|sold|bought|done|finished)")
_NOT_A_REPORT = re.compile(
    r"\bto\s+(be\s+)?" + _DONE_WORD + r"\b|"  # a purpose or a plan: "to complete the registration", "to be cancelled"
    r"\b(upcoming|existing|current|currently|previously|original|originally|other|its|their|your|the|his|her|any|"
    r"\d+|one|two|three|four|five|six|seven|eight|nine|ten|several|many|some|no|all)\s+"
    + _DONE_WORD + r"(?=\s+[a-z])|"  # a done word used as an adjective: "its upcoming scheduled appointments"
    r"\bstatus\s*(is\s*|:\s*)?" + _DONE_WORD + r"\b",  # "status: scheduled", "its status is confirmed"
    re.IGNORECASE)


_STATE_LABEL = re.compile(r"\(\s*(status\s*:?\s*)?" + _DONE_WORD + r"\s*\)", re.IGNORECASE)
"""A record's state in brackets ("FXT-0054 (scheduled)"): a description, not a report."""


def _reported(sentence: str) -> str:
    """``sentence`` without the done words that report nothing (a purpose, an adjective, a state label)."""
    return _NOT_A_REPORT.sub(lambda m: m.group(0).split()[0] + " …", _STATE_LABEL.sub("(…)", sentence))


_EDGES = " \t*_`#>"
"""Markdown around a sentence ("**Shall I go ahead?**", "> quoted", "### Done"): no part of what it says."""


def sentences(text: str, keep: Iterable[str] = ()) -> list[str]:
    """The sentences of ``text``; a stop inside one of the texts ``keep`` holds (a value the reader knows,
    such as the body of a message it dictated: "Fix the sink. Then call me.") ends no sentence."""
    text = text or ""
    held = [(m.start(), m.end()) for k in keep if k and k in text for m in re.finditer(re.escape(k), text)]
    out: list[str] = []
    start = 0
    for m in _SENTENCE.finditer(text):
        if any(a < m.start() < b for a, b in held):
            continue
        out.append(text[start:m.start()])
        start = m.end()
    out.append(text[start:])
    return [x for s in out if (x := s.strip().strip(_EDGES).strip())]


def is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or bool(_QUESTION_WORDS.search(sentence))


def questions(text: str) -> list[str]:
    """The sentences of ``text`` that ask the user something."""
    return [s for s in sentences(text) if is_question(s)]


def is_confirmation(sentence: str) -> bool:
    """A yes/no check before acting ("Shall I go ahead?", "Can you confirm the date?")."""
    return bool(_CONFIRM.search(sentence))


_ACTION_CONFIRM = act_pattern("go_ahead")


def is_action_confirmation(sentence: str) -> bool:
    """A yes/no check before the agent acts ("Shall I go ahead and cancel ...?"), as opposed to a
    request to confirm a fact ("Can you confirm your e-mail?") or a question of which record to act on
    ("which order should I cancel?")."""
    return bool(_ACTION_CONFIRM.search(sentence)) and not asks_which(sentence)


_ALTERNATIVE = act_pattern("instead")
_WHICH = re.compile(r"\bwhich (one|ones|of (these|those|them|the|your))\b|\b(do|did|u) (you |u )?mean\b|"
                    r"\bare you referring to\b|\bwhich\s+(?:[\w-]+\s+)?(?:should|shall|do|did|would|will)\s+(?:i|we|you)\b|"
                    r"^\W*(?:is|was) it\b[^?]*\bor\b", re.IGNORECASE)
_WHICH_WORD = re.compile(r"\bwhich\b", re.IGNORECASE)
_IS_IT = re.compile(r"\bis (it|the one)\b", re.IGNORECASE)
"""With a "which" before it in the same question: "which of the two is it?", "which booking is the one?"."""


def offers_alternative(sentence: str) -> bool:
    """Words offering something else ("Would you like me to reschedule it instead?")."""
    return bool(_ALTERNATIVE.search(sentence))


def asks_which(sentence: str) -> bool:
    """A question asking which of several records the user means ("Which one do you mean?", "which booking
    is it?": a "which", then "is it" before the next question mark; the first "which" of each question is
    the one to look after, so no part of the sentence is read twice)."""
    if _WHICH.search(sentence):
        return True
    for question in sentence.split("?"):
        which = _WHICH_WORD.search(question)
        if which is not None and _IS_IT.search(question, which.end()):
            return True
    return False


def asks_identity(sentence: str) -> bool:
    """A question about who the user is ("What is your id?", "Can I have your details?")."""
    return bool(_IDENTITY.search(sentence))


def asks_to_act(text: str) -> bool:
    """Whether ``text`` asks the user's go-ahead for a change on the records its "cannot" sentences name
    ("LIN-0064 was activated less than 3 years ago, so normally it cannot be terminated, but it is
    suspended. Shall I terminate LIN-0064?"): it quotes a rule it does not break. A go-ahead for other
    records ("I cannot cancel PTS-0053. Shall I go ahead with the others?") or for something else instead
    is no such question."""
    asked = {r.upper() for s in questions(text) if is_action_confirmation(s) and not offers_alternative(s)
             for r in RECORD_ID.findall(s)}
    refused = {r.upper() for s in sentences(text) if not is_question(s) and _fails(s)
               for r in RECORD_ID.findall(s)}
    return bool(asked) and refused <= asked


def says_cannot(text: str) -> bool:
    """Whether ``text`` tells the user that something cannot be (or was not) done, outside a question."""
    return any(_fails(s) for s in sentences(text) if not s.rstrip().endswith("?"))


def _mentions(sentence_norm: str, phrases: list[str]) -> bool:
    return any(p and has_phrase(sentence_norm, norm(p)) for p in phrases)


def _clauses(text: str) -> list[str]:
    """The sentences of ``text``, a statement cut at its semicolons: "so I did not check you in; the
    passenger name is now Samuel Ward" reports the change its second clause names."""
    out: list[str] = []
    for sentence in sentences(text):
        out += [sentence] if sentence.rstrip().endswith("?") else [c for c in re.split(r";\s+", sentence) if c.strip()]
    return out


class Progress:
    """Which objectives the agent has reported done (write) or answered (read), by its words alone."""

    def __init__(self, objectives: list[Objective]):
        self.objectives = objectives
        self.keys = distinctive_keys(objectives)
        """Per objective, the phrases that report it: its own record ids, subject nouns and done words, less
        any another objective of the task shares (its keys or its words)."""
        self.done = [False] * len(objectives)
        self.said = len(objectives)
        """How many objectives (the first ones) the user has stated so far: only those can be reported."""

    def pending(self) -> list[Objective]:
        """The objectives stated so far and not yet reported."""
        return [o for o, d in zip(self.objectives[: self.said], self.done, strict=False) if not d]

    def stated_done(self) -> bool:
        """Whether every objective stated so far was reported (the user may say its next one)."""
        return all(self.done[: self.said])

    def finished(self) -> bool:
        return bool(self.objectives) and all(self.done)

    def reported(self) -> int:
        """How many changes and questions (not refusals) the agent has reported done or answered."""
        return sum(1 for o, d in zip(self.objectives, self.done, strict=False) if d and o.kind != "refusal")

    def _refusals(self, said: Iterable[str]) -> None:
        for sentence in said:
            if _fails(sentence):
                for i, o in enumerate(self.objectives[: self.said]):
                    if o.kind == "refusal" and not self.done[i]:
                        self.done[i] = True  # told that (and why) it cannot be done
                        break

    def _reports_all(self, sentence: str, normed: str, writes: list[int]) -> bool:
        """Whether a report that names none of the open ``writes`` reports them all: "Done." with nothing
        more specific said; or the one change left, unless the sentence is about one already reported ("...
        the wallet balance is now 0", after the payout was reported)."""
        if _bare(sentence):
            return True
        about_done = any(d and _mentions(normed, k) for k, d in zip(self.keys, self.done, strict=False))
        return len(writes) == 1 and not about_done

    def update(self, agent_text: str) -> bool:
        """Mark what ``agent_text`` reports; whether anything new was reported."""
        before = sum(self.done)
        if any(is_confirmation(q) or asks_which(q) for q in questions(agent_text)):
            # "Shall I go ahead with ...?", "Which one should it go on?": nothing is done yet, whatever it
            # quotes ("four consultations, all completed"); but a refusal said
            # beside it ("I cannot open it, because ...") is the answer to that request
            self._refusals(s for s in sentences(agent_text) if not s.rstrip().endswith("?"))
            # ... except a report the message opens with, before it asks about the next change ("Done: RFL-0038
            # is now marked picked up. Next, I am about to write ... Shall I go ahead?", play round 26)
            opening = _REPORT_OPENING.match(agent_text)
            if opening:
                self._reports(opening.group(0))
            return sum(self.done) > before
        self._reports(agent_text)
        return sum(self.done) > before

    def _reports(self, agent_text: str) -> None:
        """Mark what the statements of ``agent_text`` report done or answer."""
        planning = False
        for sentence in _clauses(agent_text):
            planning = planning or bool(_PLAN.search(sentence))
            if not sentence.rstrip().endswith("?"):
                self._refusals([sentence])
            if sentence.rstrip().endswith("?") or _fails(sentence):
                continue
            sentence = _reported(sentence)
            s = norm(sentence)
            open_ = [i for i, d in enumerate(self.done[: self.said]) if not d]
            reads = [i for i in open_ if self.objectives[i].kind == "read"]
            if not reads and not any(self.objectives[i].kind == "write" for i in open_):
                continue
            intent = planning or bool(_INTENT.search(sentence))  # a plan or the request restated reports nothing
            writes = [] if intent else [i for i in open_ if self.objectives[i].kind == "write"]
            answered = [i for i in reads if _mentions(s, self.objectives[i].asks) and _VALUE.search(sentence)]
            for i in answered:
                self.done[i] = True
            if not answered and len(reads) == 1 and re.search(r"\d", RECORD_ID.sub("", sentence)) and not writes \
                    and not intent:
                # the one open question, answered with a number or date ("Left to pay on check CHK-0064:
                # 14.59 (subtotal 34.69, paid 20.10)", where "paid" reports no write: none is open); a record's
                # id is no answer ("the space is owned by USR-0034", said before asking who the user is)
                self.done[reads[0]] = True
                continue
            if not _DONE.search(sentence) and not any(_mentions(s, self.objectives[i].done_words) for i in writes):
                continue
            if _BLANKET.search(sentence):
                named = writes  # "your request has been completed": every change reported done
            else:
                named = [i for i in writes if _mentions(s, self.keys[i])]
                if not named and not answered and _DONE.search(sentence) and self._reports_all(sentence, s, writes):
                    named = writes
            for i in named:
                self.done[i] = True


def _own_phrases(o: Objective) -> list[str]:
    """What could report objective ``o``: the record ids its request names, its subject nouns, its done words."""
    return [*RECORD_ID.findall(o.text), *o.subject, *o.done_words]


def distinctive_keys(objectives: list[Objective]) -> list[list[str]]:
    """Per objective, the phrases that belong to it alone in this task: each of :func:`_own_phrases` that no
    other objective has among its own phrases or says in its request. A report of one goal never marks
    another through a word they share ("account ACC-0035 is now frozen" is no report on the watchlist entry
    "of my account")."""
    own = [[p for p in _own_phrases(o) if norm(p)] for o in objectives]
    words = [" " + " ".join([norm(o.text), *(norm(p) for p in ps)]) + " " for o, ps in zip(objectives, own, strict=True)]
    out: list[list[str]] = []
    for i, phrases in enumerate(own):
        others = [w for j, w in enumerate(words) if j != i]
        keep = [p for p in phrases if not any(has_phrase(w, norm(p)) for w in others)]
        out.append(list(dict.fromkeys(keep)))
    return out


_FILLER = frozenset({"all", "now", "ok", "okay", "great", "sure", "it", "it's", "that", "that's", "this", "is", "was",
                     "and", "so", "there", "here", "you", "go", "we", "are", "i", "i've", "we've", "yes", "right"})


def _bare(sentence: str) -> bool:
    """Whether a report says nothing but that it is done ("Done.", "All done, Nicole!"): a report of
    something in particular ("Done: I paid out 12.67 from your wallet") that names none of several open
    changes reports none of them (play round 29)."""
    rest = [w for w in re.findall(r"[A-Za-z']+", _DONE.sub(" ", sentence)) if w.lower() not in _FILLER]
    return len(rest) <= 1  # a name at most ("Done, Nicole.")


def objectives_of(task: Task) -> list[Objective]:
    """The task's structured goals; for older task files, one per stated goal (a question when it
    reads as one, its answer named by the task's answer facts)."""
    profile = task.user_profile
    if profile.objectives:
        return list(profile.objectives)
    goals = list(profile.goals) or [task.instruction]
    names = [f.name for f in task.answer_facts]
    out = []
    for g in goals:
        read = g.rstrip().endswith("?") or bool(re.match(r"\s*(how|what|which|can you tell|i'd like to know)", g,
                                                         re.IGNORECASE))
        if read:
            asks = [n.replace("_", " ") for n in names]
            asks += [" ".join(a.split()[1:]) for a in asks if len(a.split()) > 1]
            out.append(Objective(kind="read", text=g, asks=asks))
        else:
            out.append(Objective(kind="write", text=g))
    return out
