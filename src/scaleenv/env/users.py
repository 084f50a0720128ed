"""Simulated users: ``scripted`` (deterministic, from the task's profile) and ``openai:MODEL``
(an LLM playing the user with a persona, a hidden goal and the stop marker).

A user opens the conversation with its request, then answers each agent message. A reply that
contains :data:`~scaleenv.formats.trajectory.STOP` ends the episode (termination ``user_done``).
"""

from __future__ import annotations

import random
import re
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from scaleenv.env.agents import EndpointOptions
from scaleenv.env.responders import NO_ALTERNATIVE as _NO_ALTERNATIVE
from scaleenv.env.user_prompt import (
    GREETING,
    user_prompt,
)
from scaleenv.env.voice import CANONICAL, Voice
from scaleenv.errors import ProviderError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.formats.trajectory import STOP
from scaleenv.utils.record_ids import RECORD_ID, names, said_with


class UserError(ProviderError):
    """The simulated user could not produce a message (endpoint error, timeout, malformed reply)."""


@dataclass
class UserContext:
    """What a simulated user is given: its task (profile and goals), the domain's vocabulary (the
    spec, never a world) and its limits. It never sees the reward."""

    task: Task
    rng: random.Random | None
    max_turns: int = 10
    seed: int = 0
    spec: DomainSpec | None = None


@dataclass
class UserOptions(EndpointOptions):
    """Settings for building simulated users."""

    patience: int = 2
    extra_body: dict[str, Any] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "api_key_env": self.api_key_env, "system_prompt": self.system_prompt,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "timeout": self.timeout,
                "max_retries": self.max_retries, "seed": self.seed, "patience": self.patience,
                "extra_body": self.extra_body}


def turn_budget(ctx: UserContext) -> int:
    """The user's messages before it has to go: ``max_turns``, plus one per change the task makes
    (a careful agent asks before each, and a long task may make 8 to 18), plus one per request when
    the user says them one at a time, plus one for putting a slip right."""
    spec = ctx.spec
    writes = sum(1 for c in ctx.task.gold_chain
                 if spec is None or ((t := spec.tool(c.tool)) is not None and t.kind == "write"))
    gradual = len(ctx.task.user_profile.goals) if ctx.task.user_profile.gradual else 0
    slip = 1 if ctx.task.user_profile.slip is not None else 0
    return ctx.max_turns + writes + gradual + slip  # a user who says its requests one at a time says each in a turn


class User(ABC):
    name = "user"

    def reset(self, ctx: UserContext) -> None:
        self.ctx = ctx
        self.turns = 0
        self.budget = turn_budget(ctx)
        self.usage: dict[str, int] = {}

    @abstractmethod
    async def opening(self) -> str:
        """The user's first message."""

    @abstractmethod
    async def reply(self, agent_text: str) -> str:
        """The user's answer to what the agent said (ends with the stop marker when done)."""


def _fmt(v: Any) -> str:
    from scaleenv.env.language import spoken

    return spoken(v)


def _value_pattern(v: Any) -> re.Pattern[str]:
    forms = sorted({str(v) if not isinstance(v, bool) else _fmt(v), _fmt(v)}, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(f) for f in forms) + r")(?![\w]|\.\d)")


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w]|\.\d)")
"""A number standing as a whole value (what :func:`_value_pattern` of a number's digits matches)."""


def _unseparated(text: str) -> str:
    """``text`` with thousands separators dropped from its numbers ("56,600,000" as 56600000)."""
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)


def redact(text: str, values: dict[str, Any]) -> str:
    """Hide withheld values in a sentence: ``... scheduled at 2026-05-10T07:45:00 ...`` ->
    ``... scheduled at [ask me] ...``."""
    for v in values.values():
        if v is None or _fmt(v) == "":
            continue
        text = _value_pattern(v).sub("[ask me]", text)
    return text


MESSAGE_LIMIT = 4000
"""The most characters of an agent message the scripted user reads (the oracle's longest, an itemised
confirmation of a long task's writes, is under 2,000): a longer one gets :data:`TOO_LONG`, and counts
as no answer, report or yes."""
TOO_LONG = "That is too long for me to read; could you put it in a few sentences?"
"""The scripted user's reply to a message over :data:`MESSAGE_LIMIT`."""
UNKNOWN = CANONICAL["unknown"]
"""The scripted user's answer to a question about something it does not know."""
NOTHING_ELSE = CANONICAL["nothing_else"]
"""The scripted user's answer to "anything else?" once nothing it asked for is left."""
NEXT_REQUEST = "There is one more thing."
YES = CANONICAL["yes"]
"""The scripted user's yes to a proposal it asked for (said in its voice)."""
FINISHED = CANONICAL["finished"]
"""How the scripted user ends once every goal is done (said in its voice)."""
"""How a user who says its requests one at a time brings up the next one."""
NO_ALTERNATIVE = _NO_ALTERNATIVE
"""The scripted user's answer to an offer of something it did not ask for."""


class _Message:
    """One agent message as the user reads it: what an answer to one of its questions needs of the whole
    message (a wrong value named anywhere in it, a refusal, an id, the records named before the question)
    is read once, however many questions the message holds, so that a reply takes time linear in its length."""

    def __init__(self, user: ScriptedUser, text: str):
        self.user = user
        self.text = text
        self._names: dict[str, bool] = {}
        self._first: dict[str, int] = {}

    @cached_property
    def sentences(self) -> list[str]:
        from scaleenv.env.judge import sentences

        return sentences(self.text, self.user.dictated)

    @cached_property
    def wrong(self) -> str | None:
        """A fact of the user's that the message names with another value (:meth:`ScriptedUser.wrong_fact`)."""
        return self.user.wrong_fact(self.text)

    @cached_property
    def cannot(self) -> bool:
        """Whether the message says that something cannot be done."""
        from scaleenv.env.judge import says_cannot

        return says_cannot(self.user.unquoted(self.text))

    def names(self, record_id: str) -> bool:
        """Whether the message names ``record_id``."""
        if record_id not in self._names:
            self._names[record_id] = names(self.text, record_id)
        return self._names[record_id]

    @cached_property
    def _normed(self) -> tuple[str, list[int]]:
        """The sentences normalised and joined by spaces (padded with one on each side), and the length of
        the join of those before each sentence (its normalised prefix)."""
        from scaleenv.env.vocabulary import norm

        joined: list[str] = []
        length = 0
        before: list[int] = []
        for sentence in self.sentences:
            before.append(length)
            piece = norm(sentence)
            if piece:
                length += len(piece) + (1 if joined else 0)
                joined.append(piece)
        return f" {' '.join(joined)} ", before

    def named_before(self, index: int, phrases: Iterable[str]) -> bool:
        """Whether one of ``phrases`` (normalised) stands as whole words in the sentences before sentence
        ``index`` (:func:`~scaleenv.env.vocabulary.has_phrase` of the normalised text before it; each
        phrase's first place in the message is found once)."""
        padded, before = self._normed
        for phrase in phrases:
            if phrase not in self._first:
                self._first[phrase] = padded.find(f" {phrase} ")
            first = self._first[phrase]
            if phrase and first >= 0 and first + len(phrase) <= before[index]:
                return True
        return False


class ScriptedUser(User):
    """Deterministic user driven by the task's profile and the conversation alone.

    - Opens with its request (persona and goals; withheld values are replaced by ``[ask me]``).
    - Answers questions about the facts it knows, matched through the domain's vocabulary
      (:class:`~scaleenv.env.vocabulary.Vocabulary`); "what is your id?" gets the facts that
      identify it; reveals withheld facts only when asked about them; a confirmation question gets
      a yes, unless it names one of the user's facts with another value (the wrong record or value:
      then a no and the right value); an offer of something else after a refusal ("I can't; shall I ... instead?") gets a no; a
      question asking which record it means gets what it knows of that record; a decision point of its profile gets its decision; anything
      else it does not know. A profile with a ``pushback`` says it, once, the first time the agent
      says it cannot do something (whatever the reason), before it accepts the answer. A ``gradual``
      profile says its requests one at a time: the next once those said are dealt with. A profile with
      a ``slip`` gives a look-alike's id in one request, and puts it right (instead of answering) the
      first time the agent names that id back; it counts as put right once anyone names the right one.
    - Judges, from what the agent says, which goals were reported done (or answered)
      (:class:`~scaleenv.env.judge.Progress`), and recaps only the others.
    - Ends with the stop marker once every goal was reported done, when its turns run out, or
      after ``patience`` agent messages in a row that neither ask it anything nor report progress.
    - Reads a message of at most :data:`MESSAGE_LIMIT` characters, in time linear in its length (what its
      questions need of the whole message is read once); a longer one gets :data:`TOO_LONG` and counts as
      a message that gets nowhere.
    """

    name = "scripted"

    def __init__(self, patience: int = 2, varied: bool = True):
        self.patience = patience
        self.varied = varied
        """Whether it words its stock replies in a voice of its own (:mod:`scaleenv.env.voice`); off, it says
        each canonical line as it is."""

    def reset(self, ctx: UserContext) -> None:
        from scaleenv.env.judge import Progress, objectives_of
        from scaleenv.env.vocabulary import Vocabulary
        from scaleenv.reward.procedure import is_staff

        super().reset(ctx)
        profile = ctx.task.user_profile
        self.voice = Voice(f"{ctx.seed}:{ctx.task.id}", plain=not self.varied)
        self.known: dict[str, Any] = dict(profile.known)
        self.withheld = [w for w in profile.withheld if w in self.known]
        self.revealed: set[str] = set()
        self.idle = 0
        self.vocab = Vocabulary(ctx.spec, list(self.known))
        self.identity = [f for f in profile.identity if f in self.known] or self._identity_guess()
        self.progress = Progress(objectives_of(ctx.task))
        self.goals = list(profile.goals) or [ctx.task.instruction]
        if profile.gradual and len(self.goals) == len(self.progress.objectives) >= 2:
            self.progress.said = 1  # the first request now, each next one once those before are dealt with
        self.staff = is_staff(ctx.task)
        self.asked_for = " ".join(self.goals)
        self.pushed = not profile.pushback  # a user with a pushback presses once before accepting a refusal
        self.slip = profile.slip
        self.slipped = profile.slip
        """The slip, kept after it is put right: a change proposed on the wrong id later still gets a no."""
        self._verbs: tuple[set[str], set[str]] | None = None  # (foreign, asked), read once a confirmation needs them
        self.responders: list[str] = []
        """The responders that answered the questions of the last message read, in order (for tests and play)."""
        self.dictated = [v for v in self.known.values() if isinstance(v, str) and re.search(r"[.!?]\s", v)]
        self.quotable = sorted((v for v in self.known.values() if isinstance(v, str) and len(v.split()) >= 3),
                               key=len, reverse=True)
        """The user's own texts of three words or more (a subject, a message body, a note), longest first."""
        """The user's own texts that hold a full stop (a message body it dictates): read as one piece."""

    def _role(self) -> str:
        """Who a member of staff says they are, from their persona."""
        persona = self.ctx.task.user_profile.persona.strip().rstrip(".")
        return re.sub(r"^You are\b", "I am", persona) + "; I am not a customer."

    def _mine(self) -> list[str]:
        """The facts the user says are its own ("my e-mail"): a member of staff owns none of the
        record's (a household's name is not theirs: "The household name is ...", not "My name is ...")."""
        return [] if self.staff else self.identity

    def _owner(self) -> str:
        return "the" if self.staff else "my"

    def _identity_guess(self) -> list[str]:
        """Older profiles name no identity: the facts about the persona's entity (its first noun)."""
        facts = list(self.known)
        if not facts:
            return []
        table = self.vocab.split(facts[0])[0]
        return [f for f in facts if table is not None and self.vocab.split(f)[0] == table and f not in self.withheld]

    def _hidden(self) -> dict[str, Any]:
        return {w: self.known[w] for w in self.withheld if w not in self.revealed}

    def _unsaid_facts(self) -> set[str]:
        """The facts whose value only the requests the user has not said yet hold (a gradual user's
        next request is not told in answer to "which branch do you mean?")."""
        goals = [str(g) for g in self.goals]
        said, unsaid = " ".join(goals[: self.progress.said]), " ".join(goals[self.progress.said:])
        return {f for f, v in self.known.items()
                if str(v) in unsaid and str(v) not in said and f not in self.identity}  # who it is, it may say

    def _spoken(self, index: int, text: str) -> str:
        """Goal number ``index`` as the user says it now: with its slip while that is not put right."""
        slip = self.slip
        return said_with(text, slip.said, slip.meant) if slip is not None and slip.goal == index else text

    def _put_right(self, agent_text: str) -> str | None:
        """The user's correction when ``agent_text`` names the wrong id it gave (the slip is then put
        right, and a report on that request does not count: it was about the wrong record)."""
        slip = self.slip
        if slip is None or slip.goal >= self.progress.said:
            return None
        if names(agent_text, slip.meant) and not names(agent_text, slip.said):
            self.slip = None  # the agent found the right record itself
            return None
        # the wrong id named, alone or beside the right one ("shall I postpone FXT-0051? your ticket is on
        # FXT-0055", play round 23): the user says which it meant
        if not names(agent_text, slip.said):
            return None
        self.slip = None
        self.progress.done[slip.goal] = False
        opener = SLIP_OPENERS[zlib.crc32(self.ctx.task.id.encode()) % len(SLIP_OPENERS)]
        return f"{opener} I meant {slip.meant}, not {slip.said}."

    def request(self) -> str:
        profile = self.ctx.task.user_profile
        hidden = self._hidden()
        body = " ".join(redact(self._spoken(i, g), hidden) for i, g in enumerate(self.goals[: self.progress.said]))
        persona = profile.persona.strip()
        intro = re.sub(r"^You are\b", "Hi, I am", persona) if persona else "Hi."
        return f"{intro} {body}".strip()

    def recap(self) -> str:
        """The goals not yet reported done, as the user first said them."""
        hidden = self._hidden()
        pending = [(i, o) for i, o in enumerate(self.progress.objectives[: self.progress.said]) if not self.progress.done[i]]
        return " ".join(redact(self._spoken(i, o.text), hidden) for i, o in pending)

    async def opening(self) -> str:
        self.turns += 1
        return self.request()

    def _stop(self, text: str) -> str:
        return f"{text} {STOP}"

    def answer(self, agent_text: str) -> tuple[list[str], bool]:
        """What the user says to the questions in ``agent_text``, and whether it asked any: each question is
        answered by the first of :data:`~scaleenv.env.responders.RESPONDERS` that takes it."""
        from scaleenv.env.judge import is_question
        from scaleenv.env.responders import WRONG, Reading, respond

        decisions = [d for d in self.ctx.task.user_profile.decisions
                     if all(has_words(agent_text, w) for w in d.when)]
        # what the questions need of the whole message is read once; the facts only requests not said yet
        # hold are never given
        r = Reading(self, _Message(self, agent_text), decisions, self._unsaid_facts(), parts=[d.say for d in decisions])
        asked_any = bool(decisions)
        self.responders = []
        for index, sentence in enumerate(r.message.sentences):
            if is_question(sentence):
                asked_any = True
                self.responders.append(respond(r, index, sentence))
        self.revealed.update(f for f in r.given if f in self.withheld)
        if self.slip is not None and any(str(self.known[f]) == self.slip.meant for f in r.given):
            self.slip = None  # the user has now given the right id itself
        parts = r.parts
        if r.given:
            said = " ".join(self.vocab.statement(f, self.spoken_fact(f), self._mine(), self._owner()) for f in r.given)
            parts.insert(len(decisions), said)
        elif r.unknown and not parts:
            parts.append(UNKNOWN)
        verdict = [p for p in parts if p.startswith((YES, WRONG, NO_ALTERNATIVE))]
        return verdict + [p for p in parts if p not in verdict], asked_any  # the yes or no first

    def unquoted(self, text: str) -> str:
        """``text`` with the user's own texts it quotes (a support case's subject "Cannot make international
        calls", a message body) blanked: they are the user's words, not a refusal or a report of the agent's."""
        for value in self.quotable:
            if value in text:
                text = text.replace(value, "[...]")
        return text

    def spoken_fact(self, fact: str) -> str:
        """The value of one of the user's facts as it says it."""
        return _fmt(self.known[fact])

    def _answers_to(self, agent_text: str) -> list[str]:
        """What the user says to the questions of a message that it has an answer to (a fact it knows, a yes or
        no to a proposed change, the record it means, who it is); none for "anything else?" or what it does not
        know."""
        parts, asked = self.answer(agent_text)
        if not asked:
            return []
        return [p for p in parts if p not in (UNKNOWN, NOTHING_ELSE) and not p.startswith(("What I need is", "Yes. "))]

    def unasked_action(self, sentence: str) -> bool:
        """Whether a confirmation proposes only moves of the domain the user asked for none of ("decline
        the offers" to a user who asked to withdraw them); the moves its task's changes make are asked for
        ("deny the claim" to a user who asked to reject it: see :func:`_action_verbs`)."""
        if self._verbs is None:
            # the moves of the task's own changes are what the user wants, whatever word it used for them
            self._verbs = _action_verbs(self.ctx.spec, self.progress.objectives,
                                        (c.tool for c in self.ctx.task.gold_chain))
        foreign, asked = self._verbs
        words = {_stem(w) for w in re.findall(r"[a-z]+", sentence.lower())}
        return bool(words & foreign) and not words & asked

    def wrong_fact(self, sentence: str) -> str | None:
        """A fact of the user's that a confirmation question names with another value (the wrong
        record or the wrong new value: a number, a date or an e-mail other than the user's), if any. An
        answer to the user's own question is none ("Pip's birth date is 2019-03-02", beside the birth date of
        the new pet Oscar that the user will give)."""
        from scaleenv.reward.facts import stated_datetimes, value_stated

        sentence = " ".join(s for s in re.split(r"(?<=[.!?])\s+", sentence) if not self._answers(s))
        rest = re.sub(r"\b[A-Za-z][A-Za-z0-9]*-\d+\b", " ", sentence)  # record ids are not values the user knows
        flat = _unseparated(sentence)  # "56,600,000" is 56600000
        figures = {float(x) for x in re.findall(r"(?<![\w.\-])\d+(?:\.\d+)?(?![\d\-])", flat)}
        stated = [g for g, v in self.known.items() if v is not None
                  and (_value_pattern(v).search(sentence) or _value_pattern(v).search(flat)
                       or (isinstance(v, int | float) and not isinstance(v, bool) and float(v) in figures))]
        goals = list(self.ctx.task.user_profile.goals)
        asked = " ".join(goals)  # what the user asked for (two goals may share a fact name)
        asked_numbers = set(_NUMBER.findall(asked))  # the numbers said in it, each as a whole value
        about = {r.upper() for r in RECORD_ID.findall(sentence)}  # the records the confirmation is about
        for f in self.vocab.asked(sentence, sentence):
            v = self.known.get(f)
            if v is None or isinstance(v, bool) or f in stated:
                continue
            owners = [{r.upper() for r in RECORD_ID.findall(g)} for g in goals if _value_pattern(v).search(g)]
            if about and owners and not any(about & ids for ids in owners):
                # the fact belongs to another goal's record (or to a record a goal creates: a new parcel's
                # declared value, said while a claim on another parcel is confirmed; play round 22)
                continue
            col = self.vocab.split(f)[1]
            if any(g != f and (g == col or g.endswith(" " + col) or f.endswith(" " + g)) for g in stated):
                continue  # another fact of the same kind is the one meant (a new record's value, not the old one's)
            if isinstance(v, int | float):
                plain = _unseparated(rest)  # "1,234.50" is one number
                near = re.search(rf"\b{re.escape(col)}\W{{0,3}}(?:(?:is|of|to|at)\s+)?\$?(\d+(?:\.\d+)?)(?![\d\-])",
                                 plain, re.IGNORECASE)
                if near is not None:  # "fines due 0.00" said of this fact, whatever other numbers the goals hold
                    if float(near.group(1)) == float(v):
                        continue
                    return f
                said = re.findall(r"(?<![\d\-.])\d+(?:\.\d+)?(?![\d\-])", plain)
                if any(float(x) == float(v) for x in said) or value_stated(v, plain):
                    continue  # the user's own value, written another way ("$0.00" for 0, "three" for 3)
            elif isinstance(v, str) and "@" in v:
                said = re.findall(r"[\w.+-]+@[\w.-]+\w", rest)
            elif isinstance(v, str) and re.match(r"\d{4}-\d{2}-\d{2}", v):
                said = [day.isoformat() for day, _ in stated_datetimes(rest)]  # "May 10, 2026", "05/10/2026" too
                if v[:10] in said:
                    continue  # the user's own date, written another way
            else:
                continue
            if said and not any((x in asked) if not x[0].isdigit() or "-" in x else x in asked_numbers for x in said):
                return f  # a value of that kind the user neither knows nor asked for
        return None

    def _answers(self, sentence: str) -> bool:
        """Whether a statement answers one of the user's questions: it names what the question asks about
        and the record it asks about (a name the user knows that the question says)."""
        if sentence.rstrip().endswith("?"):
            return False
        low = sentence.lower()
        for o in self.progress.objectives:
            if o.kind == "read" and any(has_words(low, a) for a in o.asks) and any(
                    isinstance(v, str) and len(v) >= 3 and v in o.text and v in sentence for v in self.known.values()):
                return True
        return False

    async def reply(self, agent_text: str) -> str:
        return self.voice.say(self._reply(agent_text))

    def _reply(self, agent_text: str) -> str:
        """The reply in canonical lines (:meth:`reply` says them in the user's voice)."""
        self.turns += 1
        if self.turns > self.budget:
            return self._stop("I have to go now.")
        if len(agent_text) > MESSAGE_LIMIT:
            # not read: no report, answer or yes in it counts, and it moves nothing along
            self.idle += 1
            if self.idle > self.patience:
                return self._stop("This is not getting anywhere; goodbye.")
            return TOO_LONG
        from scaleenv.env.judge import asks_to_act, questions, says_cannot

        reported = self.progress.reported()
        own = self.unquoted(agent_text)  # the agent's own words: the user's texts it quotes say nothing of its own
        moved = self.progress.update(own)
        correction = self._put_right(agent_text)
        if correction is not None:
            self.idle = 0
            # no yes, plea or next request (those were about the wrong record), but what it was asked ("and
            # your e-mail?") still answered
            parts, _ = self.answer(agent_text)
            rest = [p for p in parts if not p.startswith((YES, "No, that is not right",
                                                           NO_ALTERNATIVE, "I don't know"))]
            return " ".join([correction, *rest])
        if not self.pushed and says_cannot(own) and not asks_to_act(own) \
                and self.progress.reported() == reported:
            # a refusal of what the user asked, not a go-ahead question that quotes the rule it does not
            # break (play round 21) nor a report of a change that says what the rule would forbid (round 22)
            self.pushed = True
            self.idle = 0
            # the plea alone: a person who presses does not also say yes to the rest in the same breath
            return self.ctx.task.user_profile.pushback
        if self.progress.finished():
            # never end on a question ("could you give me the e-mail on your account?" after what read as a
            # report; "may I go ahead with those three?"; "anything else?"): answer it, end on a later message
            if questions(agent_text):
                parts, _ = self.answer(agent_text)
                return " ".join(p for p in parts if not p.startswith("What I need is")) or NOTHING_ELSE
            return self._stop(FINISHED)
        if self.progress.stated_done() and self.progress.said < len(self.goals):
            # the requests said so far are dealt with: the user answers what it was asked, then says its next one
            answers = self._answers_to(agent_text)
            self.progress.said += 1
            self.idle = 0
            nxt = self.progress.said - 1
            return " ".join([*answers, f"{CANONICAL['next']} {redact(self._spoken(nxt, self.goals[nxt]), self._hidden())}"])
        parts, asked = self.answer(agent_text)
        if asked or moved:
            self.idle = 0
        else:
            self.idle += 1
            if self.idle > self.patience:
                return self._stop("This is not getting anywhere; goodbye.")
        if moved and not parts:
            parts.append(f"Thanks. I still need this: {self.recap()}")
        elif not parts:
            parts.append(f"That does not finish my request yet. I still need this: {self.recap()}")
        return " ".join(parts)


def _stem(word: str) -> str:
    """A verb form's stem: "declined", "declining", "decline" -> "declin"; "cancelled" -> "cancel";
    "withdrawn" -> "withdraw"."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    else:
        if word.endswith("wn"):
            word = word[:-1]
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "aeiousz":
        word = word[:-1]
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


_TALK_VERBS = frozenset(_stem(w) for w in (
    "confirm", "proceed", "continue", "go", "send", "take", "make", "start", "end", "mark", "set", "update", "add",
    "create", "record", "change", "edit", "log", "get", "check", "open", "close"))
"""Verbs too common in talk to tell one move from another ("shall I go ahead and confirm?")."""


def _action_verbs(spec: DomainSpec | None, objectives: list[Any], wanted: Iterable[str] = ()
                  ) -> tuple[set[str], set[str]]:
    """(the stems of the domain's moves the user asked for none of, the stems of those it asked for). A
    lifecycle move's verb ("decline", "retract") is asked for when the user's requests or the words that
    report them done ("withdrawn", "retracted") say it; and, whatever word the user used for it, when the
    move is one its task makes (``wanted``: the tools of the task's own changes, "freeze registration" for
    "pause my enrollment") or one that leaves a record in a state the goals' done words name (the
    "rejected" of "deny claim" for "reject it", whichever branch of an if-otherwise request holds)."""
    from scaleenv.env.vocabulary import norm

    said = {_stem(w) for o in objectives for text in (o.text, *o.done_words) for w in re.findall(r"[a-z]+", text.lower())}
    states = {norm(w) for o in objectives for w in o.done_words}
    made = set(wanted)
    transitions = [t for t in (spec.tools if spec is not None else [])
                   if t.kind == "write" and t.meta.get("family") == "transition" and t.meta.get("verb")]
    moves = {_stem(str(t.meta["verb"]).split("_")[0]) for t in transitions}
    moves = {m for m in moves if len(m) >= 4 and m not in _TALK_VERBS}
    chosen = {_stem(str(t.meta["verb"]).split("_")[0]) for t in transitions
              if t.name in made or (t.meta.get("to") and norm(str(t.meta["to"])) in states)}
    asked = said | chosen
    return moves - asked, (moves & asked) | {_stem(w) for o in objectives for w in o.done_words if " " not in w}


def has_words(text: str, phrase: str) -> bool:
    """Whether ``text`` holds ``phrase`` as whole words (case, punctuation and plurals aside)."""
    from scaleenv.env.vocabulary import has_phrase, norm, with_plurals

    t = norm(text)
    return any(has_phrase(t, p) for p in with_plurals([norm(phrase)]))


SLIP_OPENERS = ("Sorry, my mistake: I gave you the wrong one.", "Oh, wait, that is not the right number.",
                "Hold on, I mixed them up.")
"""How the scripted user begins putting its slip right (one per task, by its id)."""

class OpenAIUser(User):
    """An LLM user: persona and hidden goal in its system prompt; the agent's messages are its
    ``user`` turns and its own messages are ``assistant`` turns."""

    def __init__(self, model: str, options: UserOptions, chat: Any):
        self.model = model
        self.name = f"openai:{model}"
        self.options = options
        self.chat = chat

    def reset(self, ctx: UserContext) -> None:
        super().reset(ctx)
        self.history: list[dict[str, Any]] = [
            {"role": "system", "content": user_prompt(ctx.task, self.options.system_prompt)},
            {"role": "user", "content": GREETING},
        ]

    async def _say(self) -> str:
        from scaleenv.llm.client import ChatError

        try:
            reply = await self.chat.complete(self.history)
        except ChatError as e:
            raise UserError(f"user {e}") from None
        for k, v in reply.usage.items():
            self.usage[k] = self.usage.get(k, 0) + v
        text = reply.message.get("content")
        if reply.message.get("tool_calls") or not isinstance(text, str) or not text.strip():
            raise UserError(f"user malformed: {self.name} replied without text")
        self.history.append({"role": "assistant", "content": text})
        return text

    async def opening(self) -> str:
        self.turns += 1
        return await self._say()

    async def reply(self, agent_text: str) -> str:
        self.turns += 1
        self.history.append({"role": "user", "content": agent_text})
        if self.turns > self.budget:
            return f"I have to go now. {STOP}"
        return await self._say()


BUILTIN_USERS = ("scripted",)


def check_user_spec(spec: str) -> str:
    """Validate a user name (``scripted`` or ``openai:MODEL``); return it."""
    from scaleenv.env.agents import check_policy_spec

    return check_policy_spec(spec, BUILTIN_USERS, "user")


def make_user(spec: str, options: UserOptions | None = None, clients: Any = None) -> User:
    options = options or UserOptions()
    check_user_spec(spec)
    if spec == "scripted":
        return ScriptedUser(options.patience)
    from scaleenv.env.agents import ChatClients
    model = spec.partition(":")[2].strip()
    settings = options.chat_settings(model)
    clients = clients if clients is not None else ChatClients()
    return OpenAIUser(model, options, clients.get(settings))
