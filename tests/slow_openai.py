"""A local chat-completions server (127.0.0.1) that answers one request at a time, slowly, like a
single-slot llama.cpp server: connections wait in the listen queue while one request "generates",
and a request whose client has gone away is dropped (checked before and during generation).

``brain(body) -> message`` gives each reply; ``delays`` (seconds, for the next requests, else
``delay``) is the generation time. Counts: ``answered``, ``dropped`` (client gone), ``max_inflight``.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class SlowOpenAI:
    def __init__(self, brain: Callable[[dict[str, Any]], dict[str, Any]], delay: float = 0.1):
        self.brain = brain
        self.delay = delay
        self.delays: list[float] = []
        self.bodies: list[dict[str, Any]] = []
        self.answered = 0
        self.dropped = 0
        self.dropped_requests: list[int] = []  # indexes (arrival order) of the requests dropped
        self.inflight = 0
        self.max_inflight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection, closed after the answer

            def log_message(self, *args: Any) -> None:
                pass

            def _gone(self) -> bool:
                """Whether the client closed its side (what llama.cpp checks while it generates)."""
                sock: socket.socket = self.connection
                readable, _, _ = select.select([sock], [], [], 0)
                if not readable:
                    return False
                try:
                    return sock.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with outer.lock:
                    index = len(outer.bodies)
                    outer.bodies.append(body)
                    delay = outer.delays.pop(0) if outer.delays else outer.delay
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                try:
                    end = time.monotonic() + delay
                    while True:
                        if self._gone():
                            with outer.lock:
                                outer.dropped += 1
                                outer.dropped_requests.append(index)
                            return
                        left = end - time.monotonic()
                        if left <= 0:
                            break
                        time.sleep(min(0.02, left))
                    message = outer.brain(body)
                    finish = "tool_calls" if message.get("tool_calls") else "stop"
                    data = json.dumps({
                        "id": "chatcmpl-slow", "object": "chat.completion", "created": 0,
                        "model": body.get("model", "m"),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}).encode()
                    try:
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    except (BrokenPipeError, ConnectionResetError):
                        with outer.lock:
                            outer.dropped += 1
                            outer.dropped_requests.append(index)
                        return
                    with outer.lock:
                        outer.answered += 1
                finally:
                    with outer.lock:
                        outer.inflight -= 1

        self.server = _Server(("127.0.0.1", 0), Handler)  # not threading: one request at a time
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> SlowOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Server(HTTPServer):
    request_queue_size = 64  # waiting connections queue in the kernel, as they do at a busy local server
