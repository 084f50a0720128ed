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
        self._memo: dict[Any, Any] = {}  # shared(): results by key
        self._memo_locks: dict[Any, threading.Lock] = {}

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

    def count_repair(self, role: str) -> None:
        """A repair prompt sent outside :meth:`structured` (a batched answer's one part sent back)."""
        with self._repair_lock:
            self.repairs[role] = self.repairs.get(role, 0) + 1

    def shared(self, key: Any, make: Callable[[], _T]) -> _T:
        """``make()`` once per ``key`` in this session: a request that serves several task attempts
        (a batch of chains) is asked by the first attempt that needs it, while the others wait for it
        and take the same result. An exception is not kept (the next caller tries again)."""
        with self._repair_lock:
            lock = self._memo_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = make()
            result: _T = self._memo[key]
            return result

    # --- one request -----------------------------------------------------------------
    def chat(self, role: str, messages: list[dict[str, str]], *, domain: str | None = None,
             task: str | None = None, temperature: float | None = None, tool: str | None = None,
             shares: list[str] | None = None) -> ChatResponse:
        """One request (from the cache when it holds the answer). ``shares``: the tasks one request
        serves, whose token figures split it (see :meth:`TokenLedger.record_shared`)."""
        req = ChatRequest(model=self.config.model_for(role), messages=messages,
                          temperature=self.config.temperature if temperature is None else temperature,
                          max_tokens=self.config.max_tokens, role=role)
        hit = self.cache.get(req) if self.cache is not None else None
        if hit is not None:
            self._record(role, domain, task, tool, shares, hit, cached=True)
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
        self._record(role, domain, task, tool, shares, resp, cached=False)
        if self.cache is not None:
            self.cache.put(req, resp)
        return resp

    def _record(self, role: str, domain: str | None, task: str | None, tool: str | None, shares: list[str] | None,
                resp: ChatResponse, cached: bool) -> None:
        if shares:
            self.ledger.record_shared(role, domain, shares, resp.prompt_tokens, resp.completion_tokens, cached)
        else:
            self.ledger.record(role, domain, task, resp.prompt_tokens, resp.completion_tokens, cached=cached,
                               tool=tool)

    # --- structured output -------------------------------------------------------------
    def json(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             domain: str | None = None, task: str | None = None, rounds: int | None = None,
             tool: str | None = None) -> dict[str, Any]:
        """Ask for a JSON object; on a parse error or validator problems, send a repair prompt (bounded).
        (Its values are typed ``Any`` like ``json.loads``'s: ``validate`` checks their shape.)"""
        return self.structured(role, messages, lambda t: parse_json(t, dict), validate, "one JSON value",
                               domain, task, rounds, tool)

    def code(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             domain: str | None = None, task: str | None = None, rounds: int | None = None,
             tool: str | None = None) -> str:
        """Ask for a Python code block (validated like :meth:`json`)."""
        return self.structured(role, messages, parse_code, validate, "one ```python code block", domain, task,
                               rounds, tool)

    def structured(self, role: str, messages: list[dict[str, str]], parse: Callable[[str], _T],
                   validate: Validator | None, what: str, domain: str | None, task: str | None,
                   rounds: int | None, tool: str | None = None, shares: list[str] | None = None) -> _T:
        """Ask, ``parse`` the reply (a :class:`ParseError` or ``validate``'s problems go back to the
        model in a repair prompt, at most ``rounds`` times), and return the parsed value."""
        rounds = self.config.repair_rounds if rounds is None else rounds
        convo = list(messages)
        problems: list[str] = []
        for _ in range(rounds + 1):
            text = self.chat(role, convo, domain=domain, task=task, tool=tool, shares=shares).text
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

    def __init__(self, session: LLMSession, domain: str | None, task: str | None, tool: str | None = None,
                 shares: list[str] | None = None):
        self.session = session
        self.domain = domain
        self.task = task
        self.tool = tool
        self.shares = shares

    @property
    def config(self) -> LLMConfig:
        return self.session.config

    def for_task(self, task: str) -> Scoped:
        return Scoped(self.session, self.domain, task)

    def for_tool(self, tool: str) -> Scoped:
        return Scoped(self.session, self.domain, self.task, tool)

    def for_tasks(self, tasks: list[str]) -> Scoped:
        """Requests that serve all of ``tasks`` at once: their tokens are split over them."""
        return Scoped(self.session, self.domain, None, None, list(tasks))

    def _scope(self) -> dict[str, Any]:
        return {"domain": self.domain, "task": self.task, "tool": self.tool}

    def chat(self, role: str, messages: list[dict[str, str]], *, temperature: float | None = None) -> ChatResponse:
        return self.session.chat(role, messages, **self._scope(), temperature=temperature, shares=self.shares)

    def structured(self, role: str, messages: list[dict[str, str]], parse: Callable[[str], _T], what: str, *,
                   validate: Validator | None = None, rounds: int | None = None) -> _T:
        """See :meth:`LLMSession.structured` (``what`` names the reply's format in a repair prompt)."""
        return self.session.structured(role, messages, parse, validate, what, self.domain, self.task, rounds,
                                       self.tool, self.shares)

    def json(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             rounds: int | None = None) -> dict[str, Any]:
        """See :meth:`LLMSession.json`."""
        return self.session.structured(role, messages, lambda t: parse_json(t, dict), validate, "one JSON value",
                                       self.domain, self.task, rounds, self.tool, self.shares)

    def code(self, role: str, messages: list[dict[str, str]], *, validate: Validator | None = None,
             rounds: int | None = None) -> str:
        return self.session.structured(role, messages, parse_code, validate, "one ```python code block",
                                       self.domain, self.task, rounds, self.tool, self.shares)


def default_cache_dir(out: str | Path) -> Path:
    return Path(out) / "llm_cache"
