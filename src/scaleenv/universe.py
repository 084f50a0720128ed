"""A universe directory: ``universe.json`` (the manifest), ``domains/<d>/`` and ``tasks/<d>.jsonl``.

    universe.json                  manifest: format, seed, backend, domains, counts
    domains/<d>/spec.json          the DomainSpec (admitted tools only)
    domains/<d>/base.sqlite        the seeded base world (an SQLite database file)
    domains/<d>/tests.json         procedural test report
    domains/<d>/graph.json         tool dependency graph with statistics
    domains/<d>/done.json          written last: the domain's Phase 1 is complete
    tasks/<d>.jsonl                verified tasks, one JSON object per line (schema: task.schema.json)
    tasks/<d>.partial.jsonl        tasks of a domain still being built (resume continues it)
    .lock                          held (flock) by the build writing the universe

Reading is checking: every file is checked for the shape the commands rely on when it is read, a
spec with ``validate``'s rules and against ``done.json``, a base world for every table and column
of its spec, a task file for one line per task and as many tasks as the build accepted. Anything
else is a UniverseError naming the file (the commands print it as one line and exit 2).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scaleenv.errors import UniverseError
from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task
from scaleenv.utils.fs import atomic_write_bytes, atomic_write_text

FORMAT = "scaleenv-universe/5"
"""The universe format; 5: tasks record state hashes of encoding 5 (``world/canon.py`` ``HASH_VERSION``)."""
_OLD_FORMATS = {f"scaleenv-universe/{n}": n for n in (1, 2, 3, 4)}  # format: the hash encoding its tasks record
DOMAIN_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,99}$")
"""What a domain may be called (a catalog name or an LLM back end's slug): no paths, no numbers-as-JSON."""


class BuiltArtifacts(Protocol):
    """What :func:`write_domain` writes: a domain's Phase 1 results (``synth``'s ``BuiltDomain``)."""

    @property
    def spec(self) -> DomainSpec: ...
    @property
    def base(self) -> bytes: ...
    @property
    def tests(self) -> dict[str, Any]: ...
    @property
    def graph(self) -> _JSONExportable: ...


class _JSONExportable(Protocol):
    def to_json(self) -> dict[str, Any]: ...


class _Shape(BaseModel):
    """The fields of a universe file that the commands read (more may be present)."""

    model_config = ConfigDict(extra="allow", strict=True)


class _Manifest(_Shape):
    format: str
    domains: list[str]
    status: str = "complete"
    build: dict[str, Any] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    backend: str = "procedural"


class _GraphStats(_Shape):
    edges: int
    edges_by_kind: dict[str, int] = Field(default_factory=dict)


class _Graph(_Shape):
    nodes: list[Any]
    edges: list[Any]
    stats: _GraphStats


class _Tests(_Shape):
    tools: int
    counts: dict[str, int]
    reports: list[dict[str, Any]]


class _TasksReport(_Shape):
    attempts: int
    accepted: int
    rejections: dict[str, int] = Field(default_factory=dict)


class _Done(_Shape):
    spec_hash: str
    tools: int


def _checked(path: Path, data: object, shape: type[_Shape]) -> dict[str, Any]:
    """``data`` if it has the shape the commands rely on, else UniverseError naming the first problem."""
    try:
        shape.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        raise UniverseError(f"{path}: not a valid {path.name} ({where}: {first['msg']})") from None
    except RecursionError:
        raise UniverseError(f"{path}: not a valid {path.name} (nested too deeply)") from None
    return cast(dict[str, Any], data)  # a JSON object: the shape (a model) accepted it


def write_json(path: Path, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def read_json(path: Path) -> Any:
    """The JSON value in ``path`` (as ``json.loads`` gives it: callers check its shape), or UniverseError."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UniverseError(f"{path}: missing file") from None
    except json.JSONDecodeError as e:
        raise UniverseError(f"{path}: line {e.lineno}: malformed JSON ({e.msg})") from None
    except RecursionError:
        raise UniverseError(f"{path}: malformed JSON (nested too deeply)") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
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
            task = Task.model_validate_json(line)
        except ValidationError as e:
            if tolerate_torn_tail and n == len(lines):
                return
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"])) or "line"
            raise UniverseError(f"{path}: line {n}: invalid task ({where}: {first['msg']})") from None
        v = task.verification
        for key, value in (("initial_hash", v.initial_hash), ("expected_hash", v.expected_hash)):
            if not value:
                raise UniverseError(f"{path}: line {n}: invalid task (verification.{key} is missing)")
        yield task


class Universe:
    """Read access to a universe directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise UniverseError(f"{self.root}: not a directory; build one with `scaleenv build --out {self.root}`")
        if not (self.root / "universe.json").is_file():
            raise UniverseError(f"{self.root}: no universe.json here; is this a universe directory?")
        self._verified: dict[str, DomainSpec] = {}

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """``universe.json``, checked: its shape, domain names, and a directory for every domain."""
        path = self.root / "universe.json"
        m = read_json(path)
        fmt = m.get("format") if isinstance(m, dict) else None
        old = _OLD_FORMATS.get(fmt) if isinstance(fmt, str) else None  # a list or a dict is no format
        if old is not None:
            raise UniverseError(f"{path}: built by an older scaleenv (its tasks record state hashes of encoding {old}); "
                                f"rebuild it with `scaleenv build`")
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise UniverseError(f"{path}: not a {FORMAT} manifest")
        _checked(path, m, _Manifest)
        seen: set[str] = set()
        for d in m["domains"]:
            if not DOMAIN_NAME.match(d):
                raise UniverseError(f"{path}: invalid domain name {d[:80]!r} (lower-case letters, digits and _)")
            if d in seen:
                raise UniverseError(f"{path}: domain {d!r} is listed twice")
            seen.add(d)
            for need in ("spec.json", "done.json"):
                if not (self.root / "domains" / d / need).is_file():
                    raise UniverseError(f"{self.root / 'domains' / d / need}: missing file (universe.json lists "
                                        f"domain {d!r}; resume the build to finish it)")
        return m

    @property
    def complete(self) -> bool:
        """Whether the build finished (a universe being built may still lack task files)."""
        return bool(self.manifest.get("status", "complete") == "complete")

    @property
    def domains(self) -> list[str]:
        return list(self.manifest["domains"])

    def domain_dir(self, domain: str) -> Path:
        return self.root / "domains" / domain

    def spec(self, domain: str) -> DomainSpec:
        """The domain's spec, validated, and the very spec its build finished with (``done.json``)."""
        d = self.domain_dir(domain)
        spec = _cached_spec(str(d / "spec.json"))
        if self._verified.get(domain) is spec:  # checked against done.json already
            return spec
        done = self.done(domain)
        if done["spec_hash"] != spec.content_hash():
            raise UniverseError(f"{d / 'spec.json'}: does not match the spec the build finished with (done.json "
                                f"spec_hash {done['spec_hash'][:16]!r}); was it edited?")
        self._verified[domain] = spec
        return spec

    def done(self, domain: str) -> dict[str, Any]:
        path = self.domain_dir(domain) / "done.json"
        return _checked(path, read_json(path), _Done)

    def base(self, domain: str) -> bytes:
        """The domain's base snapshot. Read once per file version (path, size, mtime) and shared, so
        every task world of a domain starts from the same bytes object (its digests are cached); checked
        when read: it opens, and it has every table and column of the spec (plus the change log)."""
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
        _check_base(path, self.spec(domain), data)
        if len(_BASE_BYTES) >= 64:
            _BASE_BYTES.clear()
        _BASE_BYTES[str(path)] = (key, data)
        return data

    def graph(self, domain: str) -> dict[str, Any]:
        path = self.domain_dir(domain) / "graph.json"
        return _checked(path, read_json(path), _Graph)

    def tests(self, domain: str) -> dict[str, Any]:
        path = self.domain_dir(domain) / "tests.json"
        return _checked(path, read_json(path), _Tests)

    def tasks_report(self, domain: str) -> dict[str, Any] | None:
        path = self.domain_dir(domain) / "tasks_report.json"
        return _checked(path, read_json(path), _TasksReport) if path.exists() else None

    def tasks(self, domain: str | None = None) -> list[Task]:
        """Tasks of one domain (or all), checked: one line per task id, as many as the build accepted."""
        out: list[Task] = []
        for d in [domain] if domain else self.domains:
            path = self.root / "tasks" / f"{d}.jsonl"
            if not path.exists():
                if self.complete and d in self.domains:
                    raise UniverseError(f"{path}: missing file (the universe's build is complete)")
                continue
            tasks = list(read_tasks(path))
            ids: set[str] = set()
            for n, t in enumerate(tasks, 1):
                if t.id in ids:
                    raise UniverseError(f"{path}: task {t.id!r} appears twice (line {n})")
                if t.domain != d:
                    raise UniverseError(f"{path}: task {t.id!r} belongs to domain {t.domain!r}, not {d!r}")
                ids.add(t.id)
            rep = self.tasks_report(d) if d in self.domains else None
            if rep is not None and self.complete and rep["accepted"] != len(tasks):
                raise UniverseError(f"{path}: {len(tasks)} tasks, but the build accepted {rep['accepted']} "
                                    "(tasks_report.json); the file was truncated or edited")
            out.extend(tasks)
        return out

    def check_files(self) -> int:
        """Read and check every file of every domain (manifest, spec, done, base world, tests and
        graph reports, tasks); return the number of tasks or raise UniverseError on the first problem."""
        n = 0
        for d in self.domains:
            self.base(d)  # checks the spec and done.json too
            self.tests(d)
            self.graph(d)
            n += len(self.tasks(d))
        return n

    def task(self, task_id: str) -> Task:
        domain = task_id.split("/")[0]
        for t in self.tasks(domain if domain in self.domains else None):
            if t.id == task_id:
                return t
        raise UniverseError(f"no task {task_id!r} in {self.root}; list ids with `scaleenv inspect {self.root} --json`")


_SPEC_CACHE: dict[str, DomainSpec] = {}
_BASE_BYTES: dict[str, tuple[tuple[int, int, int], bytes]] = {}


def _cached_spec(path: str) -> DomainSpec:
    """The spec at ``path``, checked with the rules of ``scaleenv validate`` (cached by path and file
    identity, so a file rewritten in place is checked again)."""
    from scaleenv.validation.spec import spec_problems

    try:
        st = Path(path).stat()
        key = f"{path}\x00{st.st_mtime_ns}\x00{st.st_size}"
    except OSError:
        key = path
    if key not in _SPEC_CACHE:
        data = read_json(Path(path))
        if not isinstance(data, dict):
            raise UniverseError(f"{path}: invalid spec (a JSON object is expected, not {type(data).__name__})")
        try:
            spec = DomainSpec.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            raise UniverseError(f"{path}: invalid spec ({'.'.join(map(str, first['loc']))}: {first['msg']})") from None
        except RecursionError:
            raise UniverseError(f"{path}: invalid spec (nested too deeply)") from None
        problems = spec_problems(spec)
        if problems:
            where, reason = problems[0]
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            raise UniverseError(f"{path}: invalid spec: {where}: {reason}{more}")
        if len(_SPEC_CACHE) > 256:
            _SPEC_CACHE.clear()
        _SPEC_CACHE[key] = spec
    return _SPEC_CACHE[key]


def write_domain(root: Path, built: BuiltArtifacts) -> None:
    """Write Phase 1 artifacts of a domain; ``done.json`` last so a crash never leaves it half-done."""
    d = root / "domains" / built.spec.name
    write_json(d / "spec.json", built.spec.model_dump(mode="json"))
    atomic_write_bytes(d / "base.sqlite", built.base)
    write_json(d / "tests.json", built.tests)
    write_json(d / "graph.json", built.graph.to_json())
    write_json(d / "done.json", {"spec_hash": built.spec.content_hash(), "tools": len(built.spec.tools)})


_BASE_OK: dict[tuple[str, int, int, str], None] = {}


def _check_base(path: Path, spec: DomainSpec, data: bytes) -> None:
    import sqlite3

    from scaleenv.errors import WorldError
    from scaleenv.world.ddl import CHANGES_TABLE, META_TABLE
    from scaleenv.world.world import World

    key = (str(path), len(data), hash(data), spec.content_hash())
    if key in _BASE_OK:
        return
    try:
        world = World.from_snapshot(spec, data)
    except WorldError as e:
        raise UniverseError(f"{path}: not a base world of domain {spec.name!r} ({e})") from None
    try:
        for t in spec.tables:
            cols = [r[1] for r in world.conn.execute(f"PRAGMA table_info({_q(t.name)})")]
            want = [c.name for c in t.columns]
            if cols != want:
                why = "has no table" if not cols else f"has columns {cols} instead of {want} in table"
                raise UniverseError(f"{path}: {why} {t.name!r} of the spec")
        for internal in (CHANGES_TABLE, META_TABLE):
            if not list(world.conn.execute(f"PRAGMA table_info({_q(internal)})")):
                raise UniverseError(f"{path}: has no table {internal!r} (not written by scaleenv)")
        world.state_hash()  # every row reads
    except sqlite3.Error as e:
        raise UniverseError(f"{path}: not a readable base world ({e})") from None
    finally:
        world.close()
    if len(_BASE_OK) > 256:
        _BASE_OK.clear()
    _BASE_OK[key] = None


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def validate_universe(root: str | Path) -> str:
    """Check every file of a universe: the manifest, each spec (with ``validate``'s rules, and as
    the build finished it), base world, tests and graph report, and every task, whose gold chain must
    replay from the base world to its recorded initial and expected states. Returns a one-line
    summary or raises UniverseError naming the first problem."""
    from scaleenv.tools.replay import build_worlds

    u = Universe(root)
    u.check_files()
    n_tasks = 0
    for d in u.domains:
        spec = u.spec(d)
        base = u.base(d)
        tools = {t.name for t in spec.tools}
        for task in u.tasks(d):
            missing = sorted(({c.tool for c in task.gold_chain} | set(task.tools)) - tools)
            if missing:
                raise UniverseError(f"task {task.id}: uses tools that the spec does not have: {', '.join(missing)}")
            build_worlds(spec, base, task).expected.close()
            n_tasks += 1
    return f"ok: {u.root}: {len(u.domains)} domains, {n_tasks} tasks"
