"""The MCP server leaks no reward: no ``evaluate`` tool or reward resource by default, an evicted
session gets an error (not a fresh world), and HTTP clients without a session id are refused."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from integrations_support import first_write, small_universe, tasks  # noqa: E402
from scaleenv.integrations.mcp_server import SessionError, SessionWorlds, build_mcp_server  # noqa: E402
from scaleenv.integrations.session import EVALUATE_TOOL, USER_TOOL, task_source  # noqa: E402


def _ctx(sid: str | None) -> SimpleNamespace:
    return SimpleNamespace(session=SimpleNamespace(_connection=SimpleNamespace(session_id=sid)), request=None)


def _call(server, sid: str | None, name: str, args: dict | None = None) -> tuple[bool, dict]:
    params = SimpleNamespace(name=name, arguments=args or {})
    res = anyio.run(server.scaleenv_handlers["call_tool"], _ctx(sid), params)
    error = bool(getattr(res, "is_error", getattr(res, "isError", False)))
    return error, json.loads("".join(c.text for c in res.content))


def _server(**kw):
    u = small_universe()
    task = tasks(u)[0]
    return u, task, build_mcp_server(task_source(u), task, **kw)


def _listed(server) -> tuple[set[str], set[str]]:
    tools = anyio.run(server.scaleenv_handlers["list_tools"], None, None).tools
    res = anyio.run(server.scaleenv_handlers["list_resources"], None, None).resources
    return {t.name for t in tools}, {str(r.uri) for r in res}


def test_evaluate_is_not_an_agent_tool_by_default():
    u, task, server = _server()
    tools, resources = _listed(server)
    assert EVALUATE_TOOL not in tools and USER_TOOL in tools and set(task.tools) <= tools
    assert not any(r.endswith("/reward") for r in resources)
    error, body = _call(server, "s1", EVALUATE_TOOL)
    assert error and body["error"] == "unknown_tool"
    assert "expected" not in json.dumps(body) and "diff" not in body
    params = SimpleNamespace(uri="scaleenv://task/reward")
    with pytest.raises(Exception, match="unknown resource"):
        anyio.run(server.scaleenv_handlers["read_resource"], _ctx("s1"), params)


def test_an_operator_can_expose_evaluate():
    u, task, server = _server(expose_evaluate=True)
    tools, resources = _listed(server)
    assert EVALUATE_TOOL in tools and "scaleenv://task/reward" in resources
    error, body = _call(server, "s1", EVALUATE_TOOL)
    assert not error and body["score"] == 0.0


def test_an_evicted_session_gets_an_error_not_a_fresh_world():
    u, task, server = _server(max_sessions=2)
    name, args = first_write(u, task)
    error, body = _call(server, "a", name, args)
    assert not error, body
    _call(server, "b", task.tools[0], {})
    _call(server, "c", task.tools[0], {})  # a third session evicts "a", the least recently used
    error, body = _call(server, "a", name, args)
    assert error and body["error"] == "session_expired" and "2 sessions" in body["message"]
    assert len(server.scaleenv_worlds) == 2
    error, body = _call(server, "c", name, args)  # live sessions keep working
    assert body.get("error") != "session_expired"


def test_session_limit_is_an_option_and_checked():
    from scaleenv.integrations.session import IntegrationError

    with pytest.raises(IntegrationError, match="at least 1"):
        SessionWorlds(lambda: None, 0)  # type: ignore[arg-type, return-value]


def test_sessionless_requests_are_refused_when_sessions_are_required():
    u, task, server = _server(require_session=True)
    name, args = first_write(u, task)
    error, body = _call(server, None, name, args)
    assert error and body["error"] == "no_session"
    assert len(server.scaleenv_worlds) == 0
    error, body = _call(server, "x", name, args)
    assert not error, body


def test_session_worlds_unit():
    made: list[object] = []

    class Fake:
        def close(self) -> None:
            made.remove(self)

    def factory() -> Fake:
        f = Fake()
        made.append(f)
        return f

    w = SessionWorlds(factory, 1, require_session=True)  # type: ignore[arg-type]
    a = w.get("a")
    assert w.get("a") is a
    w.get("b")
    assert len(made) == 1  # "a" was closed on eviction
    with pytest.raises(SessionError) as e:
        w.get("a")
    assert e.value.code == "session_expired"
    with pytest.raises(SessionError) as e:
        w.get(None)
    assert e.value.code == "no_session"


def test_serve_cli_validates_max_sessions():
    from typer.testing import CliRunner

    from scaleenv.cli import app

    u = small_universe()
    res = CliRunner().invoke(app, ["serve", str(u), "--task", tasks(u)[0].id, "--max-sessions", "0"])
    assert res.exit_code == 2 and "--max-sessions" in res.output
