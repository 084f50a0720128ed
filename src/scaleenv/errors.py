"""One exception hierarchy for everything scaleenv raises on purpose, cut by boundary.

    ScaleEnvError
      InputError       bad input files, flags or settings (a spec, a universe, a config): exit 2
        SpecError, UniverseError, WorldError, and each stage's settings errors
      ToolCallError    an agent's or a gold chain's tool call failed (ToolError, ChainError): exit 1
      ProviderError    a model provider failed: endpoint, timeout, malformed reply: exit 3
      SandboxError     generated code broke the sandbox's rules: exit 1
      Rejection        a candidate (a task, a tool) was rejected at build time, with a reason: exit 1

:func:`exit_code` is the one mapping from an error to the CLI's exit status.
"""


def _restore(cls: "type[ScaleEnvError]", args: tuple[object, ...], state: dict[str, object]) -> "ScaleEnvError":
    error = Exception.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class ScaleEnvError(Exception):
    """Root of every error scaleenv raises deliberately (one a user can act on: exit 2 unless a
    boundary class says otherwise)."""

    exit_code = 2

    def __reduce__(self) -> tuple[object, ...]:
        # Exception's own pickling calls ``cls(*args)``, which breaks every subclass whose __init__
        # takes other arguments than its message (SpecError, ToolError, Rejection): an error raised
        # in a worker process then kills the pool instead of reaching the parent. Rebuild from state.
        return (_restore, (type(self), self.args, dict(self.__dict__)))


class InputError(ScaleEnvError):
    """Bad input: a file, a flag or a setting that the user can fix (the message says how)."""

    exit_code = 2


class SpecError(InputError):
    """A domain spec is malformed or inconsistent. ``problems`` lists (path, reason) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = "; ".join(f"{p}: {r}" for p, r in problems[:5])
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"invalid domain spec: {lines}{more}")


class WorldError(InputError):
    """A world could not be built, loaded or restored from the data it was given."""


class UniverseError(InputError):
    """A universe directory or one of its files is missing or corrupt."""


class ToolCallError(ScaleEnvError):
    """A tool call failed (an agent's mistake, or a gold chain that no longer replays)."""

    exit_code = 1


class ToolError(ToolCallError):
    """A tool call failed. ``code`` is the declared error code (or a runtime code such as ``invalid_arguments``)."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class ProviderError(ScaleEnvError):
    """A model provider failed: the endpoint, a timeout, or a reply that cannot be used."""

    exit_code = 3


class SandboxError(ScaleEnvError):
    """Generated code broke the sandbox's rules or its limits."""

    exit_code = 1


class Rejection(ScaleEnvError):
    """A candidate was rejected at build time; ``reason`` is its rejection reason."""

    exit_code = 1

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


def exit_code(error: BaseException) -> int:
    """The CLI's exit status for an error: 2 for bad input (and any deliberate error without a
    boundary of its own), 3 for a provider failure, 1 for a failed tool call, sandbox or rejection
    that escaped, and for anything unexpected."""
    return int(error.exit_code) if isinstance(error, ScaleEnvError) else 1
