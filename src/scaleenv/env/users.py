"""Simulated users: ``scripted`` (deterministic, from the task's profile) and ``openai:MODEL``
(an LLM playing the user with a persona, a hidden goal and the stop marker).

A user opens the conversation with its request, then answers each agent message. A reply that
contains :data:`~scaleenv.formats.trajectory.STOP` ends the episode (termination ``user_done``).
"""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scaleenv.env.agents import EndpointOptions
from scaleenv.errors import ScaleEnvError
from scaleenv.formats.task import Task
from scaleenv.formats.trajectory import STOP


class UserError(ScaleEnvError):
    """The simulated user could not produce a message (endpoint error, timeout, malformed reply)."""


@dataclass
class UserContext:
    task: Task
    rng: random.Random
    goals_met: Callable[[], bool] = lambda: False
    """Whether the world and what the agent said already satisfy the task (the reward's verdict)."""
    max_turns: int = 10
    seed: int = 0


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


class User(ABC):
    name = "user"

    def reset(self, ctx: UserContext) -> None:
        self.ctx = ctx
        self.turns = 0
        self.usage: dict[str, int] = {}

    @abstractmethod
    async def opening(self) -> str:
        """The user's first message."""

    @abstractmethod
    async def reply(self, agent_text: str) -> str:
        """The user's answer to what the agent said (ends with the stop marker when done)."""


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _value_pattern(v: Any) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(_fmt(v)) + r"(?![\w]|\.\d)")


_GENERIC = {"at", "on", "of", "id", "date", "name", "time", "status", "type", "the", "a", "for", "to", "in", "by"}
_QUESTION = re.compile(
    r"\?|\b(please (provide|give|tell|share|confirm|send)|could you|can you|would you|may i|what|which|when|"
    r"need|tell me|let me know)\b")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9]+", " ", text.lower().replace("_", " "))).strip()


def fact_phrases(fact: str) -> list[str]:
    """Ways an agent may ask about a fact: ``owner email`` -> [owner email, email];
    ``appointment scheduled at`` -> [appointment scheduled at, appointment scheduled, scheduled]."""
    words = _norm(fact).split()
    out: list[str] = []

    def add(ws: list[str]) -> None:
        while ws and ws[-1] in ("at", "on", "of", "in", "by"):
            ws = ws[:-1]
        p = " ".join(ws)
        if ws and p not in out and not (len(ws) == 1 and (ws[0] in _GENERIC or len(ws[0]) < 3)):
            out.append(p)

    add(list(words))
    if len(words) >= 2:
        add(words[1:])
    return out


def asked_facts(text: str, facts: list[str]) -> list[str]:
    """The facts an agent message asks about (only if the message reads as a question or request)."""
    norm = " " + _norm(text) + " "
    if not _QUESTION.search(text.lower()):
        return []
    return [f for f in facts if any(f" {p} " in norm for p in fact_phrases(f))]


def redact(text: str, values: dict[str, Any]) -> str:
    """Hide withheld values in a sentence: ``... scheduled at 2026-05-10T07:45:00 ...`` ->
    ``... scheduled at [ask me] ...``."""
    for v in values.values():
        if v is None or _fmt(v) == "":
            continue
        text = _value_pattern(v).sub("[ask me]", text)
    return text


class ScriptedUser(User):
    """Deterministic user driven by the task's profile.

    - Opens with its request (persona and goals; withheld values are replaced by ``[ask me]``).
    - Answers questions about facts it knows; reveals withheld facts only when asked about them;
      says it does not know anything else.
    - Ends with the stop marker when its goals are met (the reward says so) or its turns run out,
      or after ``patience`` agent messages in a row that neither ask it anything nor finish the job.
    """

    name = "scripted"

    def __init__(self, patience: int = 2):
        self.patience = patience

    def reset(self, ctx: UserContext) -> None:
        super().reset(ctx)
        profile = ctx.task.user_profile
        self.known: dict[str, Any] = dict(profile.known)
        self.withheld = [w for w in profile.withheld if w in self.known]
        self.revealed: set[str] = set()
        self.idle = 0

    def request(self) -> str:
        profile = self.ctx.task.user_profile
        goals = list(profile.goals) or [self.ctx.task.instruction]
        hidden = {w: self.known[w] for w in self.withheld if w not in self.revealed}
        body = " ".join(redact(g, hidden) for g in goals)
        persona = profile.persona.strip()
        intro = re.sub(r"^You are\b", "Hi, I am", persona) if persona else "Hi."
        return f"{intro} {body}".strip()

    async def opening(self) -> str:
        self.turns += 1
        return self.request()

    def _stop(self, text: str) -> str:
        return f"{text} {STOP}"

    async def reply(self, agent_text: str) -> str:
        self.turns += 1
        if self.ctx.goals_met():
            return self._stop("Thank you, that is everything I needed.")
        asked = asked_facts(agent_text, list(self.known))
        if self.turns > self.ctx.max_turns:
            return self._stop("I have to go now.")
        if asked:
            self.idle = 0
            self.revealed.update(a for a in asked if a in self.withheld)
            return " ".join(f"My {a} is {_fmt(self.known[a])}." for a in asked)
        self.idle += 1
        if self.idle > self.patience:
            return self._stop("This is not getting anywhere; goodbye.")
        if _QUESTION.search(agent_text.lower()):
            return "I don't have any other details. " + self.request().replace("Hi, I am", "I am", 1)
        return "That does not finish my request yet. To recap: " + self.request().replace("Hi, I am", "I am", 1)


DEFAULT_USER_PROMPT = (
    "You are playing a user who contacts a customer-service agent. Stay in character.\n"
    "{persona}\n"
    "Your goal (the agent does not know it; state it in your own words, one request at a time if there are "
    "several):\n{goals}\n"
    "Facts you know and may share: {known}\n"
    "Facts you know but share ONLY if the agent asks for them: {withheld}\n"
    "Rules: write only your next message to the agent, briefly and in the first person. Never invent facts you "
    "were not given; if asked for something you don't know, say you don't know. When all your goals are done, "
    "or the agent cannot help further, end your message with " + STOP + "."
)
GREETING = "Hi! How can I help you today?"


def user_prompt(task: Task, template: str | None = None) -> str:
    profile = task.user_profile
    known = dict(profile.known)
    withheld = [w for w in profile.withheld if w in known]
    shown = "; ".join(f"{k}: {_fmt(v)}" for k, v in sorted(known.items()) if k not in withheld) or "none"
    hidden = "; ".join(f"{k}: {_fmt(known[k])}" for k in withheld) or "none"
    goals = "\n".join(f"- {g}" for g in (profile.goals or [task.instruction]))
    text = template or DEFAULT_USER_PROMPT
    for key, val in (("{persona}", profile.persona), ("{goals}", goals), ("{known}", shown),
                     ("{withheld}", hidden), ("{instruction}", task.instruction)):
        text = text.replace(key, val)
    return text


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
        if self.turns > self.ctx.max_turns:
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
    from scaleenv.llm.client import ChatSettings

    model = spec.partition(":")[2].strip()
    settings = ChatSettings(model=model, base_url=options.base_url, api_key_env=options.api_key_env,
                            timeout=options.timeout, max_retries=options.max_retries,
                            temperature=options.temperature, max_tokens=options.max_tokens, seed=options.seed,
                            extra_body=dict(options.extra_body))
    clients = clients if clients is not None else ChatClients()
    return OpenAIUser(model, options, clients.get(settings))
