"""The MCP server through the SDK's own client: over stdio (a `scaleenv serve` subprocess) and over
streamable HTTP (one server, several client sessions, each with its own world)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from importlib.metadata import version

import pytest

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")
if int(version("mcp").split(".")[0]) < 2:
    pytest.skip("the MCP server needs mcp>=2 (this environment has mcp 1.x, e.g. for openenv)", allow_module_level=True)

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from integrations_support import (  # noqa: E402
    answer,
    careful,
    first_write,
    free_port,
    small_universe,
    tasks,
    write_task,
)
from scaleenv.integrations.session import EVALUATE_TOOL, USER_TOOL, task_source  # noqa: E402


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _is_error(result) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def _read_only(tool) -> bool | None:
    ann = tool.annotations
    return None if ann is None else getattr(ann, "read_only_hint", getattr(ann, "readOnlyHint", None))


async def _evaluate(client) -> dict:
    res = await client.call_tool(EVALUATE_TOOL, {})
    assert not _is_error(res), _text(res)
    return json.loads(_text(res))


async def _check_listing(client, universe, task) -> None:
    listed = (await client.list_tools()).tools
    names = {t.name for t in listed}
    assert names == set(task.tools) | {USER_TOOL, EVALUATE_TOOL}
    spec = task_source(universe).spec(task.domain)
    for t in listed:
        if t.name in task.tools:
            assert _read_only(t) is (spec.tool(t.name).kind == "read"), t.name
            schema = t.input_schema if hasattr(t, "input_schema") else t.inputSchema
            assert schema == spec.tool(t.name).openai_schema()["function"]["parameters"]
    assert _read_only(next(t for t in listed if t.name == EVALUATE_TOOL)) is True


async def _play_gold(client, universe, task) -> dict:
    for name, args in careful(universe, task):
        res = await client.call_tool(name, args)
        assert not _is_error(res), (name, _text(res))
    reply = await client.call_tool(USER_TOOL, {"message": answer(task)})
    assert not _is_error(reply)
    return await _evaluate(client)


async def _check_bad_arguments(client, task) -> None:
    name = task.tools[0]
    res = await client.call_tool(name, {"no_such_argument": 1})
    assert _is_error(res)
    body = json.loads(_text(res))
    assert body["error"] == "invalid_arguments" and body["message"]
    res = await client.call_tool("no_such_tool", {})
    assert _is_error(res) and json.loads(_text(res))["error"] == "unknown_tool"
    res = await client.call_tool(USER_TOOL, {})
    assert _is_error(res) and "message" in json.loads(_text(res))["message"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p])
    return env


def test_stdio_round_trip():
    u = small_universe()
    task = tasks(u)[0]
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "scaleenv.cli", "serve", str(u), "--task", task.id, "--expose-evaluate"],
                                   env=_env())

    async def main() -> None:
        async with Client(stdio_client(params)) as client:  # a transport: works on mcp 2.0 to 2.3
            await _check_listing(client, u, task)
            assert (await _evaluate(client))["score"] == 0.0
            await _check_bad_arguments(client, task)
            reward = await _play_gold(client, u, task)
            assert reward["score"] == 1.0 and reward["success"] is True, reward
            body = await client.read_resource("scaleenv://task/reward")
            assert json.loads(body.contents[0].text)["score"] == 1.0
        async with Client(stdio_client(params)) as fresh:  # a new session (a new process) starts from a fresh world
            assert (await _evaluate(fresh))["score"] == 0.0

    anyio.run(main)


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("server did not start listening")


def test_streamable_http_sessions_have_their_own_worlds():
    u = small_universe()
    task = write_task(u)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "scaleenv.cli", "serve", str(u), "--task", task.id,
                             "--transport", "http", "--port", str(port), "--expose-evaluate"], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_port(port, proc)

        async def main() -> None:
            async with Client(url) as a, Client(url) as b:
                await _check_listing(a, u, task)
                name, args = first_write(u, task)
                res = await a.call_tool(name, args)  # a write in session A ...
                assert not _is_error(res), _text(res)
                ra = await _evaluate(a)
                rb = await _evaluate(b)  # ... is not seen by session B
                assert ra["components"]["mismatched_rows"] != rb["components"]["mismatched_rows"] or \
                    ra["diff"] != rb["diff"]
                await _check_bad_arguments(b, task)
                reward = await _play_gold(b, u, task)
                assert reward["score"] == 1.0, reward
                assert (await _evaluate(a))["score"] == 0.0
            async with Client(url) as c:  # a later session starts fresh
                assert (await _evaluate(c))["score"] == 0.0
                assert (await _play_gold(c, u, task))["score"] == 1.0

        anyio.run(main)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_serve_rejects_bad_input():
    u = small_universe()
    from typer.testing import CliRunner

    from scaleenv.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["serve", str(u), "--task", "nope/00000"])
    assert res.exit_code == 2 and "no task 'nope/00000'" in res.output
    res = runner.invoke(app, ["serve", str(u), "--task", tasks(u)[0].id, "--transport", "sse"])
    assert res.exit_code == 2 and "unknown --transport" in res.output


def test_stdio_reward_shape():
    from integrations_support import partial_case

    u = small_universe()
    task, calls, want = partial_case(u)
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "scaleenv.cli", "serve", str(u), "--task", task.id, "--expose-evaluate",
                                         "--mode", "solo", "--reward", "partial"], env=_env())

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            for name, args in calls:
                await client.call_tool(name, args)
            reward = await _evaluate(client)
            assert reward["score"] == want and reward["shape"] == "partial" and reward["success"] is False
            assert 0 < reward["subgoals"]["met"] < reward["subgoals"]["total"]

    anyio.run(main)
