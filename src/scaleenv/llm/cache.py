"""An on-disk response cache keyed by a hash of the request (model, messages, sampling settings).

An interrupted or repeated run replays every answer it already paid for. One JSON file per
request, written atomically: ``<dir>/<key[:2]>/<key>.json``. Safe for threads and processes.
"""

from __future__ import annotations

import json
from pathlib import Path

from scaleenv.llm.base import ChatRequest, ChatResponse
from scaleenv.utils.fs import atomic_write_text


class ResponseCache:
    def __init__(self, directory: str | Path):
        self.dir = Path(directory)

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, request: ChatRequest) -> ChatResponse | None:
        path = self._path(request.key())
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return None  # missing, or a torn/corrupt entry: ask again
        if not isinstance(data, dict) or not isinstance(data.get("response"), dict):
            return None
        return ChatResponse.from_json(data["response"], cached=True)

    def put(self, request: ChatRequest, response: ChatResponse) -> None:
        record = {"request": request.payload(), "role": request.role, "response": response.to_json()}
        atomic_write_text(self._path(request.key()), json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")

    def __len__(self) -> int:
        return sum(1 for _ in self.dir.glob("*/*.json")) if self.dir.is_dir() else 0
