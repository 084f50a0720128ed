"""One exception hierarchy for everything scaleenv raises on purpose."""


class ScaleEnvError(Exception):
    """Root of every error scaleenv raises deliberately."""


class SpecError(ScaleEnvError):
    """A domain spec is malformed or inconsistent. ``problems`` lists (path, reason) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = "; ".join(f"{p}: {r}" for p, r in problems[:5])
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(f"invalid domain spec: {lines}{more}")


class WorldError(ScaleEnvError):
    """A world could not be built, loaded or restored."""


class ToolError(ScaleEnvError):
    """A tool call failed. ``code`` is the declared error code (or a runtime code such as ``invalid_arguments``)."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


class UniverseError(ScaleEnvError):
    """A universe directory or one of its files is missing or corrupt."""
