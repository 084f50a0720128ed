"""Builds on a real local Ray instance go through ``parallel``'s RayExecutor: workers build in their own
temporary directories and ship the files back, byte for byte what the serial and process executors write,
also when resuming an interrupted build."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from scaleenv.synth.build import BuildConfig, build_one_domain, prepare_out, run_build  # noqa: E402

pytestmark = pytest.mark.slow
DOMAINS = ["pet_care", "wedding_planning"]


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def _build(out: Path, **kw) -> Path:
    cfg = BuildConfig(out=out, domains=DOMAINS, tasks_per_domain=3, seed=1, **kw)
    prepare_out(cfg)
    run_build(cfg)
    return out


def test_serial_process_and_ray_builds_are_byte_identical(tmp_path, local_ray, monkeypatch) -> None:
    import scaleenv.parallel.ray_executor as ray_executor

    made = []
    real = ray_executor.RayExecutor.__init__

    def spy(self, *args, **kw):  # the build's Ray workers are RayExecutor actors, not bare ray.remote tasks
        made.append(self)
        real(self, *args, **kw)

    monkeypatch.setattr(ray_executor.RayExecutor, "__init__", spy)
    progress = []
    cfg = BuildConfig(out=tmp_path / "ray", domains=DOMAINS, tasks_per_domain=3, seed=1, executor="ray", workers=2)
    prepare_out(cfg)
    run_build(cfg, progress=lambda *update: progress.append(update))
    serial, process = _build(tmp_path / "serial"), _build(tmp_path / "process", executor="process", workers=2)
    assert len(made) == 1 and made[0].workers == 2
    assert sorted(progress) == [("pet_care", "tasks", 3, 3), ("wedding_planning", "tasks", 3, 3)]
    assert _tree(serial) == _tree(process) == _tree(cfg.out)
    assert ray.is_initialized()  # the executor leaves running the instance it did not start


def test_ray_resume_after_interruption_gives_the_same_universe(tmp_path, local_ray) -> None:
    full = _build(tmp_path / "full")
    cut = BuildConfig(out=tmp_path / "cut", domains=DOMAINS, tasks_per_domain=3, seed=1)
    prepare_out(cut)

    class Stop(Exception):
        pass

    def interrupt(domain, stage, done, total):
        if stage == "tasks" and done >= 2:
            raise Stop

    job = {"seed": 1, "tasks_per_domain": 3, "scale": 1.0, "resume": False, "chain_length": (3, 8)}
    with pytest.raises(Stop):
        build_one_domain(cut.out, "pet_care", job, interrupt)
    assert (cut.out / "tasks" / "pet_care.partial.jsonl").is_file()
    resumed = BuildConfig(out=cut.out, domains=DOMAINS, tasks_per_domain=3, seed=1, resume=True, executor="ray")
    prepare_out(resumed)
    run_build(resumed)
    a, b = _tree(full), _tree(cut.out)
    assert "tasks/pet_care.partial.jsonl" not in b  # the worker's rename reached the driver's copy
    a.pop("domains/pet_care/attempts.jsonl")
    b.pop("domains/pet_care/attempts.jsonl")
    assert a == b
