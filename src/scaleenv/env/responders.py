"""The scripted user's responders: how it answers one question of an agent's message.

Each :class:`Responder` is tried in turn on every question sentence, and the first that takes the sentence
says its part (a yes, a no with the right value, the facts asked for, "what I need is ...", "I don't know").
The order is the user's judgement: a question about what to do is answered before a go-ahead, a go-ahead on a
choice between records before a plain go-ahead, and so on. A misreading found in play becomes a corpus row and,
where no responder covers it, a new responder here (not a branch inside another).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scaleenv.env import judge
from scaleenv.env.lexicon import act_pattern
from scaleenv.env.voice import CANONICAL
from scaleenv.utils.record_ids import RECORD_ID

_CLARIFY = act_pattern("clarify")
"""A question asking what the user wants done: the user says its open requests again."""

_EITHER_OR = re.compile(RECORD_ID.pattern + r"[^?.;]{0,40}?\bor\s+(?:[\w-]+\s+){0,3}?" + RECORD_ID.pattern,
                        re.IGNORECASE)
"""A choice between records ("FXT-0051 or FXT-0052?", "OFR-0061, or the bid OFR-0062?"); not an "or" in a
dictated text beside ids ("new description: Or summer position somebody.")."""

_OPTIONS = re.compile(
    r"\bor\s+(?!not\b|no\b|(?:is there |are there )?(?:anything|something)\b|"
    r"(?:(?:would|do) you (?:like|want|need) (?:me )?to |should i |shall i )?(?:change|adjust|edit|modify|correct|add)\b)",
    re.IGNORECASE)
"""A choice between courses of action ("pay the full 120, or just the 50 you mentioned?"): no yes answers it.
Not an offer to go on or change something ("shall I go ahead, or is there anything else?")."""


def _undictated(sentence: str) -> str:
    """``sentence`` without the text the agent quotes (a new description, a message body: its words are no
    question's options): a bracketed aside, a quoted text, and what follows a colon to the end of a sentence
    with no question mark after it. In one pass: a regular expression would read the rest of the sentence
    again from every bracket or colon left open."""
    out: list[str] = []
    last_question = sentence.rfind("?")
    may_close = {")": True, '"': True}  # whether a closing mark may still follow
    i = start = 0
    n = len(sentence)
    while i < n:
        c = sentence[i]
        close = ")" if c == "(" else '"' if c == '"' else None
        if close is not None and may_close[close]:
            j = sentence.find(close, i + 1)
            if j >= 0:
                out.append(sentence[start:i])
                i = start = j + 1
                continue
            may_close[close] = False  # none after this one, so none after any later one
        elif c == ":" and i + 1 < n and sentence[i + 1].isspace() and last_question < i + 2:
            out.append(sentence[start:i])
            start = n
            break
        i += 1
    out.append(sentence[start:])
    return "".join(out)


_WHO = act_pattern("who")
_OPEN_WORD = re.compile(r"\b(what|which|when|where|how (much|many|long))\b", re.IGNORECASE)
_OPEN_VERB = re.compile(r"\b(would|do|should|will|shall) you (like|want|prefer|need|choose)\b", re.IGNORECASE)
_STRETCH = re.compile(r"[^.?!]+")


def _open_question(sentence: str) -> int | None:
    """Where an open question begins ("what priority would you like for it, or should I leave the default?":
    a question word, then "would you like" or the like before the next stop); no yes or no answers it, even
    when it ends in an offer to go ahead. ``None`` when there is none. Linear: in each stretch between
    stops, the first question word counts if it ends before the stretch's last such verb."""
    for stretch in _STRETCH.finditer(sentence):
        verbs = [m.start() for m in _OPEN_VERB.finditer(stretch.group())]
        word = _OPEN_WORD.search(stretch.group()) if verbs else None
        if word is not None and word.end() <= verbs[-1]:
            return stretch.start() + word.start()
    return None

_DEFAULT = act_pattern("default")


YES = CANONICAL["yes"]
NOTHING_ELSE = CANONICAL["nothing_else"]
NO_ALTERNATIVE = "No, thank you; I only want what I asked for."
"""The scripted user's answer to an offer of something it did not ask for."""
WRONG = "No, that is not right"
"""How the user's no to a proposal naming the wrong record or value begins."""


@dataclass
class Reading:
    """One agent message as the user answers it: the lines said so far, the facts given, whether a question
    was one it could not answer, and what the whole message holds (``message``, read once)."""

    user: Any
    """The :class:`~scaleenv.env.users.ScriptedUser` answering."""
    message: Any
    """The message as it reads it (``users._Message``: its sentences, the wrong value it names, ...)."""
    decisions: list[Any]
    unsaid: set[str]
    parts: list[str] = field(default_factory=list)
    given: list[str] = field(default_factory=list)
    unknown: bool = False

    def say(self, line: str) -> None:
        """Say ``line``, once."""
        if line not in self.parts:
            self.parts.append(line)

    def needs(self) -> None:
        """Say again what the user asked for and is still waiting for (nothing when all is done)."""
        if pending := self.user.recap():
            self.say(f"What I need is: {pending}")


@dataclass(frozen=True)
class Responder:
    """A named way of answering a question: ``respond(reading, index, sentence)`` says its part and returns
    True when the question is its to answer, else returns False and leaves the reading as it was."""

    name: str
    respond: Callable[[Reading, int, str], bool]


def _go_ahead(sentence: str, r: Reading) -> bool:
    return not r.decisions and judge.is_action_confirmation(sentence)


def _clarify(r: Reading, index: int, sentence: str) -> bool:
    """"What would you like me to do?": no yes/no question; the user says what it asked for again."""
    if not (_CLARIFY.search(sentence) and r.user.recap()):
        return False
    r.needs()
    return True


def _open(r: Reading, index: int, sentence: str) -> bool:
    """"What priority would you like for it, or should I leave the default?": the facts it asks for, "the
    default is fine", or not known; never a yes."""
    open_at = _open_question(sentence)
    if open_at is None or r.decisions:
        return False
    clause = sentence[open_at:]  # the question, not the plan quoted before it
    facts = [f for f in r.user.vocab.asked(clause, clause) if f not in r.given]
    if facts:
        r.given += facts
    elif _DEFAULT.search(sentence):
        r.say("The default is fine for that.")
    else:
        r.unknown = True
    return True


def _either_or(r: Reading, index: int, sentence: str) -> bool:
    """"Shall I cancel FXT-0051 or FXT-0052?": the one the user means if it knows its id, else what it asked for."""
    if not (_go_ahead(sentence, r) and _EITHER_OR.search(sentence)):
        return False
    ids = {str(v).upper() for v in r.user.known.values() if isinstance(v, str) and RECORD_ID.fullmatch(v)}
    meant = sorted({x for x in RECORD_ID.findall(sentence) if x.upper() in ids})
    if len(meant) == 1:
        r.say(f"I mean {meant[0]}.")
    else:
        r.needs()
    return True


def _options(r: Reading, index: int, sentence: str) -> bool:
    """"Pay it in full, or only the 50?": a choice between courses no yes answers; the user says what it asked for."""
    if not (_go_ahead(sentence, r) and _OPTIONS.search(_undictated(sentence)) and r.user.recap()):
        return False
    r.needs()
    return True


def _unasked_move(r: Reading, index: int, sentence: str) -> bool:
    """"Shall I decline them?" to a user who asked to withdraw them: a no, and what it asked for."""
    if not (_go_ahead(sentence, r) and not judge.offers_alternative(sentence) and (pending := r.user.recap())
            and r.user.unasked_action(sentence)):
        return False
    r.say(f"No, that is not what I asked for. What I need is: {pending}")
    return True


def _proposal(r: Reading, index: int, sentence: str) -> bool:
    """A go-ahead: no to something else instead after a refusal, to the look-alike's id it gave by mistake,
    or to a value of its own named wrong (with the right one); else yes."""
    if not _go_ahead(sentence, r):
        return False
    user, message = r.user, r.message
    slipped = user.slipped
    if judge.offers_alternative(sentence) and message.cannot and not judge.offers_alternative(user.asked_for):
        r.say(NO_ALTERNATIVE)
    elif slipped is not None and user.slip is None and message.names(slipped.said) \
            and not message.names(slipped.meant):
        r.say(f"{WRONG}: I meant {slipped.meant}, not {slipped.said}.")
    elif (wrong := message.wrong) is not None:  # the record and values are often said before the question
        r.say(f"{WRONG}: {user.vocab.statement(wrong, user.spoken_fact(wrong), user._mine(), user._owner())}")
    else:
        r.say(YES)
    return True


def _facts(r: Reading, index: int, sentence: str) -> bool:
    """A question about something the user knows: its role (staff), the facts asked for, who it is, or what
    it knows of the record a which-question is about."""
    from scaleenv.env.vocabulary import has_phrase, norm

    user = r.user
    if user.staff and _WHO.search(sentence) and user._role() not in r.parts:
        r.say(user._role())  # staff have no customer record: who they are is their role
        facts = [f for f in user.identity if f not in r.given]
    else:
        # not a detail of a request not said yet ("what is your email?" answered with the address of a
        # sender the user will ask to block later; play round 30)
        asked = user.vocab.asked(sentence, r.message.text)
        facts = [f for f in asked if f not in r.given and f not in r.unsaid]
        # the user's own fact of a kind asked for: of a later request's fact (its e-mail, not the sender's),
        # else of the word after "your" ("your email": its account's "email address")
        kinds_asked = ({f.split()[-1] for f in asked if f in r.unsaid},
                       set(re.findall(r"\byour ([a-z]+)", sentence.lower())))
        for kinds in kinds_asked:
            if not facts:
                facts = [f for f in user.identity if f not in r.given and any(k in f.split() for k in kinds)]
    if judge.asks_identity(sentence) and _WHO.search(sentence) and not any(f in user.identity for f in facts):
        # "could you share your details so I can confirm your identity?": who it is, not a fact that happens to
        # be called "details" (a support case's details; seed 5577, telecom/00087)
        facts = [f for f in user.identity if f not in r.given] or facts
    if not facts and judge.asks_identity(sentence):
        facts = [f for f in user.identity if f not in r.given]
    if not facts and judge.asks_which(sentence):
        # "which Northgate Athletic fixture do you mean?": the details the user knows of the records named
        # before the question ("I see two fixtures. Which one do you mean?"), else in it (a record's details:
        # not a new value the user wants set, nor one it has not asked for yet)
        candidates = [f for f in user.known if f not in r.given and not f.endswith(" id")
                      and not f.startswith("new ") and f not in r.unsaid]
        facts = [f for f in candidates if r.message.named_before(index, user.vocab.pairs[f][0])]
        if not facts:
            said = norm(sentence)
            facts = [f for f in candidates if any(has_phrase(said, n) for n in user.vocab.pairs[f][0])]
    if not facts:
        return False
    r.given += facts
    return True


def _decided(r: Reading, index: int, sentence: str) -> bool:
    """A question its decision already answers (the decision was said for the whole message)."""
    return bool(r.decisions)


def _confirm_fact(r: Reading, index: int, sentence: str) -> bool:
    """"Can you confirm that is right?" about nothing it knows otherwise: yes."""
    if not judge.is_confirmation(sentence):
        return False
    r.say(YES)
    return True


def _anything_else(r: Reading, index: int, sentence: str) -> bool:
    """"Anything else?": what is still open, or that's all."""
    if not re.search(r"\banything else\b", sentence, re.IGNORECASE):
        return False
    pending = r.user.recap()
    r.parts.append(f"Yes. {pending}" if pending else NOTHING_ELSE)
    return True


def _not_known(r: Reading, index: int, sentence: str) -> bool:
    """Anything else asked: it does not know."""
    r.unknown = True
    return True


RESPONDERS: tuple[Responder, ...] = (
    Responder("clarify", _clarify),
    Responder("open_question", _open),
    Responder("either_or", _either_or),
    Responder("options", _options),
    Responder("unasked_move", _unasked_move),
    Responder("proposal", _proposal),
    Responder("facts", _facts),
    Responder("decided", _decided),
    Responder("confirm_fact", _confirm_fact),
    Responder("anything_else", _anything_else),
    Responder("not_known", _not_known),
)
"""Every responder, in the order they are tried."""


def respond(reading: Reading, index: int, sentence: str) -> str:
    """Answer question ``sentence`` (number ``index`` of the message) with the first responder that takes it;
    the responder's name."""
    for responder in RESPONDERS:
        if responder.respond(reading, index, sentence):
            return responder.name
    return ""
