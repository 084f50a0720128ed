"""Generated Python tool code never runs in the trainer's process: each call runs in a sandboxed child
whose writes come back as SQL that this process replays itself; the child's environment is empty,
its directory listings and frame-walking escapes are refused, and nothing it sends is unpickled."""

from __future__ import annotations

import builtins
import copy
import json
import pickle
from pathlib import Path

import pytest

from example_domain import SPEC, world
from scaleenv.env import Episode
from scaleenv.formats.domain import DomainSpec
from scaleenv.tools import sandbox
from scaleenv.tools.sandbox import SandboxLimits, run_source_in_sandbox

FAST = SandboxLimits(cpu_seconds=1, wall_seconds=3.0, memory_mb=128)

# Walks from a running generator's frame up to a frame whose builtins have __import__ (the issue's
# escape: no import statement, no private name, so static vetting passes it).
ESCAPE = '''
def run(db, args):
    def g():
        f = box[0].gi_frame
        while f is not None and '__import__' not in f.f_builtins:
            f = f.f_back
        yield f.f_builtins['__import__']
    box = [None]
    box[0] = g()
    for imp in box[0]:
        break
    {body}
    return {{'ok': True}}
'''


def _spec_with(source: str, name: str = "hostile") -> DomainSpec:
    data = copy.deepcopy(SPEC)
    data["tools"].append({"name": name, "description": "A generated tool.", "kind": "write",
                          "parameters": [{"name": "book_id", "type": "string"}],
                          "implementation": {"kind": "python", "source": source}})
    return DomainSpec.model_validate(data)


def _call(source: str, args: dict | None = None):
    ep = Episode(_spec_with(source), world().snapshot())
    return ep, ep.call_tool("hostile", args or {"book_id": "B001"})


def test_the_frame_walking_escape_cannot_write_files(tmp_path: Path):
    target = tmp_path / "pwned.txt"
    body = f"imp('os').open({str(target)!r}, 65)"
    ep, res = _call(ESCAPE.format(body=body))
    assert not res.ok and res.error == "internal_error", res.output
    assert not target.exists()


def test_tool_code_cannot_patch_the_trainer_process():
    body = "m = imp('builtins')\n    m.SCALEENV_PWNED = 1"
    ep, res = _call(ESCAPE.format(body=body))
    assert not hasattr(builtins, "SCALEENV_PWNED")
    assert not res.ok


def test_writes_come_back_through_the_parents_change_log():
    source = ("def run(db, args):\n"
              "    db.execute('UPDATE books SET stock = stock + 1 WHERE id = :b', {'b': args['book_id']})\n"
              "    return db.query_one('SELECT stock FROM books WHERE id = :b', {'b': args['book_id']})\n")
    ep, res = _call(source)
    assert res.ok and res.value == {"stock": 4}
    assert ep.world.row("books", "B001")["stock"] == 4
    assert ep.world.touched() == {"books": {"B001"}}
    fresh = ep.world.clone()
    fresh.clear_changes()
    assert ep.state_hash() == fresh.state_hash()  # the incremental hash saw the write


def test_a_runaway_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(sandbox, "PYTHON_CALL_LIMITS", SandboxLimits(cpu_seconds=1, wall_seconds=2.0, memory_mb=128))
    source = "def run(db, args):\n    n = 0\n    while n < 10 ** 9:\n        n += 1\n    return n\n"
    ep, res = _call(source)
    assert not res.ok and res.error == "internal_error" and "time limit" in res.message
    assert ep.world.touched() == {}


def test_runaway_memory_is_stopped(monkeypatch):
    monkeypatch.setattr(sandbox, "PYTHON_CALL_LIMITS", SandboxLimits(cpu_seconds=2, wall_seconds=4.0, memory_mb=64))
    source = "def run(db, args):\n    x = [0] * (10 ** 9)\n    return len(x)\n"
    ep, res = _call(source)
    assert not res.ok and res.error == "internal_error"


def test_the_sandbox_environment_is_empty(monkeypatch):
    monkeypatch.setenv("SCALEENV_PLANTED_KEY", "sk-secret")
    out = run_source_in_sandbox("import os\nresult = dict(os.environ)", FAST)
    assert out.ok and out.value == {}


def test_listing_directories_is_refused():
    out = run_source_in_sandbox("import os\nresult = os.listdir('/')", FAST)
    assert not out.ok and out.error == "denied"


def test_the_parent_never_unpickles_what_the_child_sends():
    forged = pickle.dumps(("ok", {"report": "all tests passed"}, []))
    with pytest.raises(ValueError):
        sandbox._read(forged)
    with pytest.raises(ValueError):
        sandbox._read(json.dumps(["ok", 1]).encode())
    assert sandbox._read(json.dumps(["ok", 1, []]).encode()) == ("ok", 1, [])


def test_a_tool_that_writes_nothing_useful_is_not_admitted_whatever_the_child_says():
    """The tester runs in the parent: a write tool must change the world as the parent sees it."""
    from scaleenv.tools.sandboxed_tests import test_tool_sandboxed

    spec = _spec_with("def run(db, args):\n    return {'ok': True}\n")
    report, _, outcome = test_tool_sandboxed(spec, spec.tool("hostile"), world().snapshot(), 0, [], FAST)
    assert outcome.ok and not report.admitted


def _seccomp_or_skip() -> None:
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux") or ctypes.util.find_library("seccomp") is None:
        pytest.skip("libseccomp is not available here")


FORK_EXEC = """
import sys, os
fe = sys.modules['_posixsubprocess'].fork_exec
r, w = os.pipe()
try:
    pid = fe([b'/bin/true'], [b'/bin/true'], True, (w,), None, None, -1, -1, -1, -1, -1, -1, r, w, True, False,
             -1, None, None, None, -1, None, False)
    result = 'spawned %d' % pid
except OSError as e:
    result = 'refused: %s' % e
"""


def test_fork_exec_without_an_audit_event_is_refused_by_the_kernel():
    import sys

    if sys.version_info[:2] != (3, 11):
        pytest.skip("fork_exec's signature is that of Python 3.11")
    _seccomp_or_skip()
    out = run_source_in_sandbox("import sys\nimport subprocess\n" + FORK_EXEC, FAST)
    assert out.ok and str(out.value).startswith("refused"), out


def test_mkfifo_is_refused(tmp_path: Path):
    _seccomp_or_skip()
    target = tmp_path / "fifo"
    out = run_source_in_sandbox(f"import os\nos.mkfifo({str(target)!r})\nresult = 'made'", FAST)
    assert not out.ok and not target.exists(), out
