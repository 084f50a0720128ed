"""A universe directory: ``universe.json`` (the manifest), ``domains/<d>/`` and ``tasks/<d>.jsonl``.

    universe.json                  manifest: format, seed, backend, domains, counts
    domains/<d>/spec.json          the DomainSpec (admitted tools only)
    domains/<d>/base.sqlite        the seeded base world (an SQLite database file)
    domains/<d>/tests.json         procedural test report
    domains/<d>/graph.json         tool dependency graph with statistics
    domains/<d>/done.json          written last: the domain's Phase 1 is complete
    tasks/<d>.jsonl                verified tasks, one JSON object per line (schema: task.schema.json)
    tasks/<d>.partial.jsonl        tasks of a domain still being built (resume continues it)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from scaleenv.errors import SpecError, UniverseError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.utils.fs import atomic_write_bytes, atomic_write_text

FORMAT = "scaleenv-universe/1"


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UniverseError(f"{path}: missing file") from None
    except json.JSONDecodeError as e:
        raise UniverseError(f"{path}: line {e.lineno}: malformed JSON ({e.msg})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UniverseError(f"{path}: cannot read ({e})") from None


def read_tasks(path: Path, *, tolerate_torn_tail: bool = False) -> Iterator[Task]:
    """Tasks of a JSONL file. A corrupt line raises UniverseError naming the file and line
    (with ``tolerate_torn_tail`` a broken *last* line, as left by a crash, is skipped)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UniverseError(f"{path}: cannot read ({e})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield Task.model_validate_json(line)
        except ValidationError as e:
            if tolerate_torn_tail and n == len(lines):
                return
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"])) or "line"
            raise UniverseError(f"{path}: line {n}: invalid task ({where}: {first['msg']})") from None


class Universe:
    """Read access to a universe directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise UniverseError(f"{self.root}: not a directory; build one with `scaleenv build --out {self.root}`")
        if not (self.root / "universe.json").is_file():
            raise UniverseError(f"{self.root}: no universe.json here; is this a universe directory?")

    @cached_property
    def manifest(self) -> dict[str, Any]:
        m = read_json(self.root / "universe.json")
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise UniverseError(f"{self.root / 'universe.json'}: not a {FORMAT} manifest")
        return m

    @property
    def domains(self) -> list[str]:
        return list(self.manifest.get("domains", []))

    def domain_dir(self, domain: str) -> Path:
        return self.root / "domains" / domain

    def spec(self, domain: str) -> DomainSpec:
        return _cached_spec(str(self.domain_dir(domain) / "spec.json"))

    def base(self, domain: str) -> bytes:
        """The domain's base snapshot. Read once per file version (path, size, mtime) and shared, so
        every task world of a domain starts from the same bytes object (its digests are cached)."""
        path = self.domain_dir(domain) / "base.sqlite"
        try:
            st = path.stat()
            key = (st.st_size, st.st_mtime_ns, st.st_ino)
            hit = _BASE_BYTES.get(str(path))
            if hit is not None and hit[0] == key:
                return hit[1]
            data = path.read_bytes()
        except OSError as e:
            raise UniverseError(f"{path}: cannot read ({e})") from None
        if len(_BASE_BYTES) >= 64:
            _BASE_BYTES.clear()
        _BASE_BYTES[str(path)] = (key, data)
        return data

    def graph(self, domain: str) -> dict[str, Any]:
        return read_json(self.domain_dir(domain) / "graph.json")

    def tests(self, domain: str) -> dict[str, Any]:
        return read_json(self.domain_dir(domain) / "tests.json")

    def tasks(self, domain: str | None = None) -> list[Task]:
        out: list[Task] = []
        for d in [domain] if domain else self.domains:
            path = self.root / "tasks" / f"{d}.jsonl"
            if path.exists():
                out.extend(read_tasks(path))
        return out

    def task(self, task_id: str) -> Task:
        domain = task_id.split("/")[0]
        for t in self.tasks(domain if domain in self.domains else None):
            if t.id == task_id:
                return t
        raise UniverseError(f"no task {task_id!r} in {self.root}; list ids with `scaleenv inspect {self.root} --json`")


_SPEC_CACHE: dict[str, DomainSpec] = {}
_BASE_BYTES: dict[str, tuple[tuple[int, int, int], bytes]] = {}


def _cached_spec(path: str) -> DomainSpec:
    if path not in _SPEC_CACHE:
        data = read_json(Path(path))
        try:
            _SPEC_CACHE[path] = DomainSpec.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            raise UniverseError(f"{path}: invalid spec ({'.'.join(map(str, first['loc']))}: {first['msg']})") from None
    return _SPEC_CACHE[path]


def write_domain(root: Path, built: Any) -> None:
    """Write Phase 1 artifacts of a domain; ``done.json`` last so a crash never leaves it half-done."""
    d = root / "domains" / built.spec.name
    write_json(d / "spec.json", built.spec.model_dump(mode="json"))
    atomic_write_bytes(d / "base.sqlite", built.base)
    write_json(d / "tests.json", built.tests)
    write_json(d / "graph.json", built.graph.to_json())
    write_json(d / "done.json", {"spec_hash": built.spec.content_hash(), "tools": len(built.spec.tools)})


def validate_universe(root: str | Path) -> str:
    """Check every spec and task file of a universe; return a one-line summary or raise."""
    from scaleenv.validation.spec import validate_spec

    u = Universe(root)
    n_tasks = 0
    for d in u.domains:
        path = u.domain_dir(d) / "spec.json"
        try:
            validate_spec(read_json(path))
        except SpecError as e:
            p, reason = e.problems[0]
            raise UniverseError(f"{path}: {p}: {reason}") from None
        n_tasks += len(u.tasks(d))
    return f"ok: {u.root}: {len(u.domains)} domains, {n_tasks} tasks"
