"""What synthesis agents talk to: per-role model choice, a concurrency limit, the response cache,
token accounting, and structured output with repair prompts.

    session = LLMSession(backend, LLMConfig(model="gpt-4.1-mini", role_models={"solver": "qwen3-235b"}))
    ask = session.scoped(domain="pet_care")
    tools = ask.json("tool_schema", messages, validate=check_tools)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from scaleenv.llm.accounting import TokenLedger
from scaleenv.llm.base import ChatModel, ChatRequest, ChatResponse, LLMError, LLMOutputError
from scaleenv.llm.cache import ResponseCache
from scaleenv.llm.parse import ParseError, parse_code, parse_json

_T = TypeVar("_T")

Validator = Callable[[Any], list[str] | None]
"""Returns the problems of a parsed reply (empty or None when it is usable); they go back to the
model in a repair prompt."""

REPAIR_PROMPT = (
    "Your reply could not be used:\n{problems}\n\n"
    "Reply again with the complete, corrected answer in the same format ({what}), and nothing else."
)


@dataclass
class LLMConfig:
    """How the LLM back end reaches its models. Picklable (travels to build workers as a dict)."""

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    role_models: dict[str, str] = field(default_factory=dict)
    concurrency: int = 8  # requests in flight at once (tools, dependency batches and task attempts)
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 1.0
    temperature: float = 0.0
    max_tokens: int | None = None
    repair_rounds: int = 2
    cache_dir: str | None = None

    def model_for(self, role: str) -> str:
        return self.role_models.get(role) or self.model

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LLMConfig:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def public(self) -> dict[str, Any]:
        """Recorded in the universe: never the key, only the name of its variable."""
        out = self.to_json()
        out.pop("cache_dir", None)
        return out


class LLMSession:
    def __init__(self, backend: ChatModel, config: LLMConfig, *, cache: ResponseCache | None = None,
                 ledger: TokenLedger | None = None):
        self.backend = backend
        self.config = config
        self.cache = cache if cache is not None else (ResponseCache(config.cache_dir) if config.cache_dir else None)
        self.ledger = ledger or TokenLedger()
        self._slots = threading.BoundedSemaphore(max(1, config.concurrency))
        self.repairs: dict[str, int] = {}  # repair prompts sent, by role
        self._repair_lock = threading.Lock()

    @classmethod
    def from_config(cls, config: LLMConfig, backend: ChatModel | None = None) -> LLMSession:
        if backend is None:
            from scaleenv.llm.client import OpenAICompatibleChatModel

            backend = OpenAICompatibleChatModel(config.base_url, config.api_key_env, timeout=config.timeout,
                                                max_retries=config.max_retries, backoff=config.backoff,
                                                concurrency=config.concurrency)
        return cls(backend, config)

    def scoped(self, domain: str | None = None, task: str | None = None) -> Scoped:
        return Scoped(self, domain, task)

    # --- one request -----------------------------------------------------------------
    def chat(self, role: str, messages: list[dict[str, str]], *, domain: str | None = None,
             task: str | None = None, temperature: float | None = None, tool: str | None = None) -> ChatResponse:
        req = ChatRequest(model=self.config.model_for(role), messages=messages,
                          temperature=self.config.temperature if temperature is None else temperature,
                          max_tokens=self.config.max_tokens, role=role)
        hit = self.cache.get(req) if self.cache is not None else None
        if hit is not None:
            self.ledger.record(role, domain, task, hit.prompt_tokens, hit.completion_tokens, cached=True, tool=tool)
            return hit
        with self._slots:
            try:
                resp = self.backend.complete(req)
            except LLMError as e:
                self.ledger.count_requests(getattr(e, "attempts", 1))
                raise
            except Exception as e:  # noqa: BLE001 - a backend bug must not crash a build
                self.ledger.count_requests(1)
                raise LLMError(f"{role}: chat backend failed: {type(e).__name__}: {str(e)[:300]}") from None
        self.ledger.count_requests(int(resp.meta.get("attempts", 1)))
        self.ledger.record(role, domain, task, resp.prompt_tokens, resp.completion_tokens, cached=False, tool=tool)
        if self.cache is not None:
            self.cache.put(req, resp)
        return resp

    # --- structured output -------------------------------------------------------------
    def json(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             domain: str | None = None, task: str | None = None, rounds: int | None = None,
             tool: str | None = None) -> dict[str, Any]:
        """Ask for a JSON object; on a parse error or validator problems, send a repair prompt (bounded).
        (Its values are typed ``Any`` like ``json.loads``'s: ``validate`` checks their shape.)"""
        return self._structured(role, messages, lambda t: parse_json(t, dict), validate, "one JSON value",
                                domain, task, rounds, tool)

    def code(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             domain: str | None = None, task: str | None = None, rounds: int | None = None,
             tool: str | None = None) -> str:
        """Ask for a Python code block (validated like :meth:`json`)."""
        return self._structured(role, messages, parse_code, validate, "one ```python code block", domain, task,
                                rounds, tool)

    def _structured(self, role: str, messages: list[dict[str, str]], parse: Callable[[str], _T],
                    validate: Validator | None, what: str, domain: str | None, task: str | None,
                    rounds: int | None, tool: str | None = None) -> _T:
        rounds = self.config.repair_rounds if rounds is None else rounds
        convo = list(messages)
        problems: list[str] = []
        for _ in range(rounds + 1):
            text = self.chat(role, convo, domain=domain, task=task, tool=tool).text
            try:
                value = parse(text)
                problems = list(validate(value) or []) if validate is not None else []
            except ParseError as e:
                problems = [str(e)]
            if not problems:
                return value
            with self._repair_lock:
                self.repairs[role] = self.repairs.get(role, 0) + 1
            shown = "\n".join(f"- {p}" for p in problems[:25])
            if len(problems) > 25:
                shown += f"\n- ... and {len(problems) - 25} more"
            convo = [*convo, {"role": "assistant", "content": text},
                     {"role": "user", "content": REPAIR_PROMPT.format(problems=shown, what=what)}]
        raise LLMOutputError(role, problems)


class Scoped:
    """An :class:`LLMSession` bound to a domain (and a task or a tool) for accounting."""

    def __init__(self, session: LLMSession, domain: str | None, task: str | None, tool: str | None = None):
        self.session = session
        self.domain = domain
        self.task = task
        self.tool = tool

    @property
    def config(self) -> LLMConfig:
        return self.session.config

    def for_task(self, task: str) -> Scoped:
        return Scoped(self.session, self.domain, task)

    def for_tool(self, tool: str) -> Scoped:
        return Scoped(self.session, self.domain, self.task, tool)

    def _scope(self) -> dict[str, Any]:
        return {"domain": self.domain, "task": self.task, "tool": self.tool}

    def chat(self, role: str, messages: list[dict[str, str]], *, temperature: float | None = None) -> ChatResponse:
        return self.session.chat(role, messages, **self._scope(), temperature=temperature)

    def json(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             rounds: int | None = None) -> dict[str, Any]:
        """See :meth:`LLMSession.json`."""
        return self.session.json(role, messages, **self._scope(), validate=validate, rounds=rounds)

    def code(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             rounds: int | None = None) -> str:
        return self.session.code(role, messages, **self._scope(), validate=validate, rounds=rounds)


def default_cache_dir(out: str | Path) -> Path:
    return Path(out) / "llm_cache"
