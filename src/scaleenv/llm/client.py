"""The one client for OpenAI-compatible chat endpoints, for synthesis and for rollouts.

Both faces share the settings, the retry policy and the error type:

    OpenAICompatibleChatModel   synchronous ``complete(ChatRequest) -> ChatResponse`` (text), thread-safe:
                                what LLM synthesis calls from its worker threads
    OpenAIChat                  ``await complete(messages, tools) -> ChatReply`` (an assistant message
                                with tool calls): the ``openai:MODEL`` agent and user of rollouts

Retries are ours, not the SDK's (it runs with ``max_retries=0``): transient failures (connection
errors, timeouts, HTTP 408, 409, 429 and 5xx) are retried with exponential backoff and jitter,
honouring ``Retry-After``; other HTTP errors (bad request, authentication, unknown model) fail at
once. A timed-out attempt is cancelled, and its connection closed, before the next one is sent, so
a server that stops work for a client that left (llama.cpp, vLLM) does not answer it first. At most
``concurrency`` requests per client are in flight; the others wait here, and a request's timeout
counts from when it is sent, not from when it started waiting. Every failure is a
:class:`ChatError` (an :class:`~scaleenv.llm.base.LLMError`) whose ``kind`` says what went wrong:
``timeout``, ``endpoint`` (connection or HTTP error), ``malformed`` (no usable reply) or ``config``.
The API key is read from the environment variable *named* in the settings; it is never stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from scaleenv.llm.base import ChatRequest, ChatResponse, LLMError, estimate_tokens, messages_text

if TYPE_CHECKING:
    import openai as openai_sdk

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_RETRIES = 2
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


class ChatError(LLMError):
    """A chat request failed for good. ``kind``: ``timeout``, ``endpoint``, ``malformed`` or ``config``."""

    def __init__(self, kind: str, message: str, attempts: int = 1):
        self.kind = kind
        self.message = message
        self.attempts = attempts
        super().__init__(f"{kind}: {message}")


def is_local(base_url: str | None) -> bool:
    """Whether an endpoint is on this machine (a local server that often runs one request at a time)."""
    return bool(base_url) and (urlparse(str(base_url)).hostname or "") in LOOPBACK_HOSTS


def require_openai() -> ModuleType:
    try:
        import openai
    except ImportError:
        raise ChatError("config", "this needs the openai SDK: pip install 'scaleenv[llm]'") from None
    return openai


def api_key(base_url: str | None, api_key_env: str) -> str:
    """The key from the named variable; ``EMPTY`` for an explicit endpoint that needs none."""
    if api_key_env and not api_key_env.replace("_", "").isalnum():
        raise ChatError("config", f"--api-key-env must be the name of an environment variable, got {api_key_env!r}")
    key = os.environ.get(api_key_env or "") or ("EMPTY" if base_url else None)
    if key is None:
        raise ChatError("config", f"no API key: set the environment variable {api_key_env} "
                                  "(or pass --base-url for a local endpoint that needs none)")
    return key


@dataclass
class RetryPolicy:
    """When to try again, and how long to wait first."""

    max_retries: int = DEFAULT_MAX_RETRIES
    backoff: float = 1.0
    max_backoff: float = 30.0
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def retryable(self, openai: ModuleType, e: BaseException) -> bool:
        if isinstance(e, openai.APITimeoutError | openai.APIConnectionError | TimeoutError | _EmptyReply):
            return True
        if isinstance(e, openai.APIStatusError):
            return e.status_code in RETRYABLE_STATUS or e.status_code >= 500
        return False

    def delay(self, attempt: int, error: BaseException) -> float:
        delay: float = min(self.max_backoff, self.backoff * (2 ** attempt))
        headers = getattr(getattr(error, "response", None), "headers", None)
        if headers is not None:
            with contextlib.suppress(TypeError, ValueError):
                delay = max(delay, min(float(headers.get("retry-after", "")), self.max_backoff))
        return delay * (0.75 + 0.5 * self.rng.random())


def describe(openai: ModuleType, e: BaseException, model: str, base_url: str | None, timeout: float) -> ChatError:
    """The :class:`ChatError` for a failed attempt."""
    where = base_url or "the default endpoint"
    if isinstance(e, openai.APITimeoutError | TimeoutError):
        return ChatError("timeout", f"{model}: no reply within {timeout:g} s")
    if isinstance(e, openai.APIStatusError):
        return ChatError("endpoint", f"{model}: HTTP {e.status_code}: {str(e)[:300]}")
    if isinstance(e, openai.APIConnectionError):
        return ChatError("endpoint", f"{model}: cannot reach {where}: {e}")
    if isinstance(e, _EmptyReply):
        return ChatError("malformed", str(e))
    return ChatError("endpoint", f"{model}: {type(e).__name__}: {str(e)[:300]}")


@dataclass
class ChatSettings:
    """How to reach a model. Picklable: workers build their own client from it."""

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    backoff: float = 1.0
    concurrency: int = 8
    """Requests in flight at once through one client; the rest wait (untimed) for a slot."""

    def key(self) -> tuple[Any, ...]:
        """What identifies a client (a worker shares one client per key)."""
        return (self.base_url, self.api_key_env, self.timeout, self.max_retries)

    def public(self) -> dict[str, Any]:
        """The settings as recorded in results (no secrets: only the *name* of the key variable)."""
        return {"model": self.model, "base_url": self.base_url, "api_key_env": self.api_key_env,
                "timeout": self.timeout, "max_retries": self.max_retries, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "seed": self.seed, "extra_body": self.extra_body}


@dataclass
class ChatReply:
    message: dict[str, Any]
    """An OpenAI-format assistant message: ``role``, ``content`` and, if any, ``tool_calls``."""
    usage: dict[str, int]
    finish_reason: str | None = None
    attempts: int = 1


def _tool_calls(raw: Iterable[object] | None) -> list[dict[str, Any]]:
    """The reply's tool calls as plain dicts. A call without a name or with non-string arguments is
    passed on as it came: the environment hands it back to the policy as a tool error."""
    out = []
    for i, tc in enumerate(raw or []):
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", None)
        args = getattr(fn, "arguments", None)
        out.append({"id": getattr(tc, "id", None) or f"call_{i}", "type": "function",
                    "function": {"name": name if isinstance(name, str) else "",
                                 "arguments": args if isinstance(args, str) or args is None else repr(args)}})
    return out


class OpenAIChat:
    """The async face: one ``AsyncOpenAI`` client, created lazily inside the running event loop."""

    def __init__(self, settings: ChatSettings, http_client: Any | None = None):
        self.settings = settings
        self.policy = RetryPolicy(settings.max_retries, settings.backoff)
        self._http_client = http_client
        self._client: openai_sdk.AsyncOpenAI | None = None
        self._slots: asyncio.Semaphore | None = None
        self.requests = 0
        self.retries = 0

    @property
    def client(self) -> openai_sdk.AsyncOpenAI:
        if self._client is None:
            openai = require_openai()
            s = self.settings
            self._client = openai.AsyncOpenAI(api_key=api_key(s.base_url, s.api_key_env), base_url=s.base_url,
                                              timeout=s.timeout, max_retries=0, http_client=self._http_client)
        return self._client

    def share(self, settings: ChatSettings) -> OpenAIChat:
        """A client for other model or sampling settings on the same endpoint: same connections, same slots."""
        other = OpenAIChat(settings, self._http_client)
        other._client, other._slots = self.client, self._get_slots()
        return other

    def _get_slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.settings.concurrency))
        return self._slots

    def _kwargs(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                parallel_tool_calls: bool | None, seed: int | None) -> dict[str, Any]:
        s = self.settings
        kwargs: dict[str, Any] = {"model": s.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            if parallel_tool_calls is not None:
                kwargs["parallel_tool_calls"] = parallel_tool_calls
        if s.temperature is not None:
            kwargs["temperature"] = s.temperature
        if s.max_tokens is not None:
            kwargs["max_tokens"] = s.max_tokens
        if seed is not None or s.seed is not None:
            kwargs["seed"] = s.seed if s.seed is not None else seed
        if s.extra_body:
            kwargs["extra_body"] = s.extra_body
        return kwargs

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                       parallel_tool_calls: bool | None = None, seed: int | None = None) -> ChatReply:
        openai = require_openai()
        s = self.settings
        kwargs = self._kwargs(messages, tools, parallel_tool_calls, seed)
        client = self.client
        last: BaseException | None = None
        for attempt in range(self.policy.max_retries + 1):
            self.requests += 1
            self.retries += bool(attempt)
            try:
                async with self._get_slots():  # waiting for a slot is not part of the timeout
                    # wait_for cancels the attempt (httpx then closes its connection) before any retry
                    resp = await asyncio.wait_for(client.chat.completions.create(**kwargs), s.timeout + 1.0)
                reply = self._reply(resp)
                reply.attempts = attempt + 1
                return reply
            except (openai.OpenAIError, TimeoutError, _EmptyReply) as e:
                last = e
                if not self.policy.retryable(openai, e):
                    raise _attempts(describe(openai, e, s.model, s.base_url, s.timeout), attempt + 1) from None
                if attempt < self.policy.max_retries:
                    await asyncio.sleep(self.policy.delay(attempt, e))
        assert last is not None
        err = describe(openai, last, s.model, s.base_url, s.timeout)
        if self.policy.max_retries:
            err = ChatError(err.kind, f"{err.message} (giving up after {self.policy.max_retries + 1} attempts)")
        raise _attempts(err, self.policy.max_retries + 1)

    def _reply(self, resp: object) -> ChatReply:
        s = self.settings
        choices = getattr(resp, "choices", None)
        if not choices:
            raise ChatError("malformed", f"{s.model}: reply has no choices")
        msg = getattr(choices[0], "message", None)
        if msg is None:
            raise ChatError("malformed", f"{s.model}: reply has no message")
        content = getattr(msg, "content", None)
        if content is not None and not isinstance(content, str):
            raise ChatError("malformed", f"{s.model}: message content is not text")
        out: dict[str, Any] = {"role": "assistant", "content": content}
        calls = _tool_calls(getattr(msg, "tool_calls", None))
        if calls:
            out["tool_calls"] = calls
        usage: dict[str, int] = {}
        u = getattr(resp, "usage", None)
        for k in ("prompt_tokens", "completion_tokens"):
            v = getattr(u, k, None)
            if isinstance(v, int):
                usage[k] = v
        return ChatReply(out, usage, getattr(choices[0], "finish_reason", None))

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(Exception):  # closing is best effort
                await client.close()


class OpenAICompatibleChatModel:
    """The synchronous face (text replies, for synthesis): ``complete()`` is thread-safe; one SDK
    client (and HTTP connection pool) is shared, at most ``concurrency`` requests in flight."""

    def __init__(self, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY", *,
                 timeout: float = DEFAULT_TIMEOUT, max_retries: int = DEFAULT_MAX_RETRIES, backoff: float = 1.0,
                 max_backoff: float = 30.0, concurrency: int = 8, extra_body: dict[str, Any] | None = None):
        if api_key_env and not api_key_env.replace("_", "").isalnum():
            raise ChatError("config", f"--api-key-env must be the name of an environment variable, got {api_key_env!r}")
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.policy = RetryPolicy(max(0, max_retries), backoff, max_backoff)
        self.extra_body = dict(extra_body or {})
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._client: openai_sdk.OpenAI | None = None
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0

    @property
    def max_retries(self) -> int:
        return self.policy.max_retries

    @property
    def client(self) -> openai_sdk.OpenAI:
        with self._lock:
            if self._client is None:
                openai = require_openai()
                self._client = openai.OpenAI(api_key=api_key(self.base_url, self.api_key_env), base_url=self.base_url,
                                             timeout=self.timeout, max_retries=0)
            return self._client

    def complete(self, request: ChatRequest) -> ChatResponse:
        openai = require_openai()
        kwargs: dict[str, Any] = {"model": request.model, "messages": request.messages,
                                  "temperature": request.temperature}
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        where = f"{request.model} at {self.base_url or 'the default endpoint'}"
        last: BaseException | None = None
        for attempt in range(self.policy.max_retries + 1):
            with self._lock:
                self.requests += 1
                self.retries += bool(attempt)
            try:
                with self._slots:
                    resp = self.client.chat.completions.create(**kwargs)
                out = self._response(request, resp)
                out.meta["attempts"] = attempt + 1
                return out
            except (openai.OpenAIError, _EmptyReply) as e:
                last = e
                if not self.policy.retryable(openai, e):
                    err = describe(openai, e, request.model, self.base_url, self.timeout)
                    raise ChatError(err.kind, f"{where}: {type(e).__name__}: {str(e)[:300]}", attempt + 1) from None
                if attempt < self.policy.max_retries:
                    time.sleep(self.policy.delay(attempt, e))
        assert last is not None
        kind = describe(openai, last, request.model, self.base_url, self.timeout).kind
        raise ChatError(kind, f"{where}: giving up after {self.policy.max_retries + 1} attempts: "
                              f"{type(last).__name__}: {str(last)[:300]}", self.policy.max_retries + 1)

    def _response(self, request: ChatRequest, resp: object) -> ChatResponse:
        choices = getattr(resp, "choices", None) or []
        msg = getattr(choices[0], "message", None) if choices else None
        text = getattr(msg, "content", None)
        if not isinstance(text, str) or not text.strip():
            raise _EmptyReply(f"{request.model}: the reply has no text content")
        usage = getattr(resp, "usage", None)
        pt, ct = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
        estimated = not (isinstance(pt, int) and isinstance(ct, int))
        if not isinstance(pt, int) or not isinstance(ct, int):
            pt, ct = estimate_tokens(messages_text(request.messages)), estimate_tokens(text)
        return ChatResponse(text=text, prompt_tokens=pt, completion_tokens=ct,
                            model=str(getattr(resp, "model", "") or request.model), estimated=estimated)


class _EmptyReply(Exception):
    pass


def _attempts(err: ChatError, n: int) -> ChatError:
    err.attempts = n
    return err
