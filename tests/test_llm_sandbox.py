"""The sandbox for generated code: hostile code is refused or killed, the parent survives, and a
tool that misbehaves fails its tests and is not admitted."""

from __future__ import annotations

import socket
import threading

import pytest

from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.tools.sandbox import (
    SandboxLimits,
    run_source_in_sandbox,
    vet_python,
    vet_sql,
    vet_tool,
)
from scaleenv.tools.sandboxed_tests import test_tool_sandboxed
from scaleenv.world.world import World

FAST = SandboxLimits(cpu_seconds=1, wall_seconds=3.0, memory_mb=128)


@pytest.fixture(scope="module")
def listener():
    """A local TCP server: reachable from here, so a refused connection proves the sandbox refused it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    accepted: list[socket.socket] = []
    t = threading.Thread(target=lambda: accepted.append(srv.accept()[0]), daemon=True)
    t.start()
    yield srv.getsockname()[1]
    srv.close()


def test_plain_code_runs_and_returns(listener):
    out = run_source_in_sandbox("result = sum(range(10))", FAST)
    assert out.ok and out.value == 45


def test_opening_a_socket_is_refused(listener):
    src = f"import socket\ns = socket.create_connection(('127.0.0.1', {listener}), timeout=1)\nresult = 'connected'"
    out = run_source_in_sandbox(src, FAST)
    assert not out.ok and out.error == "denied" and "socket" in out.detail
    # the same connection works from the parent: it was the sandbox that said no
    socket.create_connection(("127.0.0.1", listener), timeout=1).close()


@pytest.mark.parametrize("src, error", [
    ("n = 0\nwhile n >= 0:\n    n += 1", {"cpu_limit", "timeout"}),
    ("import time\ntime.sleep(30)", {"timeout"}),
    ("x = []\nwhile True:\n    x.append(bytearray(10**7))", {"memory_limit"}),
    ("import subprocess\nsubprocess.run(['true'])", {"denied"}),
    ("import os\nos.system('true')", {"denied"}),
    ("result = open('/etc/hostname').read()", {"denied"}),
    ("import os\nos._exit(3)", {"crashed"}),
])
def test_hostile_code_is_stopped_and_the_parent_survives(src, error):
    out = run_source_in_sandbox(src, SandboxLimits(cpu_seconds=1, wall_seconds=1.5, memory_mb=128))
    assert not out.ok and out.error in error, out
    assert run_source_in_sandbox("result = 'still fine'", FAST).value == "still fine"


def test_writing_files_is_refused(tmp_path):
    target = tmp_path / "leak.txt"
    out = run_source_in_sandbox(f"open({str(target)!r}, 'w').write('secret')", FAST)
    assert not out.ok and out.error == "denied" and not target.exists()


def test_static_vetting():
    assert vet_python("def run(db, args):\n    return db.query('SELECT 1')") == []
    problems = " ".join(vet_python("import os\ndef run(db, args):\n    return os.listdir('/')"))
    assert "imports are not allowed" in problems
    assert "open is not available" in " ".join(vet_python("def run(db, args):\n    return open('/x')"))
    assert "private attribute" in " ".join(vet_python("def run(db, args):\n    return db._conn"))
    assert "never ends" in " ".join(vet_python("def run(db, args):\n    while True:\n        pass"))
    assert "run(db, args)" in " ".join(vet_python("def main():\n    return 1"))
    spec = _spec([])
    conn = World(spec).conn
    assert vet_sql(conn, "SELECT * FROM notes WHERE id = :id") == []
    assert vet_sql(conn, "INSERT INTO notes (id, body) VALUES (:id, :body)") == []  # the change-log trigger is fine
    for sql in ("ATTACH DATABASE '/tmp/x.db' AS x", "PRAGMA foreign_keys = OFF", "DROP TABLE notes",
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
                "SELECT random()", "SELECT * FROM _changes", "WITH c AS (SELECT * FROM _meta) SELECT * FROM c"):
        assert vet_sql(conn, sql), sql
    assert "does not prepare" in vet_sql(conn, "SELECT nope FROM notes")[0]


def _spec(tools: list[dict]) -> DomainSpec:
    return DomainSpec.model_validate({
        "name": "notes",
        "tables": [{"name": "notes", "columns": [{"name": "id", "type": "text"}, {"name": "body", "type": "text"}]}],
        "tools": tools,
    })


def _py_tool(source: str) -> ToolSpec:
    return ToolSpec.model_validate({
        "name": "touch_note", "description": "Touch a note.", "kind": "write",
        "parameters": [{"name": "note_id", "type": "string", "column": "notes.id"}],
        "preconditions": [{"sql": "SELECT 1 FROM notes WHERE id = :note_id", "error": "note_not_found"}],
        "errors": [{"code": "note_not_found"}],
        "implementation": {"kind": "python", "source": source},
    })


def _world() -> bytes:
    w = World(_spec([]))
    w.load_rows("notes", [{"id": f"N-{i}", "body": "x"} for i in range(3)])
    return w.snapshot()


def test_a_good_tool_is_admitted_in_the_sandbox():
    tool = _py_tool("def run(db, args):\n    db.execute('UPDATE notes SET body = :b WHERE id = :i', "
                    "{'b': 'touched', 'i': args['note_id']})\n    return {'id': args['note_id']}")
    report, cases, outcome = test_tool_sandboxed(_spec([]), tool, _world(), 0,
                                                 [{"kind": "negative", "args": {"note_id": "N-9"},
                                                   "error": "note_not_found"}], FAST)
    assert outcome.ok and report.admitted
    assert [c.verdict for c in cases] == ["anticipated_rejection"]


def test_a_hanging_tool_fails_its_tests_and_is_not_admitted():
    tool = _py_tool("def run(db, args):\n    n = len(args['note_id'])\n    while n > 0:\n        n += 1\n    return n")
    assert vet_tool(_spec([]), tool) == []  # nothing static gives it away
    report, _, outcome = test_tool_sandboxed(_spec([]), tool, _world(), 0, [],
                                             SandboxLimits(cpu_seconds=1, wall_seconds=1.5, memory_mb=128))
    assert not report.admitted and outcome.error in ("cpu_limit", "timeout")
    assert report.counts()["unexpected_failure"] == 1 and "sandbox" in report.tests[0].reason
