"""Crash safety of builds: one writer per universe (a lock), workers die with their parent, resume
drops duplicated task lines, and the issue's ``kill -9`` of a process-executor build resumes cleanly."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.errors import UniverseError
from scaleenv.synth import build as build_mod
from scaleenv.synth.build import BuildConfig, prepare_out, run_build

runner = CliRunner()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _session_pids(sid: int) -> list[int]:
    """Live processes of session ``sid`` (the build was started with setsid)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().split(") ")[-1].split()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            out.append(int(d))
    return out


def _wait(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_a_second_writer_is_refused_while_the_lock_is_held(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(build_mod, "LOCK_WAIT_S", 0.3)
    out = tmp_path / "u"
    out.mkdir()
    holder = (out / ".lock").open("a")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)  # another build holds the universe
    try:
        cfg = BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=1)
        with pytest.raises(UniverseError, match="being written by another scaleenv build"):
            prepare_out(cfg)
        with pytest.raises(UniverseError, match="being written by another"):
            run_build(cfg)
        res = runner.invoke(app, ["build", "--domain", "pet_care", "--tasks-per-domain", "1", "--out", str(out), "-q"])
        assert res.exit_code == 2 and "being written by another" in res.output
        assert not (out / "universe.json").exists()
    finally:
        holder.close()
    res = runner.invoke(app, ["build", "--domain", "pet_care", "--tasks-per-domain", "1", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output


def test_resume_drops_duplicated_task_lines(tmp_path: Path) -> None:
    out = tmp_path / "u"
    cfg = BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=3)
    prepare_out(cfg)
    run_build(cfg)
    final = out / "tasks" / "pet_care.jsonl"
    lines = final.read_text().splitlines()
    # a crash left the partial file with lines written twice (two writers), and the build unfinished
    final.rename(out / "tasks" / "pet_care.partial.jsonl")
    (out / "tasks" / "pet_care.partial.jsonl").write_text("\n".join(lines[:2] + lines[:2]) + "\n")
    cfg.resume = True
    prepare_out(cfg)
    run_build(cfg)
    ids = [json.loads(x)["id"] for x in final.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 3
    # a final file with duplicated lines (from an older build) is repaired on resume
    final.write_text("\n".join(lines + lines[:1]) + "\n")
    run_build(cfg)
    assert final.read_text().splitlines() == lines


def test_a_worker_dies_with_its_parent(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        from scaleenv.parallel.lifeline import die_with_parent
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(parent)
            time.sleep(60)
            os._exit(0)
        print(pid, flush=True)
        time.sleep(60)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    assert _alive(child)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _wait(lambda: not _alive(child)), "the child outlived its parent"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_minus_9_of_a_process_build_then_resume_twice(tmp_path: Path) -> None:
    """The issue's scenario: kill only the main process of ``build --executor process``, resume at
    once, twice: no traceback, one line per task, and no orphan left writing."""
    out = tmp_path / "u"
    k = 12
    cmd = [sys.executable, "-m", "scaleenv.cli", "build", "--domain", "smart_home", "--domain", "stock_trading",
           "--tasks-per-domain", str(k), "--seed", "3", "--executor", "process", "--workers", "2", "--out", str(out),
           "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def started() -> bool:
        return any(p.stat().st_size > 0 for p in (out / "tasks").glob("*.partial.jsonl")) if (out / "tasks").is_dir() \
            else False

    assert _wait(started, 120), "the build wrote no task"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for _ in range(2):
        res = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr
    for d in ("smart_home", "stock_trading"):
        ids = [json.loads(x)["id"] for x in (out / "tasks" / f"{d}.jsonl").read_text().splitlines()]
        assert len(ids) == len(set(ids)) == k, (d, ids)
    assert _wait(lambda: not _session_pids(proc.pid)), f"orphans left: {_session_pids(proc.pid)}"
    check = subprocess.run([sys.executable, "-m", "scaleenv.cli", "check", str(out)], capture_output=True, text=True,
                           timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_minus_9_of_a_process_rollout_leaves_no_orphans(tmp_path: Path) -> None:
    """Rollout workers stuck on a model endpoint that never answers die with their killed parent."""
    import importlib.util
    import socket

    if importlib.util.find_spec("openai") is None:
        pytest.skip("needs the openai SDK")
    out = tmp_path / "u"
    cfg = BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=2)
    prepare_out(cfg)
    run_build(cfg)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)  # accepts connections (the kernel does) and never answers
    port = server.getsockname()[1]
    env = {**os.environ, "OPENAI_API_KEY": "test"}
    proc = subprocess.Popen([sys.executable, "-m", "scaleenv.cli", "rollout", str(out), "--agent", "openai:m",
                             "--base-url", f"http://127.0.0.1:{port}/v1", "--executor", "process", "--workers", "2",
                             "--out", str(tmp_path / "r.json"), "--quiet", "--max-retries", "0"],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        # wait for the workers (slow to import on a loaded machine), not for a fixed time: a rollout that
        # exits instead fails at once and says why
        started = _wait(lambda: len(_session_pids(proc.pid)) >= 3 or proc.poll() is not None, 300)
        assert proc.poll() is None, f"the rollout exited ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}"
        assert started, "the workers did not start"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _wait(lambda: not _session_pids(proc.pid)), f"orphans left: {_session_pids(proc.pid)}"
    finally:
        for pid in _session_pids(proc.pid):  # only this test's own processes
            os.kill(pid, signal.SIGKILL)
        server.close()
        proc.stderr.close()
