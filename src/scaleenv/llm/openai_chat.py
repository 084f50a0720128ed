"""A minimal async client for any OpenAI-compatible chat-completions endpoint.

The ``openai`` SDK is imported lazily (extra ``scaleenv[openai]``). Every failure comes back as a
:class:`ChatError` whose ``kind`` says what went wrong: ``timeout``, ``endpoint`` (connection or
HTTP status error), ``malformed`` (a reply that is not a usable assistant message) or ``config``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from scaleenv.errors import ProviderError


class ChatError(ProviderError):
    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message
        super().__init__(f"{kind}: {message}")


@dataclass
class ChatSettings:
    """How to reach a model. Picklable: workers build their own client from it."""

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 120.0
    max_retries: int = 2
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

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


def require_openai() -> Any:
    try:
        import openai
    except ImportError:
        raise ChatError("config", "the openai agent/user needs the openai SDK: pip install 'scaleenv[openai]'") from None
    return openai


def _tool_calls(raw: Any) -> list[dict[str, Any]]:
    out = []
    for i, tc in enumerate(raw or []):
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", None)
        args = getattr(fn, "arguments", None)
        if fn is None or not isinstance(name, str):
            raise ChatError("malformed", f"tool call {i} has no function name")
        if args is not None and not isinstance(args, str):
            raise ChatError("malformed", f"tool call {i} ({name}) has non-string arguments")
        out.append({"id": getattr(tc, "id", None) or f"call_{i}", "type": "function",
                    "function": {"name": name, "arguments": args if args is not None else "{}"}})
    return out


class OpenAIChat:
    """One ``AsyncOpenAI`` client, created lazily inside the running event loop."""

    def __init__(self, settings: ChatSettings, http_client: Any | None = None):
        self.settings = settings
        self._http_client = http_client
        self._client: Any | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            openai = require_openai()
            s = self.settings
            self._client = openai.AsyncOpenAI(
                api_key=os.environ.get(s.api_key_env) or "EMPTY", base_url=s.base_url, timeout=s.timeout,
                max_retries=s.max_retries, http_client=self._http_client)
        return self._client

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                       parallel_tool_calls: bool | None = None, seed: int | None = None) -> ChatReply:
        openai = require_openai()
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
        try:
            resp = await self.client.chat.completions.create(**kwargs)
        except openai.APITimeoutError:
            raise ChatError("timeout", f"{s.model}: no reply within {s.timeout:g} s") from None
        except openai.APIStatusError as e:
            raise ChatError("endpoint", f"{s.model}: HTTP {e.status_code}: {str(e)[:300]}") from None
        except openai.APIConnectionError as e:
            raise ChatError("endpoint", f"{s.model}: cannot reach {s.base_url or 'the endpoint'}: {e}") from None
        except openai.OpenAIError as e:
            raise ChatError("endpoint", f"{s.model}: {type(e).__name__}: {str(e)[:300]}") from None
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
