"""Ship a universe (or part of one) to workers that do not share the driver's filesystem.

The driver packs the files workers need into one ``bytes`` object (an uncompressed tar with sorted
members and zeroed metadata, so the same files give the same bytes), puts it in Ray's object store,
and hands workers a small picklable :class:`ShippedUniverse`. A worker materializes it once, under
its own temporary directory, in a folder named by the content digest; several workers on one node
share that folder, and a second materialization of the same content is a no-op.

Build workers go the other way: they build a domain in their own temporary directory and return
the domain's files packed the same way (:func:`pack_tree`); the driver unpacks them into the
universe (:func:`unpack_tree`).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, TypeVar

from scaleenv.errors import ScaleEnvError

if TYPE_CHECKING:
    from ray import ObjectRef

T = TypeVar("T")

SHIP_DIR = "scaleenv-shipped"
"""Folder under a worker's temporary directory (``tempfile.gettempdir()``) that holds shipped universes."""

# What a rollout worker reads: the manifest, each domain's spec and base world, and the tasks.
_ROLLOUT_FILES = ("spec.json", "base.sqlite", "done.json")


def pack_files(root: Path, relpaths: Iterable[str]) -> bytes:
    """The files ``root/relpath`` as a deterministic tar (sorted names, no times, owners or modes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(set(relpaths)):
            data = (root / rel).read_bytes()
            info = tarfile.TarInfo(rel)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pack_tree(root: Path, sub: str) -> bytes:
    """Every regular file under ``root/sub``, packed with names relative to ``root``."""
    base = root / sub
    rels = [p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file()] if base.is_dir() else []
    return pack_files(root, rels)


def unpack_tree(blob: bytes, dest: Path) -> list[str]:
    """Write the files of a :func:`pack_files` tar under ``dest``; return their names. Members that
    would land outside ``dest`` (absolute paths, ``..``, links) are refused: the blob is untrusted."""
    names: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:") as tar:
            for m in tar.getmembers():
                p = PurePosixPath(m.name)
                if not m.isfile() or p.is_absolute() or ".." in p.parts or not p.parts:
                    raise ScaleEnvError(f"shipped archive has an unsafe member {m.name!r}")
                f = tar.extractfile(m)
                assert f is not None
                out = dest.joinpath(*p.parts)
                out.parent.mkdir(parents=True, exist_ok=True)
                tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
                tmp.write_bytes(f.read())
                os.replace(tmp, out)
                names.append(m.name)
    except tarfile.TarError as e:
        raise ScaleEnvError(f"shipped archive is not readable: {e}") from None
    return names


def in_scratch(seed: bytes | None, work: Callable[[Path], T], prefix: str = "scaleenv-build-") -> tuple[T, bytes]:
    """Run ``work`` on a fresh temporary directory (holding the files of ``seed``, a :func:`pack_files`
    tar, if given) and return its result with every file the directory then holds, packed; the
    directory is removed. A worker without the driver's disk builds there and ships the files back."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(tmp)
        if seed:
            unpack_tree(seed, root)
        return work(root), pack_tree(root, "")


def universe_files(root: Path, domains: Iterable[str] | None = None) -> list[str]:
    """What a rollout worker needs of the universe at ``root`` (all domains, or only ``domains``)."""
    import json

    try:  # the manifest's domain list only: this layer reads no universe format beyond that
        listed = json.loads((root / "universe.json").read_text(encoding="utf-8")).get("domains") or []
    except (OSError, ValueError, AttributeError) as e:
        raise ScaleEnvError(f"{root}: not a universe directory to ship ({e})") from None
    wanted = [str(d) for d in listed] if domains is None else list(domains)
    rels = ["universe.json"]
    for d in wanted:
        for name in _ROLLOUT_FILES:
            if (root / "domains" / d / name).is_file():
                rels.append(f"domains/{d}/{name}")
        if (root / "tasks" / f"{d}.jsonl").is_file():
            rels.append(f"tasks/{d}.jsonl")
    return rels


@dataclass(frozen=True)
class ShippedUniverse:
    """A universe travelling through Ray's object store: ``ref`` is the ObjectRef of the packed bytes,
    ``digest`` their SHA-256 (the folder name on each node), ``origin`` the driver's path (shown in
    messages only; workers never open it)."""

    ref: ObjectRef[bytes]
    digest: str
    origin: str
    size: int

    def __str__(self) -> str:
        return self.origin


def ship_universe(root: Path, domains: Iterable[str] | None = None) -> ShippedUniverse:
    """Pack the universe at ``root`` and put it in Ray's object store (Ray must be initialized)."""
    import ray

    blob = pack_files(root, universe_files(root, domains))
    digest = hashlib.sha256(blob).hexdigest()
    return ShippedUniverse(ray.put(blob), digest, str(root), len(blob))


def materialize(blob: bytes, digest: str, where: Path | None = None) -> Path:
    """Unpack ``blob`` into ``<tmp>/scaleenv-shipped/<digest>`` once (atomically) and return that path."""
    if hashlib.sha256(blob).hexdigest() != digest:
        raise ScaleEnvError("shipped universe does not match its digest (corrupted in transit?)")
    top = (where or Path(tempfile.gettempdir())) / SHIP_DIR
    final = top / digest
    if (final / "universe.json").is_file():
        return final
    top.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=top))
    try:
        unpack_tree(blob, work)
        try:
            os.replace(work, final)
        except OSError:
            if not (final / "universe.json").is_file():  # another worker won the race: use its copy
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return final


def local_universe(source: str | Path | ShippedUniverse) -> str:
    """A path to the universe on this machine: ``source`` itself, or a shipped one materialized here."""
    if isinstance(source, ShippedUniverse):
        import ray

        return str(materialize(ray.get(source.ref), source.digest))
    return str(source)
