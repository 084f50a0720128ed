"""Ray without a shared filesystem: a real two-node cluster on 127.0.0.1 whose nodes have their own temporary
and working directories. Universes travel through Ray's object store; results come back to the driver and
match a one-machine run byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from scaleenv.parallel.shipping import materialize, pack_files, universe_files, unpack_tree  # noqa: E402
from scaleenv.run.rollout import RolloutConfig, run_rollout  # noqa: E402
from scaleenv.synth.build import BuildConfig, prepare_out, run_build  # noqa: E402

pytestmark = pytest.mark.slow
DOMAINS = ["pet_care", "wedding_planning"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cmd() -> str:
    return str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Head node A and worker node B, each `ray start --block` in its own process group, cwd and TMPDIR."""
    if ray.is_initialized():
        pytest.skip("a Ray instance is already attached to this process")
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="sr", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes
    port = _free_port()
    procs = []
    nodes = {}
    for name, extra in (("A", ["--head", f"--port={port}", "--include-dashboard=false"]),
                        ("B", [f"--address=127.0.0.1:{port}"])):
        d = root / name
        (d / "tmp").mkdir(parents=True)
        env = {**os.environ, "TMPDIR": str(d / "tmp"), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
        cmd = [_ray_cmd(), "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
               f"--temp-dir={d / 'ray'}", f"--resources={json.dumps({f'node_{name}': 1})}", *extra]
        procs.append(subprocess.Popen(cmd, cwd=d, env=env, stdout=(d / "log").open("w"), stderr=subprocess.STDOUT,
                                      start_new_session=True))
        nodes[name] = d
        if name == "A":
            time.sleep(8)
    address = f"127.0.0.1:{port}"
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a throwaway cluster on 127.0.0.1; the driver must match the nodes
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                probe = subprocess.run([sys.executable, "-c", f"import ray; ray.init(address={address!r}); "
                                        "print(sum(1 for n in ray.nodes() if n['Alive']))"],
                                       capture_output=True, text=True, timeout=60)
                out, err = probe.stdout.strip(), probe.stderr
            except subprocess.TimeoutExpired:
                out, err = "", "probe timed out"
            if out.endswith("2"):
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.skip(f"could not start a two-node Ray cluster: {err[-500:]}")
            time.sleep(2)
        yield address, nodes
    finally:
        for p in reversed(procs):  # only the process groups this fixture started
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _comparable(records):
    return sorted(({k: r[k] for k in ("id", "seed", "termination", "reward", "messages", "tools", "steps")}
                   for r in records), key=lambda r: r["id"])


def test_pack_and_materialize_round_trip_and_refuse_unsafe_members(tmp_path) -> None:
    (tmp_path / "u" / "domains" / "d").mkdir(parents=True)
    (tmp_path / "u" / "universe.json").write_text('{"format": "scaleenv-universe/1", "domains": ["d"]}')
    (tmp_path / "u" / "domains" / "d" / "spec.json").write_text("{}")
    blob = pack_files(tmp_path / "u", universe_files(tmp_path / "u"))
    assert blob == pack_files(tmp_path / "u", reversed(universe_files(tmp_path / "u")))  # deterministic
    digest = hashlib.sha256(blob).hexdigest()
    out = materialize(blob, digest, tmp_path / "node")
    assert _tree(out) == _tree(tmp_path / "u") and materialize(blob, digest, tmp_path / "node") == out
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escape")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    from scaleenv.errors import ScaleEnvError

    with pytest.raises(ScaleEnvError, match="unsafe member"):
        unpack_tree(buf.getvalue(), tmp_path / "dest")
    assert not (tmp_path / "escape").exists()
    with pytest.raises(ScaleEnvError, match="digest"):
        materialize(blob, "0" * 64, tmp_path / "node")


def test_build_and_rollout_on_two_nodes_without_a_shared_disk(cluster, tmp_path) -> None:
    address, nodes = cluster
    serial = tmp_path / "serial"
    cfg = BuildConfig(out=serial, domains=DOMAINS, tasks_per_domain=2)
    prepare_out(cfg)
    run_build(cfg)
    shipped = tmp_path / "shipped"
    rcfg = BuildConfig(out=shipped, domains=DOMAINS, tasks_per_domain=2, executor="ray", ray_address=address)
    prepare_out(rcfg)
    run_build(rcfg)
    assert ray.is_initialized() is False  # the build disconnected from the cluster it joined
    assert _tree(shipped) == _tree(serial)  # the workers' files came back, byte for byte

    runs = {ex: run_rollout(RolloutConfig(universe=serial, agent="random", executor=ex, workers=2, trials=2, seed=5,
                                          ray_address=address if ex == "ray" else None,
                                          out=tmp_path / f"{ex}.json"), keep_records=True)
            for ex in ("ray", "serial")}
    assert runs["ray"]["num_episodes"] == 8 and runs["ray"]["errors"] == 0
    assert _comparable(runs["ray"]["records"]) == _comparable(runs["serial"]["records"])
    for key in ("avg_at_k", "pass_at_k", "pass_hat_k", "per_domain"):
        assert runs["ray"][key] == runs["serial"][key]
    # Each node materialized the universe under its own TMPDIR (one actor per node: one CPU each).
    copies = {name: sorted((d / "tmp" / "scaleenv-shipped").glob("*/universe.json")) for name, d in nodes.items()}
    assert all(copies.values()), copies
    for found in copies.values():
        assert _tree(found[0].parent) == {k: v for k, v in _tree(serial).items() if k in _tree(found[0].parent)}
