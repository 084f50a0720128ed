"""``scaleenv serve``: a task's tools as an MCP server, through the official ``mcp`` SDK (``[mcp]``).

    tools       every tool of the task, with the domain's JSON Schema as ``inputSchema`` and
                ``readOnlyHint`` from the tool's kind; ``send_message_to_user`` (the simulated user);
                with ``expose_evaluate`` only, ``evaluate`` (the reward of the world as it is now:
                score, success, components, diff)
    resources   ``scaleenv://task/system_prompt`` and ``scaleenv://task/request`` (what the agent is
                told); with ``expose_evaluate`` only, ``scaleenv://task/reward`` (the same JSON)

The reward is not an agent tool by default: it names every expected cell and answer fact, so an agent
that can call it learns the answer (an operator who wants it, e.g. to score a finished session from
the harness, passes ``--expose-evaluate``).

Every client session gets its own world: over stdio one process serves one client; over streamable
HTTP worlds are keyed by the ``Mcp-Session-Id`` of the session (the server advertises only the
handshake protocol versions on ``server/discover``, so clients open sessions). Over HTTP a request
that carries no session id is refused (``no_session``): such clients would otherwise share one world.
At most ``max_sessions`` worlds are kept; opening one more evicts the least recently used, and a
later call of the evicted session gets a ``session_expired`` error instead of a silently fresh world.
Tool failures (unknown tool, bad arguments, violated preconditions) are ``isError`` results with the
runtime's JSON error, never protocol errors.

The work of a request (a domain tool, the simulated user's reply, the reward) runs in a worker thread,
one request at a time per session, so that a slow call of one session never holds up another session's
requests (``tools/list`` included): only bookkeeping runs on the event loop.

Built on the low-level ``Server`` so that it works on mcp 2.0 to 2.3.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, Protocol, TypeVar

from scaleenv.errors import InputError
from scaleenv.formats.task import Task
from scaleenv.integrations.session import (
    EVALUATE_TOOL,
    RESERVED_NAMES,
    USER_TOOL,
    USER_TOOL_SCHEMA,
    IntegrationError,
    Session,
    TaskSource,
    task_source,
)
from scaleenv.tools.output import dumps, error_output

_T = TypeVar("_T")

TRANSPORTS = ("stdio", "http")
RESOURCE_PREFIX = "scaleenv://task/"


class _CallParams(Protocol):
    """What a ``tools/call`` request carries (the SDK's ``CallToolRequestParams``)."""

    name: str
    arguments: dict[str, Any] | None


class _ResourceParams(Protocol):
    """What a ``resources/read`` request carries (the SDK's ``ReadResourceRequestParams``)."""

    uri: object


def _mcp() -> tuple[ModuleType, type[Any]]:
    try:
        import mcp_types as types
        from mcp.server.lowlevel import Server
    except ImportError:  # pragma: no cover - depends on the installed extra
        try:
            from mcp import types  # mcp < 2
            from mcp.server.lowlevel import Server
        except ImportError:
            raise IntegrationError("the MCP server needs the mcp SDK: pip install 'scaleenv[mcp]'") from None
    return types, Server


def _session_key(ctx: object) -> str | None:
    """The MCP session a request belongs to (``None``: stdio, or a request without a session)."""
    conn = getattr(getattr(ctx, "session", None), "_connection", None)
    sid = getattr(conn, "session_id", None)
    if isinstance(sid, str) and sid:
        return sid
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    if headers is not None:
        sid = headers.get("mcp-session-id")
        if sid:
            return str(sid)
    return None


class SessionError(InputError):
    """A request whose session has no world: ``code`` is ``no_session`` or ``session_expired``."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class SessionWorlds:
    """One :class:`Session` (private world) per MCP session, least recently used first out.

    An evicted session is remembered (the last ``64 * max_sessions`` of them), so that its next
    request fails with ``session_expired`` rather than getting a fresh world that silently lost its
    writes. With ``require_session`` a request without a session id is refused (``no_session``).

    :meth:`run` does a request's work on a session in a worker thread, one request at a time per session;
    a session evicted while it works is closed when its last request ends.
    """

    def __init__(self, factory: Callable[[], Session], max_sessions: int = 256, *, require_session: bool = False):
        if max_sessions < 1:
            raise IntegrationError(f"max_sessions must be at least 1, got {max_sessions}")
        self.factory = factory
        self.max_sessions = max_sessions
        self.require_session = require_session
        self._sessions: OrderedDict[str | None, Session] = OrderedDict()
        self._evicted: OrderedDict[str | None, None] = OrderedDict()
        self._locks: dict[Session, Any] = {}  # anyio.Lock: a session's requests run one at a time
        self._busy: dict[Session, int] = {}  # requests in flight or waiting, per session
        self._retired: set[Session] = set()  # evicted while busy: closed when its last request ends

    def get(self, key: str | None) -> Session:
        s = self._sessions.get(key)
        if s is not None:
            self._sessions.move_to_end(key)
            return s
        if key is None and self.require_session:
            raise SessionError("no_session", "this request carries no Mcp-Session-Id; open a session (initialize) "
                                             "so that it gets its own world")
        if key in self._evicted:
            raise SessionError("session_expired", f"this session's world was evicted (more than {self.max_sessions} "
                                                  "sessions were open) and its changes are gone; open a new session")
        s = self._sessions[key] = self.factory()
        while len(self._sessions) > self.max_sessions:
            old_key, old = self._sessions.popitem(last=False)
            if self._busy.get(old):
                self._retired.add(old)  # its request is running in a thread: closed when it ends
            else:
                self._close(old)
            self._evicted[old_key] = None
            while len(self._evicted) > 64 * self.max_sessions:
                self._evicted.popitem(last=False)
        return s

    def __len__(self) -> int:
        return len(self._sessions)

    def _close(self, session: Session) -> None:
        self._locks.pop(session, None)
        session.close()

    async def run(self, session: Session, work: Callable[[Session], _T]) -> _T:
        """``work(session)`` in a worker thread (a sandboxed tool, a long message to the simulated user or the
        reward of a large world never holds up another session's requests), after the session's earlier
        requests: one at a time per session, in the order they came."""
        import anyio
        import anyio.to_thread

        lock = self._locks.get(session)
        if lock is None:
            lock = self._locks[session] = anyio.Lock()
        self._busy[session] = self._busy.get(session, 0) + 1
        try:
            async with lock:
                return await anyio.to_thread.run_sync(work, session)
        finally:
            self._busy[session] -= 1
            if not self._busy[session]:
                del self._busy[session]
                if session in self._retired:
                    self._retired.discard(session)
                    self._close(session)


def tool_list(session: Session, types: ModuleType, *, expose_evaluate: bool = False) -> list[Any]:
    """The MCP tools of a session: the domain's tools, the user tool (and ``evaluate`` if exposed)."""
    tools = []
    for schema in session.tool_schemas(user_tool=False):
        fn = schema["function"]
        kind = session.tool_kind(fn["name"])
        tools.append(types.Tool(
            name=fn["name"], description=fn["description"], input_schema=fn["parameters"],
            annotations=types.ToolAnnotations(read_only_hint=kind == "read", destructive_hint=False if kind == "read"
                                              else None, open_world_hint=False)))
    user = USER_TOOL_SCHEMA["function"]
    tools.append(types.Tool(name=USER_TOOL, description=user["description"], input_schema=user["parameters"],
                            annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                              open_world_hint=True)))
    if not expose_evaluate:
        return tools
    tools.append(types.Tool(
        name=EVALUATE_TOOL,
        description="Score the world as it is now against the task's goal: returns JSON with score (0..1), "
                    "success, components and a diff that explains every mismatch. Call it when you are done.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)))
    return tools


def build_mcp_server(source: TaskSource, task: Task, *, user: str | None = "scripted",
                     mode: str = "conversational", name: str = "scaleenv", max_sessions: int = 256,
                     prefer_sessions: bool = False, expose_evaluate: bool = False,
                     require_session: bool = False, reward_shape: str = "binary") -> Any:  # the SDK's lowlevel Server
    """A low-level MCP ``Server`` for one task; each client session gets a fresh episode.

    ``prefer_sessions`` (for streamable HTTP) answers ``server/discover`` with the handshake protocol
    versions only, so that clients fall back to the initialize handshake and get an ``Mcp-Session-Id``.
    ``expose_evaluate`` lists the ``evaluate`` tool and the reward resource (never for agents in
    training: the reward's diff gives the answer away). ``require_session`` refuses requests without
    a session id (streamable HTTP), so that no two clients share a world. ``reward_shape`` is the
    shape ``evaluate`` scores in (``binary``, ``partial``, ``dense``; its sub-goals come with it).
    """
    types, Server = _mcp()
    clash = sorted(RESERVED_NAMES & set(task.tools))
    if clash:
        raise IntegrationError(f"task {task.id}: tool name {clash[0]!r} is reserved by the MCP server")
    worlds = SessionWorlds(lambda: Session(source, task, user=user, mode=mode, reward_shape=reward_shape),
                           max_sessions, require_session=require_session)
    probe = Session(source, task, user=user, mode=mode, reward_shape=reward_shape)
    tools = tool_list(probe, types, expose_evaluate=expose_evaluate)
    prompt, request = probe.system_prompt(), probe.opening
    probe.close()

    def text(s: str, error: bool = False, structured: dict[str, Any] | None = None) -> object:
        kw: dict[str, Any] = {"structured_content": structured} if structured is not None else {}
        return types.CallToolResult(content=[types.TextContent(type="text", text=s)], is_error=error, **kw)

    async def on_list_tools(ctx: object, params: object) -> object:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx: object, params: _CallParams) -> object:
        try:
            session = worlds.get(_session_key(ctx))
        except SessionError as e:
            return text(error_output(e.code, e.message), True)
        args = params.arguments
        if params.name == EVALUATE_TOOL and expose_evaluate:
            if args:
                return text(f'{{"error": "invalid_arguments", "message": "{EVALUATE_TOOL} takes no arguments"}}', True)
            reward = await worlds.run(session, lambda s: s.reward_json())
            return text(dumps(reward), structured=reward)
        name, given = params.name, args if args is not None else {}
        res = await worlds.run(session, lambda s: s.call(name, given))
        return text(res.output, not res.ok)

    resources: dict[str, tuple[str, Callable[[Session], str]]] = {
        "system_prompt": ("The agent's system prompt for this task.", lambda s: prompt),
        "request": ("The user's opening request.", lambda s: request),
    }
    if expose_evaluate:
        resources["reward"] = ("The reward of this session's world now (JSON, as the evaluate tool).",
                               lambda s: s.reward_text())

    async def on_list_resources(ctx: object, params: object) -> object:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=RESOURCE_PREFIX + k, name=k, description=d,
                           mime_type="application/json" if k == "reward" else "text/plain")
            for k, (d, _) in resources.items()])

    async def on_read_resource(ctx: object, params: _ResourceParams) -> object:
        uri = str(params.uri)
        key = uri[len(RESOURCE_PREFIX):] if uri.startswith(RESOURCE_PREFIX) else None
        if key not in resources:
            _protocol_error(f"unknown resource {uri!r}; see resources/list")
        try:
            session = worlds.get(_session_key(ctx))
        except SessionError as e:
            _protocol_error(f"{e.code}: {e.message}")
        body = await worlds.run(session, resources[key][1])
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, text=body, mime_type="application/json" if key == "reward" else "text/plain")])

    server = Server(name, instructions=f"{prompt}\n\nThe user's request: {request}", on_list_tools=on_list_tools,
                    on_call_tool=on_call_tool, on_list_resources=on_list_resources,
                    on_read_resource=on_read_resource)
    server.scaleenv_worlds = worlds  # for tests and introspection
    server.scaleenv_handlers = {"call_tool": on_call_tool, "read_resource": on_read_resource,
                                "list_tools": on_list_tools, "list_resources": on_list_resources}
    if prefer_sessions:
        _prefer_sessions(server, types)
    return server


def _protocol_error(why: str) -> NoReturn:
    try:
        from mcp.shared.exceptions import MCPError
    except ImportError:  # pragma: no cover - older SDKs turn exceptions into errors themselves
        raise ValueError(why) from None
    raise MCPError(code=-32602, message=why)


def _prefer_sessions(server: Any, types: ModuleType) -> None:
    discover = getattr(types, "DiscoverResult", None)
    add = getattr(server, "add_request_handler", None)
    if discover is None or add is None:  # an SDK without the sessionless protocol: nothing to do
        return
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    async def on_discover(ctx: object, params: object) -> object:
        return discover(supported_versions=[HANDSHAKE_PROTOCOL_VERSIONS[-1]], capabilities=server.get_capabilities(),
                        instructions=server.instructions)

    add("server/discover", types.RequestParams, on_discover)


def serve(universe: str | Path, task_id: str, *, transport: str = "stdio", host: str = "127.0.0.1",
          port: int = 8000, user: str | None = "scripted", mode: str = "conversational",
          expose_evaluate: bool = False, max_sessions: int = 256, reward_shape: str = "binary") -> None:
    """Serve one task over stdio or streamable HTTP (``http://HOST:PORT/mcp``) until stopped."""
    if transport not in TRANSPORTS:
        raise IntegrationError(f"unknown transport {transport!r}; use stdio or http")
    source = task_source(universe)
    task = source.task(task_id)
    http = transport == "http"
    server = build_mcp_server(source, task, user=user, mode=mode, prefer_sessions=http, require_session=http,
                              expose_evaluate=expose_evaluate, max_sessions=max_sessions, reward_shape=reward_shape)
    if transport == "stdio":
        import anyio
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
        return
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - uvicorn comes with mcp
        raise IntegrationError("--transport http needs uvicorn: pip install 'scaleenv[mcp]'") from None
    app = server.streamable_http_app(host=host)
    print(f"scaleenv: serving {task.id} over MCP at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
