"""A chat model that replays canned responses: the LLM back end's tests run without a network.

Responses come from a *responder* (a function of the request, e.g. one that reads which agent is
asking and about which tool) or from per-role queues. Every request is recorded, so tests can
assert what was asked, how often, and that a warm cache asked nothing at all.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable

from scaleenv.llm.base import ChatRequest, ChatResponse, LLMError, estimate_tokens, messages_text

Responder = Callable[[ChatRequest], str]


class ScriptedChatModel:
    """Replays canned text.

    ``responder(request) -> str`` answers everything it is given; ``queues`` maps a role to the
    texts to return for it, in order (consulted first). A request nobody can answer raises
    :class:`LLMError`, like a failing endpoint would.
    """

    def __init__(self, responder: Responder | None = None, queues: dict[str, Iterable[str]] | None = None):
        self.responder = responder
        self.queues: dict[str, deque[str]] = defaultdict(deque)
        for role, texts in (queues or {}).items():
            self.queues[role].extend(texts)
        self.requests: list[ChatRequest] = []
        self._lock = threading.Lock()

    def push(self, role: str, *texts: str) -> None:
        with self._lock:
            self.queues[role].extend(texts)

    def complete(self, request: ChatRequest) -> ChatResponse:
        with self._lock:
            self.requests.append(request)
            queue = self.queues.get(request.role)
            text = queue.popleft() if queue else None
        if text is None:
            if self.responder is None:
                raise LLMError(f"scripted model has no response for role {request.role!r}")
            text = self.responder(request)
        return ChatResponse(text=text, prompt_tokens=estimate_tokens(messages_text(request.messages)),
                            completion_tokens=estimate_tokens(text), model=request.model)

    def count(self, role: str | None = None) -> int:
        return sum(1 for r in self.requests if role is None or r.role == role)
