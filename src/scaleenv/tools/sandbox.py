"""A sandbox for generated tool code: a separate process with CPU, memory, file and time limits,
no network, and nothing to reach but the world API.

Layers, outermost first:

1. **Process.** Each job runs in a child forked from a clean fork server (``forkserver``; ``spawn``
   where that is missing). The parent waits at most ``wall_seconds`` and then kills it. Whatever
   the child does (hang, exhaust memory, segfault, exit) the parent gets an outcome, never an
   exception it did not ask for.
2. **Resource limits** (``resource.setrlimit``): CPU seconds (SIGXCPU, then SIGKILL), address
   space (allocations fail with MemoryError), file size 0 (writing any file fails), no core dumps,
   no new processes (for non-root users).
3. **No network**: the child moves into a fresh network namespace where it can (root on Linux;
   best effort elsewhere), and an audit hook refuses every socket, subprocess, exec, fork, signal,
   file write or delete, ctypes call and file read outside the Python installation.
4. **Narrow API**: tool code itself runs with restricted builtins (no ``import``, no ``open``) over
   :class:`scaleenv.tools.pyimpl.WorldAPI`; :func:`vet_python` and :func:`vet_sql` reject imports,
   private names, schema changes, ``ATTACH`` and recursive queries before anything runs.

:func:`test_tool_sandboxed` runs the procedural tester (and a tool's LLM-written test cases) for
one tool inside this sandbox. A tool that is refused, times out or is killed gets an unexpected
failure and is not admitted.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import multiprocessing as mp
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from scaleenv.formats.jsonvalue import JSONValue
from scaleenv.utils.pyast import parse_python

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext

    from scaleenv.formats.domain import DomainSpec, ToolSpec

try:
    import resource
except ImportError:  # pragma: no cover - non-POSIX
    resource = None  # type: ignore[assignment]


@dataclass
class SandboxLimits:
    cpu_seconds: int = 5
    wall_seconds: float = 15.0
    memory_mb: int = 512


@dataclass
class SandboxOutcome:
    """``error`` is None on success, else one of: timeout, cpu_limit, memory_limit, file_limit,
    denied, exception, crashed, setup."""

    ok: bool
    value: JSONValue = None
    error: str | None = None
    detail: str = ""
    violations: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.ok:
            return "ok"
        return f"sandbox: {self.error}: {self.detail}".rstrip(": ")


class SandboxViolation(PermissionError):
    """An operation the sandbox refuses (network, processes, files)."""


# --- the child side ------------------------------------------------------------------------

_DENY_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.system",
                  "os.kill", "os.killpg", "os.remove", "os.unlink", "os.rename", "os.rmdir", "os.mkdir", "os.chmod",
                  "os.chown", "os.truncate", "os.link", "os.symlink", "os.utime", "os.chdir", "os.putenv",
                  "os.unsetenv", "os.startfile", "shutil.", "ctypes.", "pty.",
                  "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                  "builtins.input", "webbrowser.", "urllib.", "http.", "ftplib.", "smtplib.", "poplib.", "imaplib.",
                  "nntplib.", "telnetlib.", "sqlite3.enable_load_extension", "sqlite3.load_extension",
                  "tempfile.", "mmap.", "fcntl.", "msvcrt.", "winreg.",
                  "_winapi.", "resource.setrlimit", "signal.", "os.listdir", "os.scandir", "os.listxattr",
                  "os.getxattr", "os.setxattr", "os.removexattr", "os.mknod", "os.mkfifo", "os.lockf",
                  "os.chflags", "os.fwalk", "glob.", "sys._getframe", "object.__getattr__")
_DENY_MODULES = {"socket", "_socket", "subprocess", "ctypes", "_ctypes", "multiprocessing", "asyncio", "ssl",
                 "urllib", "http", "requests", "httpx", "pty", "shutil", "signal", "threading", "_thread", "mmap",
                 "select", "selectors", "pickle", "marshal", "importlib", "_posixsubprocess", "posix", "_pickle",
                 "_multiprocessing", "gc"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_violations: list[str] = []


def _readable(path: int | str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> bool:
    if isinstance(path, int):
        return False
    p = os.path.realpath(os.fsdecode(path))
    roots = {os.path.realpath(r) for r in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots |= {os.path.realpath(os.path.dirname(os.path.dirname(__file__)))}  # the scaleenv package
    return any(p == r or p.startswith(r + os.sep) for r in roots)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    deny = None
    if event == "open":
        path, mode, flags = (list(args) + [None, None, None])[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writing:
            deny = f"writing files is not allowed ({path!r})"
        elif not _readable(path):
            deny = f"reading files is not allowed ({path!r})"
    elif event == "import":
        name = str(args[0]) if args else ""
        if name.split(".")[0] in _DENY_MODULES:
            deny = f"importing {name} is not allowed"
    elif event == "sqlite3.connect":
        db = args[0] if args else None
        if db not in (":memory:", b":memory:", ""):
            deny = f"opening database files is not allowed ({db!r})"
    elif event.startswith(_DENY_PREFIXES):
        deny = f"{event} is not allowed"
    if deny is not None:
        if len(_violations) < 50:
            _violations.append(deny)
        raise SandboxViolation(deny)


def _no_network() -> bool:
    """Move into an empty network namespace (Linux, with CAP_SYS_ADMIN). True if it worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.unshare(0x40000000) == 0)  # CLONE_NEWNET
    except Exception:  # noqa: BLE001 - best effort; the audit hook still refuses sockets
        return False


DENIED_SYSCALLS = ("execve", "execveat", "fork", "vfork", "clone", "clone3", "ptrace", "process_vm_writev",
                   "socket", "socketpair", "connect", "bind", "mknod", "mknodat", "setxattr", "lsetxattr",
                   "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "kill", "tkill", "tgkill", "unshare",
                   "setns", "mount", "umount2", "chroot", "pivot_root", "symlink", "symlinkat", "link", "linkat",
                   "rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "chmod",
                   "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate", "ftruncate")
"""System calls a sandbox child never makes: no processes or threads, no network, no file-system
changes, no signals to others (kernel-enforced with seccomp, whatever Python-level escape is found)."""
_WRITE_BITS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
SECCOMP_ACTIVE = False
"""Whether this (child) process runs under the seccomp filter (libseccomp was found and loaded)."""


def _seccomp() -> bool:
    """Install a seccomp filter through libseccomp (Debian's libseccomp2, via ctypes): the calls in
    :data:`DENIED_SYSCALLS` and opening files for writing fail with EPERM. False where libseccomp is
    missing (then the audit hook and resource limits remain)."""
    global SECCOMP_ACTIVE
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        import ctypes.util
        import errno

        name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return False

    class ArgCmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                    ("datum_b", ctypes.c_uint64)]

    allow, deny = 0x7FFF0000, 0x00050000 | errno.EPERM  # SCMP_ACT_ALLOW, SCMP_ACT_ERRNO(EPERM)
    masked_eq = 7  # SCMP_CMP_MASKED_EQ
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(allow)
    if not ctx:
        return False
    try:
        for call in DENIED_SYSCALLS:
            nr = lib.seccomp_syscall_resolve_name(call.encode())
            if nr >= 0:  # (a call this architecture does not have: nothing to deny)
                lib.seccomp_rule_add_array(ctx, deny, nr, 0, None)
        for call, argno in (("open", 1), ("openat", 2), ("creat", -1)):
            nr = lib.seccomp_syscall_resolve_name(call.encode())
            if nr < 0:
                continue
            if argno < 0:
                lib.seccomp_rule_add_array(ctx, deny, nr, 0, None)
                continue
            for bit in _WRITE_BITS:
                cmp = ArgCmp(argno, masked_eq, bit, bit)
                lib.seccomp_rule_add_array(ctx, deny, nr, 1, ctypes.byref(cmp))
        SECCOMP_ACTIVE = bool(lib.seccomp_load(ctx) == 0)
        return SECCOMP_ACTIVE
    finally:
        lib.seccomp_release(ctx)


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


_IN_SANDBOX = False
"""True in a sandbox child: tool code there runs in-process (it is already confined)."""
MAX_MESSAGE = 16 * 2**20
"""The most bytes a child may send back (JSON, never a pickle: the parent must not unpickle what
confined code could have written to the pipe)."""


def _confine(limits: SandboxLimits) -> None:
    global _IN_SANDBOX
    _IN_SANDBOX = True
    os.environ.clear()  # no key or token of the parent's environment is readable in here
    _no_network()
    if resource is not None:
        def lim(which: int, soft: int, hard: int | None = None) -> None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (soft, soft if hard is None else hard))

        lim(resource.RLIMIT_CORE, 0)
        cpu = max(1, int(limits.cpu_seconds))
        lim(resource.RLIMIT_CPU, cpu, cpu + 1)
        if hasattr(resource, "RLIMIT_AS"):
            lim(resource.RLIMIT_AS, _vm_bytes() + limits.memory_mb * 2**20)
        lim(resource.RLIMIT_FSIZE, 0)
        if hasattr(resource, "RLIMIT_NPROC") and os.geteuid() != 0:
            lim(resource.RLIMIT_NPROC, 0)
    _seccomp()
    sys.addaudithook(_audit)


def _send(conn: Connection, msg: tuple[object, ...]) -> None:
    import json

    conn.send_bytes(json.dumps(msg, default=str).encode("utf-8"))


def _child(conn: Connection, fn: Callable[..., object], args: tuple[object, ...], limits: SandboxLimits) -> None:
    try:
        _confine(limits)
    except BaseException as e:  # noqa: BLE001
        _send(conn, ("setup", f"{type(e).__name__}: {e}", []))
        return
    try:
        value = fn(*args)
        msg: tuple[object, ...] = ("ok", value, list(_violations))
    except SandboxViolation as e:
        msg = ("denied", str(e), list(_violations))
    except MemoryError:
        msg = ("memory_limit", "the code allocated more memory than allowed", list(_violations))
    except BaseException as e:  # noqa: BLE001 - report anything
        msg = ("exception", f"{type(e).__name__}: {str(e)[:500]}", list(_violations))
    try:
        _send(conn, msg)
    except Exception as e:  # noqa: BLE001 - e.g. a value that is not JSON
        _send(conn, ("exception", f"result could not be sent back: {type(e).__name__}: {e}", list(_violations)))


# --- the parent side -----------------------------------------------------------------------

_CTX: ForkServerContext | SpawnContext | None = None
_CTX_LOCK = threading.Lock()
_PRELOAD = ["scaleenv.tools.sandbox", "scaleenv.tools.testing", "scaleenv.tools.runtime", "scaleenv.world.world"]
_MAIN_ENV = "SCALEENV_SANDBOX_MAIN"


def _adopt_main() -> None:
    """In the fork server only: import the program's main script once, as every child would otherwise
    do again before running anything (multiprocessing's own ``__main__`` preload never fires: it
    looks for a ``main_path`` key that the preparation data does not have), so that a sandbox run
    costs a fork, not a re-import of the program."""
    owner, _, path = os.environ.get(_MAIN_ENV, "").partition(":")
    main = sys.modules.get("__main__")
    if not path or getattr(main, "__file__", None) is not None or owner != str(os.getppid()):
        return
    if not os.path.isfile(path):
        return
    from multiprocessing import process, spawn

    process.current_process()._inheriting = True  # type: ignore[attr-defined]  # private flag, not in the stubs; an unguarded script must not start processes here
    try:
        spawn.import_main_path(path)
    except BaseException:  # noqa: BLE001 - children then import it themselves, as usual
        pass
    finally:
        process.current_process()._inheriting = False  # type: ignore[attr-defined]  # (as above)


def _context() -> ForkServerContext | SpawnContext:
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            methods = mp.get_all_start_methods()
            if "forkserver" in methods:
                main = sys.modules.get("__main__")
                path = getattr(main, "__file__", None)
                if path and getattr(getattr(main, "__spec__", None), "name", None) is None:
                    os.environ[_MAIN_ENV] = f"{os.getpid()}:{os.path.abspath(path)}"
                _CTX = mp.get_context("forkserver")
                _CTX.set_forkserver_preload(_PRELOAD)
            else:  # pragma: no cover - Windows
                _CTX = mp.get_context("spawn")
        return _CTX


_SIGNALS = {getattr(signal, "SIGXCPU", -1): "cpu_limit", getattr(signal, "SIGXFSZ", -1): "file_limit",
            signal.SIGSEGV: "crashed", signal.SIGABRT: "crashed"}


def run_in_sandbox(fn: Callable[..., object], args: tuple[object, ...] = (),
                   limits: SandboxLimits | None = None) -> SandboxOutcome:
    """Run ``fn(*args)`` (a picklable, module-level function) in a confined child process."""
    limits = limits or SandboxLimits()
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args, limits), daemon=True)
    try:
        proc.start()
    except Exception as e:  # noqa: BLE001 - e.g. no processes left
        return SandboxOutcome(False, error="setup", detail=f"cannot start the sandbox: {type(e).__name__}: {e}")
    finally:
        send.close()
    msg = None
    timed_out = False
    try:
        if recv.poll(limits.wall_seconds):
            msg = _read(recv.recv_bytes(MAX_MESSAGE))
        else:
            timed_out = True
    except (EOFError, OSError):
        msg = None
    except Exception as e:  # noqa: BLE001 - a result that is not our JSON message
        msg = ("exception", f"result could not be read: {type(e).__name__}: {e}", [])
    finally:
        recv.close()
    proc.join(0.5 if msg is not None else 0.05)
    if proc.is_alive():
        proc.kill()
        proc.join(5)
    code = proc.exitcode
    with contextlib.suppress(ValueError):
        proc.close()
    if msg is not None:
        kind, payload, violations = msg
        if kind == "ok":
            return SandboxOutcome(True, value=payload, violations=violations)
        return SandboxOutcome(False, error=kind, detail=str(payload), violations=violations)
    if timed_out:
        return SandboxOutcome(False, error="timeout", detail=f"no result within {limits.wall_seconds:g} s (killed)")
    if code is not None and code < 0:
        kind = _SIGNALS.get(-code, "crashed")
        what = {"cpu_limit": f"used more than {limits.cpu_seconds} s of CPU (killed)",
                "file_limit": "tried to write a file (killed)"}.get(kind, f"killed by signal {-code}")
        if -code == signal.SIGKILL:
            kind, what = "memory_limit", "killed (SIGKILL), most likely for exhausting memory or CPU"
        return SandboxOutcome(False, error=kind, detail=what)
    return SandboxOutcome(False, error="crashed", detail=f"the sandbox exited with code {code} and no result")


def _read(data: bytes) -> tuple[str, JSONValue, list[str]]:
    """A child's message: ``[kind, payload, violations]`` as JSON, checked (never unpickled)."""
    import json

    msg = json.loads(data)
    kinds = {"ok", "denied", "memory_limit", "exception", "setup"}
    if (not isinstance(msg, list) or len(msg) != 3 or msg[0] not in kinds or not isinstance(msg[2], list)):
        raise ValueError("not a sandbox message")
    return msg[0], msg[1], [str(v)[:500] for v in msg[2][:50]]


def _exec_source(source: str) -> object:
    """Run arbitrary Python with full builtins (only for testing the confinement itself)."""
    env: dict[str, Any] = {"__name__": "__sandbox__"}
    exec(compile(source, "<sandbox>", "exec"), env)  # noqa: S102 - this *is* the sandbox
    return env.get("result")


def run_source_in_sandbox(source: str, limits: SandboxLimits | None = None) -> SandboxOutcome:
    """Execute ``source`` (which may set ``result``) in the sandbox; used to test the confinement."""
    return run_in_sandbox(_exec_source, (source,), limits)


# --- static vetting ------------------------------------------------------------------------

_FORBIDDEN_NAMES = {"open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "getattr",
                    "setattr", "delattr", "input", "breakpoint", "memoryview", "help", "exit", "quit", "type",
                    "object", "super", "classmethod", "staticmethod", "property"}


def vet_python(source: str) -> list[str]:
    """Problems that keep tool code from running at all: imports, forbidden names, private names,
    no ``run(db, args)``, an unconditional infinite loop."""
    try:
        tree = parse_python(source)
    except SyntaxError as e:
        return [f"does not compile: {e.msg} (line {e.lineno})"]
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or "."]
            problems.append(f"line {node.lineno}: imports are not allowed ({', '.join(names)}); "
                            "use only db.query/db.query_one/db.execute/db.fail")
        elif isinstance(node, ast.Name) and node.id in _FORBIDDEN_NAMES:
            problems.append(f"line {node.lineno}: {node.id} is not available to tool code")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            problems.append(f"line {node.lineno}: private attribute {node.attr} is not allowed")
        elif isinstance(node, ast.Name) and node.id.startswith("__"):
            problems.append(f"line {node.lineno}: name {node.id} is not allowed")
        elif isinstance(node, ast.While) and isinstance(node.test, ast.Constant) and node.test.value and not any(
                isinstance(n, ast.Break | ast.Return) for n in ast.walk(node)):
            problems.append(f"line {node.lineno}: an unconditional loop with no break never ends")
        elif isinstance(node, ast.Global | ast.Nonlocal | ast.AsyncFunctionDef | ast.ClassDef | ast.Await):
            problems.append(f"line {node.lineno}: {type(node).__name__} is not allowed in tool code")
    if not any(isinstance(n, ast.FunctionDef) and n.name == "run" and len(n.args.args) == 2 for n in tree.body):
        problems.append("must define a top-level function run(db, args)")
    return sorted(set(problems), key=problems.index)


_SQL_DENY = {
    sqlite3.SQLITE_ATTACH: "ATTACH", sqlite3.SQLITE_DETACH: "DETACH", sqlite3.SQLITE_PRAGMA: "PRAGMA",
    sqlite3.SQLITE_TRANSACTION: "transactions", sqlite3.SQLITE_SAVEPOINT: "savepoints",
    sqlite3.SQLITE_CREATE_TABLE: "CREATE TABLE", sqlite3.SQLITE_DROP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_CREATE_INDEX: "CREATE INDEX", sqlite3.SQLITE_DROP_INDEX: "DROP INDEX",
    sqlite3.SQLITE_CREATE_TRIGGER: "CREATE TRIGGER", sqlite3.SQLITE_DROP_TRIGGER: "DROP TRIGGER",
    sqlite3.SQLITE_CREATE_VIEW: "CREATE VIEW", sqlite3.SQLITE_DROP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE", sqlite3.SQLITE_CREATE_TEMP_TABLE: "CREATE TEMP TABLE",
    sqlite3.SQLITE_CREATE_TEMP_VIEW: "CREATE TEMP VIEW", sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "CREATE TEMP TRIGGER",
    sqlite3.SQLITE_CREATE_VTABLE: "virtual tables", sqlite3.SQLITE_REINDEX: "REINDEX",
    sqlite3.SQLITE_ANALYZE: "ANALYZE", getattr(sqlite3, "SQLITE_RECURSIVE", 33): "recursive queries",
}
_SQL_DENY_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "zipfile",
                       "sqlite_compileoption_get", "randomblob", "zeroblob", "random"}


def vet_sql(conn: sqlite3.Connection, sql: str) -> list[str]:
    """Problems of one SQL snippet of generated code, found by preparing it under a strict
    authorizer: no schema changes, transactions, ATTACH, PRAGMA, recursion or file functions, and no
    nondeterministic functions (``random()`` would make verification unrepeatable)."""
    from scaleenv.formats.sqlinfo import sql_params, strict_identifiers
    from scaleenv.world.guard import restore_authorizer

    refused: list[str] = []

    def auth(action: int, a1: str | None, a2: str | None, db: str | None, inner: str | None) -> int:
        # ``inner`` names the trigger or view (or CTE) the action comes from: the world's own change-log
        # triggers may touch internal tables, but nothing anywhere may do what the deny list names
        if action in _SQL_DENY:
            refused.append(_SQL_DENY[action])
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and str(a2 or "").lower() in _SQL_DENY_FUNCTIONS:
            refused.append(f"function {a2}()")
            return sqlite3.SQLITE_DENY
        ours = isinstance(inner, str) and inner.startswith("_log_")  # the world's change-log triggers
        if not ours and isinstance(a1, str) and a1.startswith(("_", "sqlite_")) and action != sqlite3.SQLITE_FUNCTION:
            refused.append(f"internal table {a1}")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    conn.set_authorizer(auth)
    try:
        conn.execute("EXPLAIN " + strict_identifiers(sql), {p: None for p in sql_params(sql)}).fetchall()
    except sqlite3.Error as e:
        if refused:
            return [f"not allowed in tool SQL: {', '.join(sorted(set(refused)))}"]
        return [f"SQL does not prepare: {e}"]
    finally:
        restore_authorizer(conn)
    if refused:
        return [f"not allowed in tool SQL: {', '.join(sorted(set(refused)))}"]
    return []


def vet_tool(spec: DomainSpec, tool: ToolSpec) -> list[str]:
    """Static problems of a generated tool's code (SQL and Python), as ``path: reason`` strings."""
    from scaleenv.validation.spec import tool_sql
    from scaleenv.world.world import World

    problems: list[str] = []
    conn = World(spec.model_copy(update={"tools": []})).conn
    try:
        for path, sql in tool_sql(tool):
            problems += [f"{path}: {p}" for p in vet_sql(conn, sql)]
    finally:
        conn.close()
    if tool.implementation.kind == "python":
        problems += [f"implementation.source: {p}" for p in vet_python(tool.implementation.source or "")]
    return problems


# --- Python tool calls, isolated --------------------------------------------------------------

PYTHON_CALL_LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=5.0, memory_mb=256)
"""The limits of one Python tool call (the runtime's 2 s budget plus the child's start-up)."""
_CALL_LIMITS: contextvars.ContextVar[SandboxLimits | None] = contextvars.ContextVar("scaleenv_call_limits",
                                                                                     default=None)
_ABORT_ON_STOP: contextvars.ContextVar[bool] = contextvars.ContextVar("scaleenv_abort_on_stop", default=False)


class SandboxStopped(BaseException):
    """A Python tool call that the sandbox stopped while a tool is being tested: the test run ends
    (a BaseException, so that no ``except Exception`` in the tester turns it into one more result)."""

    def __init__(self, outcome: SandboxOutcome):
        super().__init__(outcome.describe())
        self.outcome = outcome


def _python_call_job(source: str, snapshot: bytes, params: dict[str, Any], clock: str) -> dict[str, Any]:
    """Inside the sandbox: run tool code on a guarded copy of the world; return its value (as JSON
    values) and the statements it wrote with, or the ToolError it raised."""
    import json

    from scaleenv.errors import ToolError
    from scaleenv.tools.output import dumps
    from scaleenv.tools.pyimpl import RecordingAPI, compile_python_tool
    from scaleenv.world.guard import deny_escapes, extra_authorizer, guarded_connect

    conn = guarded_connect()
    conn.building = True  # deserialize's internal ATTACH
    conn.deserialize(snapshot)
    conn.building = False
    api = RecordingAPI(conn, clock)
    try:
        fn = compile_python_tool(source)
        with extra_authorizer(conn, deny_escapes):
            value = fn(api, dict(params))
        return {"value": json.loads(dumps(value)), "writes": api.writes}
    except ToolError as e:
        return {"error": e.code, "message": e.message}


def run_python_call(conn: sqlite3.Connection, source: str, params: dict[str, Any], clock: str) -> JSONValue:
    """Run one call of Python tool code in a sandboxed child and apply its writes here.

    The child gets a snapshot of the world and sends back JSON only: the value and the statements
    it executed through ``db.execute``. This process replays those statements itself, under the
    world's guard and the runtime's authorizer, so the change log (and the incremental hash) sees
    every write and nothing but SQL on the world's own tables can come out of the child. A call the
    sandbox stops is a ToolError (or, while a tool is being tested, :class:`SandboxStopped`).
    """
    from scaleenv.errors import ToolError
    from scaleenv.tools.pyimpl import check_sql
    from scaleenv.world.guard import deny_escapes, extra_authorizer

    limits = _CALL_LIMITS.get() or PYTHON_CALL_LIMITS
    outcome = run_in_sandbox(_python_call_job, (source, conn.serialize(), params, clock), limits)
    if outcome.ok and outcome.violations:
        outcome = SandboxOutcome(False, error="denied", detail="; ".join(outcome.violations[:3]),
                                 violations=outcome.violations)
    if not outcome.ok:
        if _ABORT_ON_STOP.get() and outcome.error != "exception":
            raise SandboxStopped(outcome)
        raise ToolError("internal_error", stable_reason(outcome))
    res = outcome.value
    if not isinstance(res, dict):
        raise ToolError("internal_error", "sandbox: malformed result")
    if "error" in res:
        raise ToolError(str(res["error"])[:100] or "internal_error", str(res.get("message") or "")[:1000])
    writes = res.get("writes")
    if not isinstance(writes, list):
        raise ToolError("internal_error", "sandbox: malformed result (writes)")
    with extra_authorizer(conn, deny_escapes):
        for w in writes:
            if not (isinstance(w, list) and len(w) == 2 and isinstance(w[0], str) and isinstance(w[1], dict | list)):
                raise ToolError("internal_error", "sandbox: malformed result (a write)")
            conn.execute(check_sql(w[0]), w[1])
    return res.get("value")


def stable_reason(outcome: SandboxOutcome) -> str:
    """Why the sandbox stopped a tool, in words that do not depend on timing (which of the CPU and
    wall-clock limits fires first does), so reports stay byte-identical across runs."""
    if outcome.error in ("timeout", "cpu_limit"):
        return "sandbox: killed for exceeding its time limit (it hangs or loops)"
    if outcome.error == "memory_limit":
        return "sandbox: stopped for exceeding its memory limit"
    return outcome.describe()


_adopt_main()  # last: the main script may import names from this module
