"""A manual model: a local OpenAI-compatible endpoint where every chat request waits for a hand-written answer.

For people who want to see the LLM back end's prompts work with a capable reader standing in for
the model (``scaleenv relay serve|next|answer|stats``; README "Running a build by hand").

Every ``POST /v1/chat/completions`` is queued as ``QUEUE/NNNN.request.json`` (the body, its role
and a hash of it) plus ``NNNN.prompt.md`` (the same, readable); the HTTP call then waits until
``NNNN.answer.txt`` appears and returns its text as the assistant message, with token counts
estimated at four characters a token. Answers are written atomically (:func:`answer`), so a request
never reads half an answer. A request identical to one already queued (a client retry after a
timeout) waits for the same answer instead of queuing again, and an answered one is replayed at
once. Standard library only; binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from scaleenv.errors import ScaleEnvError
from scaleenv.llm.base import estimate_tokens
from scaleenv.utils.fs import atomic_write_text

_NUM = re.compile(r"^(\d{4,})\.request\.json$")


class RelayError(ScaleEnvError):
    """Bad use of a relay queue (no such request, an answer given twice, an unreadable file)."""


def _role(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or []
    first = str(msgs[0].get("content") or "") if msgs and isinstance(msgs[0], dict) else ""
    m = re.match(r"Role: (\w+)", first)
    return m.group(1) if m else ""


def _key(body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_text(n: int, body: dict[str, Any]) -> str:
    """The readable form of request ``n``: its role, then each message under a header."""
    out = [f"# request {n}  role: {_role(body) or '-'}  model: {body.get('model')}  "
           f"temperature: {body.get('temperature')}  messages: {len(body.get('messages') or [])}"]
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in content)
        out.append(f"\n===== {m.get('role')} =====\n{content}")
    return "\n".join(out) + "\n"


class Queue:
    """The files of one relay queue directory."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)

    def numbers(self) -> list[int]:
        if not self.dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := _NUM.match(p.name)))

    def path(self, n: int, kind: str) -> Path:
        return self.dir / f"{n:04d}.{kind}"

    def request(self, n: int) -> dict[str, Any]:
        try:
            request: dict[str, Any] = json.loads(self.path(n, "request.json").read_text(encoding="utf-8"))
            return request
        except FileNotFoundError:
            raise RelayError(f"{self.dir}: there is no request {n}") from None
        except (OSError, ValueError) as e:
            raise RelayError(f"{self.dir}: request {n} is unreadable ({e})") from None

    def answer_of(self, n: int) -> str | None:
        try:
            return self.path(n, "answer.txt").read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def pending(self) -> list[int]:
        return [n for n in self.numbers() if not self.path(n, "answer.txt").exists()]

    def enqueue(self, body: dict[str, Any], lock: threading.Lock, index: dict[str, int]) -> int:
        """The number of ``body``'s request: an identical one already queued, or a new one."""
        key = _key(body)
        with lock:
            if key in index:
                return index[key]
            n = (self.numbers() or [0])[-1] + 1
            record = {"number": n, "role": _role(body), "key": key, "received": round(time.time(), 3), "body": body}
            atomic_write_text(self.path(n, "prompt.md"), prompt_text(n, body))
            atomic_write_text(self.path(n, "request.json"), json.dumps(record, ensure_ascii=False, indent=1) + "\n")
            index[key] = n
            return n

    def load_index(self) -> dict[str, int]:
        out = {}
        for n in self.numbers():
            try:
                out[self.request(n)["key"]] = n
            except (RelayError, KeyError, TypeError):
                continue
        return out


def answer(queue: str | Path, n: int, text: str) -> Path:
    """Answer request ``n`` with ``text`` (atomically; an answered request cannot be answered again)."""
    q = Queue(queue)
    q.request(n)
    if q.path(n, "answer.txt").exists():
        raise RelayError(f"request {n} is already answered ({q.path(n, 'answer.txt')})")
    if not text.strip():
        raise RelayError(f"the answer to request {n} is empty")
    atomic_write_text(q.path(n, "answer.txt"), text)
    return q.path(n, "answer.txt")


def next_request(queue: str | Path) -> tuple[int, str] | None:
    """The oldest unanswered request: (number, readable prompt), or None."""
    q = Queue(queue)
    for n in q.pending():
        try:
            return n, q.path(n, "prompt.md").read_text(encoding="utf-8")
        except FileNotFoundError:
            return n, prompt_text(n, q.request(n).get("body") or {})
    return None


def stats(queue: str | Path) -> dict[str, Any]:
    """Requests, answered and pending, with characters and estimated tokens, in all and by role."""
    q = Queue(queue)
    total: dict[str, int] = {"requests": 0, "answered": 0, "prompt_chars": 0, "answer_chars": 0,
                             "prompt_tokens": 0, "completion_tokens": 0, "repair_requests": 0}
    by_role: dict[str, dict[str, int]] = {}
    for n in q.numbers():
        rec = q.request(n)
        body = rec.get("body") or {}
        msgs = body.get("messages") or []
        chars = sum(len(str(m.get("content") or "")) for m in msgs)
        ans = q.answer_of(n)
        for bucket in (total, by_role.setdefault(rec.get("role") or "-", dict.fromkeys(total, 0))):
            bucket["requests"] += 1
            bucket["prompt_chars"] += chars
            bucket["prompt_tokens"] += (chars + 3) // 4
            bucket["repair_requests"] += len(msgs) > 2  # a repair prompt continues the conversation
            if ans is not None:
                bucket["answered"] += 1
                bucket["answer_chars"] += len(ans)
                bucket["completion_tokens"] += estimate_tokens(ans)
    return {**total, "pending": total["requests"] - total["answered"], "by_role": dict(sorted(by_role.items()))}


class RelayServer:
    """The endpoint (``with RelayServer(...) as srv: srv.url``, or :meth:`serve_forever`)."""

    def __init__(self, queue: str | Path, host: str = "127.0.0.1", port: int = 8765, wait: float = 86400.0,
                 poll: float = 0.2):
        self.queue = Queue(queue)
        self.queue.dir.mkdir(parents=True, exist_ok=True)
        self.wait = wait
        self.poll = poll
        self.lock = threading.Lock()
        self.index = self.queue.load_index()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, code: int, message: str) -> None:
                self._send(code, {"error": {"message": message, "type": "invalid_request_error", "code": code}})

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "relay", "object": "model"}]})
                else:
                    self._error(404, "not found")

            def do_POST(self) -> None:  # noqa: N802
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._error(404, "only /v1/chat/completions is served")
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                except (ValueError, UnicodeDecodeError):
                    self._error(400, "the body is not JSON")
                    return
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
                    self._error(400, "the body needs a non-empty 'messages' list")
                    return
                n = relay.queue.enqueue(body, relay.lock, relay.index)
                text = relay.await_answer(n)
                if text is None:
                    self._error(504, f"request {n} was not answered within {relay.wait:g} s")
                    return
                prompt = sum(len(str(m.get("content") or "")) for m in body["messages"] if isinstance(m, dict))
                pt, ct = max(1, (prompt + 3) // 4), estimate_tokens(text)
                self._send(200, {
                    "id": f"relay-{n}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "relay"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}})

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread: threading.Thread | None = None

    def await_answer(self, n: int) -> str | None:
        deadline = time.monotonic() + self.wait
        while True:
            text = self.queue.answer_of(n)
            if text is not None and text.strip():  # an empty file may be an answer still being written
                return text
            if time.monotonic() >= deadline:
                return None
            time.sleep(self.poll)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"  # type: ignore[str-bytes-safe]  # an AF_INET host is a str; the stubs allow bytes

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def __enter__(self) -> RelayServer:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
