"""The chat-model interface used by LLM synthesis: requests, responses, errors and the protocol.

A :class:`ChatModel` turns one :class:`ChatRequest` into one :class:`ChatResponse`, synchronously
(callers run several in threads). Backends: :class:`scaleenv.llm.client.OpenAICompatibleChatModel`
(any OpenAI-compatible endpoint) and :class:`scaleenv.llm.scripted.ScriptedChatModel` (canned
responses, for tests). Caching, token accounting, per-role models, the concurrency limit and the
repair loop for structured output live one level up, in :class:`scaleenv.llm.session.LLMSession`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from scaleenv.errors import ProviderError


class LLMError(ProviderError):
    """A chat request failed for good (after retries), or the endpoint is misconfigured."""


class LLMOutputError(LLMError):
    """The model's reply could not be used, even after repair prompts. ``problems`` says why."""

    def __init__(self, role: str, problems: list[str]):
        self.role = role
        self.problems = problems
        shown = "; ".join(problems[:3])
        super().__init__(f"{role}: unusable model output after repair prompts: {shown}")


@dataclass
class ChatRequest:
    """One chat-completions request. ``role`` (the synthesis agent asking) is not sent to the model."""

    model: str
    messages: list[dict[str, str]]
    temperature: float = 0.0
    max_tokens: int | None = None
    role: str = ""

    def payload(self) -> dict[str, Any]:
        """What identifies the request to a model: the cache key is a hash of exactly this."""
        out: dict[str, Any] = {"model": self.model, "messages": self.messages, "temperature": self.temperature}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out

    def key(self) -> str:
        text = json.dumps(self.payload(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ChatResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    cached: bool = False
    estimated: bool = False  # the endpoint reported no usage; counts are estimated from the text
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "model": self.model, "estimated": self.estimated}

    @classmethod
    def from_json(cls, data: dict[str, Any], cached: bool = True) -> ChatResponse:
        return cls(text=str(data.get("text", "")), prompt_tokens=int(data.get("prompt_tokens", 0)),
                   completion_tokens=int(data.get("completion_tokens", 0)), model=str(data.get("model", "")),
                   cached=cached, estimated=bool(data.get("estimated", False)))


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a chat request (thread-safe: synthesis calls it from worker threads)."""

    def complete(self, request: ChatRequest) -> ChatResponse: ...


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token) for endpoints that report no usage."""
    return max(1, (len(text) + 3) // 4)


def messages_text(messages: list[dict[str, str]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)
