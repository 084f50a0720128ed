"""Procedure checks: what a domain's policy asks the agent to do before it changes anything, read
deterministically from the conversation (no model).

``identity``: when the policy has an identity rule, the user's identity was verified before the
first change: before the first successful write, the agent made a successful call with one of the
user's identity facts as an argument (a look-up by name or e-mail), or with part of one (its words,
"Micheal Smith" for "Mr. Micheal Smith II": text filters match substrings) whose output holds the
whole fact (the user's record came back), or the user stated one in reply to the agent (the opening
request does not count: nobody asked). It does not apply when the user is a member of staff looking
after a record (:func:`is_staff`): there is no customer to verify.

``confirmation``: when the policy has a confirmation rule, every successful write it covers (its
``tools``; all write tools when it names none) came after an explicit yes to a proposal that names
that change: the agent asked a question, the user's next message has a sentence that begins with a
yes ("Yes", "Sure, go ahead") and none that begins with a no, and the agent's text since the user's
previous yes or no (the proposal) names the write's new values, or what it does when it passes only
record ids (:func:`names_change`; "the record and the new values", as the rule says).
So a yes covers exactly the writes it was asked for: "Shall I go ahead?" naming nothing, a yes to
"anything else?", or a yes to "shall I look up APT-0012?" covers no write. One itemised proposal
("Shall I renew PAT-0050, create ... and lend CPY-0087?") covers each change it lists, until the user
answers another question. A proposal the user answered with neither a yes nor a no stands: the yes
to "shall I go ahead with these four changes?" asked right after covers what it listed.

The checks read the episode's own record, the same on every channel:
:attr:`~scaleenv.env.core.ToolEnv.log` holds each tool call with its result, each message to the
user and each reply, whether they came as assistant messages (rollouts), as tool calls of a
framework (MCP, TRL, OpenEnv, verifiers) or through ``say`` and ``message_user`` (SkyRL, verl).

The checks need someone to ask. :class:`~scaleenv.env.core.ToolEnv` requires them in conversational
mode only (an unmet check sets the binary reward to 0 and adds a line to the diff); in solo mode,
where the request is the whole conversation, they are not applied (the gates play solo).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.reward.facts import value_stated
from scaleenv.reward.state import Reward

USER_TOOL = "send_message_to_user"
"""The tool through which tool-channel agents talk to the user (its result is the user's reply)."""

IDENTITY = "identity_verified"
CONFIRMATION = "writes_confirmed"

@functools.lru_cache(maxsize=1)
def _yes_no_phrases() -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    """(fillers, (phrase, "yes" or "no") longest first) from the data file ``reward/yes_no.txt``."""
    from importlib.resources import files

    fillers: set[str] = set()
    phrases: list[tuple[str, str]] = []
    for line in files("scaleenv.reward").joinpath("yes_no.txt").read_text(encoding="utf-8").splitlines():
        kind, _, phrase = line.split("#")[0].partition(":")
        phrase = " ".join(_words(phrase.lower()))
        if kind.strip() == "filler" and phrase:
            fillers.add(phrase)
        elif kind.strip() in ("yes", "no") and phrase:
            phrases.append((phrase, kind.strip()))
    # the longer phrase first; of two alike, the no ("definitely not" before "definitely")
    phrases.sort(key=lambda p: (-len(p[0].split()), p[1] != "no"))
    return frozenset(fillers), tuple(phrases)


def says(sentence: str) -> str | None:
    """"yes" or "no" when ``sentence`` begins (after fillers such as "hmm", "well") with a phrase of
    ``reward/yes_no.txt`` that says it; None otherwise ("I don't know that, sorry.")."""
    fillers, phrases = _yes_no_phrases()
    words = _words(sentence.lower())
    while words and words[0] in fillers:
        words = words[1:]
    head = " ".join(words[:4])
    for phrase, answer in phrases:
        if head == phrase or head.startswith(phrase + " "):
            return answer
    return None


def reply_says(reply: str) -> str:
    """"yes", "no" or "neither": what a user's reply says to a proposal, sentence by sentence (:func:`says`);
    a no anywhere in it makes it a no."""
    said = {says(x) for x in _sentences(reply)}
    return "no" if "no" in said else "yes" if "yes" in said else "neither"


@dataclass
class _Event:
    kind: str  # "agent" (text to the user), "user" (the user's text), "call" (a domain tool call)
    text: str = ""
    tool: str = ""
    args: Any = None
    ok: bool = False
    turn: int = 0  # the assistant message the event belongs to (user text: the one it answers)
    output: Any = None  # a call's result


def _ok(content: object) -> bool:
    if not isinstance(content, str):
        return True
    try:
        data = json.loads(content)
    except ValueError:
        return True
    return not (isinstance(data, dict) and set(data) == {"error", "message"})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def events(messages: Sequence[Mapping[str, Any]]) -> list[_Event]:
    """The conversation as agent text, user text and tool calls with their outcome, in order (a
    user-tool call is agent text and its result the user's reply; the opening request is left out)."""
    out: list[_Event] = []
    pending: dict[str, _Event] = {}
    turn = 0
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            turn += 1
            text = _text(m.get("content"))
            if text.strip():
                out.append(_Event("agent", text, turn=turn))
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") if isinstance(tc, Mapping) else None
                if not isinstance(fn, Mapping):
                    continue
                raw = fn.get("arguments")
                try:
                    args = json.loads(raw) if isinstance(raw, str) and raw else (raw or {})
                except ValueError:
                    args = {}
                name = str(fn.get("name") or "")
                if name == USER_TOOL:
                    msg = args.get("message") if isinstance(args, Mapping) else None
                    ev = _Event("agent", msg if isinstance(msg, str) else "", turn=turn)
                else:
                    ev = _Event("call", tool=name, args=args, turn=turn)
                out.append(ev)
                pending[str(tc.get("id"))] = ev
        elif role == "tool":
            key = str(m.get("tool_call_id"))
            if key not in pending:
                continue
            ev = pending.pop(key)
            if ev.kind == "agent":
                out.append(_Event("user", _text(m.get("content")), turn=ev.turn))
            else:
                ev.ok = _ok(m.get("content"))
                ev.output = m.get("content")
        elif role == "user" and turn > 0:
            out.append(_Event("user", _text(m.get("content")), turn=turn))
    return out


def _norm(v: object) -> str:
    return re.sub(r"\s+", " ", str(v)).strip().casefold()


_STAFF = re.compile(r"^\W*(you are|i am|i'm)\s+(a|an|the)\s+(staff member|member of staff|employee)\b", re.IGNORECASE)


def is_staff(task: Task) -> bool:
    """Whether the task's user is a member of staff looking after a record (the persona says so)
    rather than a customer with an identity to verify."""
    return bool(_STAFF.search(task.user_profile.persona or ""))


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def _strings(value: object, out: list[str]) -> list[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    elif isinstance(value, str | int) and not isinstance(value, bool):
        out.append(_norm(value))
    return out


def _returned(output: object, value: str) -> bool:
    """Whether a call's output holds ``value`` (normalised) as one of its values."""
    text = output if isinstance(output, str) else json.dumps(output)
    try:
        data = json.loads(text)
    except ValueError:
        return value in _norm(text)
    return value in _strings(data, [])


def _part_of(arg: str, value: str) -> bool:
    """Whether a look-up argument is part of an identity value: a substring or a subset of its
    words, with at least one word of two letters or more."""
    words = _words(arg)
    if not any(len(w) >= 2 for w in words):
        return False
    return arg in value or set(words) <= set(_words(value))


def _identity_met(evs: list[_Event], writes: list[_Event], values: list[str]) -> bool:
    if not writes:
        return True
    if not values:
        return True  # the task names no identity facts: nothing to verify
    first = evs.index(writes[0])
    for ev in evs[:first]:
        if ev.kind == "call" and ev.ok and isinstance(ev.args, Mapping):
            args = [_norm(a) for a in ev.args.values() if isinstance(a, str | int) and not isinstance(a, bool)]
            if any(a in values for a in args):
                return True
            if any(_part_of(a, v) and _returned(ev.output, v) for a in args for v in values):
                return True
        if ev.kind == "user" and any(v and v in _norm(ev.text) for v in values):
            return True
    return False


_RECORD_ID = re.compile(r"^[a-z][a-z0-9]*-\d+$")


def _distinctive(value: object) -> str | None:
    """A write argument that names the write in a proposal (normalised): a record id, or a string
    with a digit, an ``@`` or two words or more (a date, an e-mail, a title); never a bare number or
    an enum-like word, which a proposal of another change could hold too."""
    if not isinstance(value, str):
        return None
    v = _norm(value)
    if len(v) < 4:
        return None
    if _RECORD_ID.match(v) or re.search(r"[\d@]", v) or len(_words(v)) >= 2:
        return v
    return None


def _has_token(text: str, value: str) -> bool:
    """Whether normalised ``text`` holds normalised ``value`` as whole words (``PET-0063`` not inside
    ``PET-00631``)."""
    return bool(re.search(r"(?<![\w-])" + re.escape(value) + r"(?![\w]|-\w)", text))


def names_write(proposal: str, args: object) -> bool:
    """Whether ``proposal`` (what the agent asked the user to confirm) names a write called with
    ``args``: one of its record ids or distinctive values appears in it, as whole words (the
    itemising test of a careful agent: does this item name that call?)."""
    if not isinstance(args, Mapping):
        return False
    text = _norm(proposal)
    return any((v := _distinctive(a)) is not None and _has_token(text, v) for a in args.values())


def _values(value: object) -> list[object]:
    """The nameable values of one argument: a string or a number (each element of a list); never a
    boolean (a switch is named by the action, not by "true"), ``None`` or an object."""
    if isinstance(value, list):
        return [x for v in value for x in _values(v)]
    if isinstance(value, bool) or value is None or not isinstance(value, str | int | float):
        return []
    if isinstance(value, str) and not value.strip():
        return []
    return [value]


def _nameable(args: object) -> list[object]:
    """Every nameable value a call passes (:func:`_values` of each argument)."""
    return [v for a in (args.values() if isinstance(args, Mapping) else ()) for v in _values(a)]


@functools.cache
def talk_words() -> frozenset[str]:
    """Words too common in talk to say which change a proposal is about (``talk_words.txt``)."""
    text = (Path(__file__).parent / "talk_words.txt").read_text(encoding="utf-8")
    return frozenset(w for line in text.splitlines() if (w := line.strip().lower()) and not w.startswith("#"))


_INFLECTIONS = ("", "s", "es", "ed", "d", "ing", "ting", "ted")


def _form_of(word: str, base: str) -> bool:
    """Whether ``word`` is ``base`` or one of its inflected forms ("changed", "setting"; not "settle")."""
    stems = (base, base[:-1]) if base.endswith("e") else (base,)
    return any(word.startswith(st) and word[len(st):] in _INFLECTIONS for st in stems)


def _telling(words: list[str]) -> list[str]:
    """``words`` less the forms of the talk words (:func:`talk_words`)."""
    common = talk_words()
    return [w for w in words if not any(_form_of(w, t) for t in common)]


def _action_words(spec: DomainSpec | None, tool: str, task: Task | None = None) -> list[str]:
    """The words that say what a write tool does: its name's words less the domain's table nouns and its
    parameters' words (``cancel`` of ``cancel_appointment``; all its name's words when none is left:
    ``request_review``), the move's declared verb and the state it leads to (``delay_match``: "delay",
    "postponed"), the verb its description opens with ("discontinue" for ``stop_prescription``), and the words the task's requests use to say that move is done (its objectives'
    ``done_words`` that share one of those, less the words of ordinary talk, :func:`talk_words`:
    "discarded", "paused"; not "changed" or "now")."""
    nouns: set[str] = set()
    the_tool = spec.tool(tool) if spec is not None else None
    if spec is not None:
        for t in spec.tables:
            for w in t.name.split("_"):
                nouns |= {w, w.rstrip("s"), w[:-3] + "y" if w.endswith("ies") else w}
    if the_tool is not None:
        nouns |= {w for p in the_tool.parameters for w in p.name.split("_")}
    named = [w for w in tool.split("_") if len(w) >= 3]
    words = [w for w in named if w not in nouns and w.rstrip("s") not in nouns]
    if the_tool is not None:
        for key in ("verb", "to"):
            declared = the_tool.meta.get(key)
            if isinstance(declared, str):
                words += [w for w in re.split(r"[_\W]+", declared.lower()) if len(w) >= 3 and w not in nouns]
        # the verb its description opens with ("Discontinue a prescription." for stop_prescription: a player's
        # "I am about to discontinue all four of these" named it; play seed 8642)
        opening = _words(the_tool.description.lower())[:1]
        words += [w for w in _telling(opening) if len(w) >= 4 and w.isalpha() and w not in nouns]
    if not words:  # the name says it, nouns included ("request_review")
        words = named
    if task is not None:
        for o in task.user_profile.objectives:
            done = _telling([w for d in o.done_words for w in _words(d.lower()) if len(w) >= 3])
            if any(_says_word(set(done), w) for w in words):
                words += done
    return list(dict.fromkeys(words))


def _says_word(text_words: set[str], word: str) -> bool:
    """Whether one of ``text_words`` is ``word`` in some form ("cancelled", "cancellation" for
    ``cancel``; "lock" for ``locked``; not "address" for ``add``): the same first five letters when both
    have five or more, or one an inflected form of the other."""
    return any((len(w) >= 5 and len(word) >= 5 and w[:5] == word[:5]) or _form_of(w, word) or _form_of(word, w)
               for w in text_words)


def names_change(proposal: str, tool: str, args: object, spec: DomainSpec | None = None,
                 task: Task | None = None) -> bool:
    """Whether ``proposal`` names the change a write makes, as a confirmation rule asks ("tell the
    user exactly what you are about to do: the record and the new values"): every new value it passes
    (numbers, dates and enum values in any written form; not the record ids, which a careful agent may
    name as the user knows them, "your pet Rex"), and, when it passes no value but record ids (a cancel,
    a publish), none of another record's id alone, and what it does in any of the words that say it (:func:`_action_words`: "cancel" for
    ``cancel_appointment``, "postpone" for ``delay_match``, whose move leads to "postponed", the user's
    own "discard" for ``throw_away_draft``). A change named by its action alone ("shall I cancel it?")
    spends the yes: one such change per yes."""
    values = _nameable(args)
    new = [v for v in values if not (isinstance(v, str) and _RECORD_ID.match(_norm(v)))]
    nothing = _said_none(proposal, args)
    for v in new:
        if not value_stated(v, proposal, fuzzy=isinstance(v, str) and len(v) >= 40) and v not in nothing:
            return False
    if new:
        return True  # the new values named: the change is said (the record may be named as the user knows it)
    text = _norm(proposal)
    if _RECORD_TOKEN.search(text) and not _ids_named(text, values):
        return False  # a proposal about other records ("cancel APT-0012" does not cover APT-0013)
    action = _action_words(spec, tool, task)
    words = set(_words(text.replace("_", " ")))  # "in_transit" says "transit"
    return not action or any(_says_word(words, w) for w in action)


def _said_none(proposal: str, args: object) -> list[object]:
    """The "none" values of ``args`` that ``proposal`` says as "no" or "without" its argument's noun
    ("with no insurance" for ``insurance: none``; a player's correct consent at seed 8642)."""
    if not isinstance(args, Mapping):
        return []
    words = " ".join(_words(proposal.lower()))
    out: list[object] = []
    for key, value in args.items():
        if isinstance(value, str) and value.lower() == "none":
            noun = _words(str(key).lower())[-1:]
            if noun and re.search(rf"\b(?:no|without)\s+(?:\w+\s+)?{re.escape(noun[0])}", words):
                out.append(value)
    return out


_RECORD_TOKEN = re.compile(r"(?<![\w-])[a-z][a-z0-9]*-\d+(?![\w]|-\w)")


def _ids_named(text: str, values: Sequence[object]) -> bool:
    """Whether normalised ``text`` names one of the record ids among ``values``."""
    return any(isinstance(v, str) and _RECORD_ID.match(_norm(v)) and _has_token(text, _norm(v)) for v in values)


_ASKS_CONSENT = re.compile(
    r"\b(please confirm|confirm (that|whether|if)|yes\s*/\s*no|yes or no|let me know if (i|you|that|this)|"
    r"may i (go ahead|proceed)|reply (with )?yes|say yes|(your|a) (yes|go-ahead|ok|okay|consent|permission))\b",
    re.IGNORECASE)
"""A request for the user's go-ahead said without a question mark ("please confirm ... (yes/no).")."""


def _asks(text: str) -> bool:
    """Whether ``text`` asks the user something (a question mark, or a go-ahead asked for in words)."""
    return "?" in text or bool(_ASKS_CONSENT.search(text))


def _sentences(text: str) -> list[str]:
    return [x for x in re.split(r"(?<=[.!?])\s+|\n+", text) if x.strip()]


def _confirmation_met(evs: list[_Event], covered: list[_Event], spec: DomainSpec | None,
                      task: Task | None = None) -> bool:
    """Every covered write came after a yes to a question whose proposal names it (:func:`names_change`)."""
    need = {id(e) for e in covered}
    asked = False
    proposal = ""  # the agent's text the standing yes answered ("" when no yes stands)
    said_since: list[str] = []  # the agent's text since the user last said yes or no
    for ev in evs:
        if ev.kind == "agent":
            asked = asked or _asks(ev.text)
            said_since.append(ev.text)
        elif ev.kind == "user":
            if asked:  # a yes or a no settles the standing yes: a new one, or none
                said = reply_says(ev.text)
                if said != "neither":
                    proposal = "\n".join(said_since) if said == "yes" else ""
                    said_since = []
                else:
                    # the user answered something else: the agent's proposal still stands (asked again in
                    # short, "shall I make these four changes?", it is the same proposal), but not the
                    # question just answered ("Before I change anything, could you verify your identity?")
                    said_since = [x for t in said_since for x in _sentences(t) if not _asks(x)]
            else:
                said_since = []
            asked = False
        elif id(ev) in need:
            if not (proposal and names_change(proposal, ev.tool, ev.args, spec, task)):
                return False
            if not _ids_named(_norm(proposal), _nameable(ev.args)) and \
                    all(isinstance(v, str) and _RECORD_ID.match(_norm(v)) for v in _nameable(ev.args)):
                proposal = ""  # a change named by its action alone ("shall I cancel it?") spends the yes
    return True


def procedure_checks(task: Task, spec: DomainSpec, messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    """``(name, met)`` for each procedure the domain's policy asks for (none without a policy):
    :data:`IDENTITY` and :data:`CONFIRMATION` (see the module docstring)."""
    policy = spec.policy
    if policy is None:
        return []
    evs = events(messages)
    writes = [e for e in evs if e.kind == "call" and e.ok and (t := spec.tool(e.tool)) is not None and t.kind == "write"]
    out: list[tuple[str, bool]] = []
    if policy.of_kind("identity"):
        known = task.user_profile.known
        values = [_norm(known[f]) for f in task.user_profile.identity if f in known and known[f] is not None]
        out.append((IDENTITY, is_staff(task) or _identity_met(evs, writes, values)))
    rules = policy.of_kind("confirmation")
    if rules:
        scoped = {t for r in rules for t in r.tools}
        covered = [e for e in writes if not scoped or e.tool in scoped]
        out.append((CONFIRMATION, _confirmation_met(evs, covered, spec, task)))
    return out


def with_procedure(reward: Reward, checks: Sequence[tuple[str, bool]]) -> Reward:
    """``reward`` with each check as a component (``procedure_<name>``: 1.0 or 0.0); an unmet check
    makes the binary reward 0 and says why in the diff."""
    if not checks:
        return reward
    components = dict(reward.components)
    diff = list(reward.diff)
    for name, met in checks:
        components[f"procedure_{name}"] = 1.0 if met else 0.0
        if not met:
            diff.append(f"procedure: {name} not met")
    ok = reward.success and all(met for _, met in checks)
    # the row-level mismatches and unseen facts stay: the sub-goal shapes read them
    return replace(reward, score=1.0 if ok else 0.0, success=ok, components=components, diff=diff)


__all__ = ["CONFIRMATION", "IDENTITY", "is_staff", "names_change", "names_write", "procedure_checks",
           "with_procedure"]
