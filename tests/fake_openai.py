"""A local HTTP server that speaks the OpenAI chat-completions protocol (127.0.0.1, a thread), so the
real ``openai`` SDK path runs in tests without a network. Failures can be injected: HTTP status
codes or delays for the next requests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI:
    def __init__(self, respond: Callable[[list[dict[str, Any]]], str]):
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        self.failures: list[int] = []  # status codes for the next requests
        self.delays: list[float] = []  # seconds to wait before answering the next requests
        self.inflight = 0
        self.max_inflight = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake.lock:
                    fake.requests.append(body)
                    fail = fake.failures.pop(0) if fake.failures else None
                    delay = fake.delays.pop(0) if fake.delays else 0.0
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                try:
                    if delay:
                        time.sleep(delay)
                    code, reply = self._reply(body, fail)
                finally:
                    # out of flight before the reply is written: a client that has read the reply may
                    # send its next request at once, and counting this one still would over-count
                    with fake.lock:
                        fake.inflight -= 1
                self._send(code, reply)

            def _reply(self, body: dict[str, Any], fail: int | None) -> tuple[int, dict[str, Any]]:
                if not self.path.endswith("/chat/completions"):
                    return 404, {"error": {"message": "not found", "type": "invalid_request_error"}}
                if fail is not None:
                    return fail, {"error": {"message": f"injected {fail}", "type": "server_error"}}
                text = fake.respond(body["messages"])
                pt = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4 + 1
                ct = len(text) // 4 + 1
                return 200, {
                    "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}}

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def count(self) -> int:
        with self.lock:
            return len(self.requests)
