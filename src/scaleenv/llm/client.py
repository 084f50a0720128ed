"""A synchronous chat model for any OpenAI-compatible endpoint, through the ``openai`` SDK.

Configured by a base URL and the *name* of the environment variable that holds the API key (the
key itself is never stored or logged). Transient failures (connection errors, timeouts, HTTP 408,
409, 429 and 5xx) are retried with exponential backoff and jitter, honouring ``Retry-After``;
other HTTP errors (bad request, authentication, unknown model) fail at once.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

from scaleenv.llm.base import ChatRequest, ChatResponse, LLMError, estimate_tokens, messages_text

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


def require_openai() -> Any:
    try:
        import openai
    except ImportError:
        raise LLMError("the LLM back end needs the openai SDK: pip install 'scaleenv[llm]'") from None
    return openai


class OpenAICompatibleChatModel:
    """``complete()`` is thread-safe; one SDK client (and HTTP connection pool) is shared."""

    def __init__(self, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY", *,
                 timeout: float = 120.0, max_retries: int = 4, backoff: float = 1.0, max_backoff: float = 30.0,
                 concurrency: int = 8, extra_body: dict[str, Any] | None = None):
        if api_key_env and not api_key_env.replace("_", "").isalnum():
            raise LLMError(f"--api-key-env must be the name of an environment variable, got {api_key_env!r}")
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.extra_body = dict(extra_body or {})
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._client: Any = None
        self._lock = threading.Lock()
        self._rng = random.Random()
        self.requests = 0
        self.retries = 0

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                openai = require_openai()
                key = os.environ.get(self.api_key_env or "") or ("EMPTY" if self.base_url else None)
                if key is None:
                    raise LLMError(f"no API key: set the environment variable {self.api_key_env} "
                                   "(or pass --base-url for a local endpoint that needs none)")
                self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout,
                                             max_retries=0)
            return self._client

    def _delay(self, attempt: int, error: Any) -> float:
        delay = min(self.max_backoff, self.backoff * (2 ** attempt))
        response = getattr(error, "response", None)
        headers = getattr(response, "headers", None)
        if headers is not None:
            try:
                after = float(headers.get("retry-after", ""))
                delay = max(delay, min(after, self.max_backoff))
            except (TypeError, ValueError):
                pass
        return delay * (0.75 + 0.5 * self._rng.random())

    def _retryable(self, openai: Any, e: Exception) -> bool:
        if isinstance(e, openai.APITimeoutError | openai.APIConnectionError):
            return True
        if isinstance(e, openai.APIStatusError):
            return e.status_code in RETRYABLE_STATUS or e.status_code >= 500
        return False

    def complete(self, request: ChatRequest) -> ChatResponse:
        openai = require_openai()
        kwargs: dict[str, Any] = {"model": request.model, "messages": request.messages,
                                  "temperature": request.temperature}
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        last = ""
        with self._slots:
            for attempt in range(self.max_retries + 1):
                with self._lock:
                    self.requests += 1
                    self.retries += bool(attempt)
                try:
                    resp = self.client.chat.completions.create(**kwargs)
                    out = self._response(request, resp)
                    out.meta["attempts"] = attempt + 1
                    return out
                except openai.OpenAIError as e:
                    last = f"{type(e).__name__}: {str(e)[:300]}"
                    if not self._retryable(openai, e):
                        err = LLMError(f"{request.model} at {self.base_url or 'the default endpoint'}: {last}")
                        err.attempts = attempt + 1  # type: ignore[attr-defined]
                        raise err from None
                    if attempt < self.max_retries:
                        time.sleep(self._delay(attempt, e))
                except _EmptyReply as e:
                    last = str(e)
                    if attempt < self.max_retries:
                        time.sleep(self._delay(attempt, e))
        err = LLMError(f"{request.model} at {self.base_url or 'the default endpoint'}: giving up after "
                       f"{self.max_retries + 1} attempts: {last}")
        err.attempts = self.max_retries + 1  # type: ignore[attr-defined]
        raise err

    def _response(self, request: ChatRequest, resp: Any) -> ChatResponse:
        choices = getattr(resp, "choices", None) or []
        msg = getattr(choices[0], "message", None) if choices else None
        text = getattr(msg, "content", None)
        if not isinstance(text, str) or not text.strip():
            raise _EmptyReply(f"{request.model}: the reply has no text content")
        usage = getattr(resp, "usage", None)
        pt, ct = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
        estimated = not (isinstance(pt, int) and isinstance(ct, int))
        if estimated:
            pt, ct = estimate_tokens(messages_text(request.messages)), estimate_tokens(text)
        return ChatResponse(text=text, prompt_tokens=pt, completion_tokens=ct,
                            model=str(getattr(resp, "model", "") or request.model), estimated=estimated)


class _EmptyReply(Exception):
    pass
