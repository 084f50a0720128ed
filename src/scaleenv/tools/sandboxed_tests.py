"""Procedural testing of a generated Python tool through the sandbox: the tester runs in this
process and never trusts a verdict from confined code; every call of the tool's Python runs in the
sandbox and only its writes come back (kept apart from ``sandbox`` so that the tool runtime, which
calls the sandbox, does not depend on the tester)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scaleenv.tools.sandbox import (
    _ABORT_ON_STOP,
    _CALL_LIMITS,
    SandboxLimits,
    SandboxOutcome,
    SandboxStopped,
    stable_reason,
)

if TYPE_CHECKING:
    from scaleenv.formats.domain import DomainSpec, ToolSpec
    from scaleenv.tools.testing import TestResult, ToolReport
    from scaleenv.world.world import World


def run_cases(world: World, tool: ToolSpec, fixture: bytes, cases: list[dict[str, Any]]) -> list[TestResult]:
    """Classify LLM-written test cases like the procedural tester: a positive case must succeed (a
    write must change the world, a read must not); a negative case must fail with its declared
    error and leave the world unchanged."""
    from scaleenv.tools.runtime import execute_tool
    from scaleenv.tools.testing import ANTICIPATED, SUCCESS, UNEXPECTED, TestResult

    out: list[TestResult] = []
    for case in cases:
        world.restore(fixture)
        before = world.state_hash()
        args = case.get("args") or {}
        kind = "llm_negative" if case.get("kind") == "negative" else "llm_positive"
        res = execute_tool(world, tool, args)
        changed = world.state_hash() != before
        if kind == "llm_positive":
            if not res.ok:
                verdict, reason = UNEXPECTED, f"{case.get('name', 'case')}: failed: {res.error}: {res.message}"
            elif tool.kind == "write" and not changed:
                verdict, reason = UNEXPECTED, f"{case.get('name', 'case')}: succeeded but changed nothing"
            elif tool.kind == "read" and changed:
                verdict, reason = UNEXPECTED, f"{case.get('name', 'case')}: a read tool changed the world"
            else:
                verdict, reason = SUCCESS, ""
            out.append(TestResult(tool.name, kind, args, verdict, None, reason))
            continue
        expected = case.get("error")
        if res.ok:
            verdict, reason = UNEXPECTED, f"{case.get('name', 'case')}: succeeded but should fail with {expected}"
        elif expected and res.error != expected:
            verdict, reason = UNEXPECTED, (f"{case.get('name', 'case')}: expected error {expected}, "
                                           f"got {res.error}: {res.message}")
        elif changed:
            verdict, reason = UNEXPECTED, f"{case.get('name', 'case')}: the rejected call changed the world"
        else:
            verdict, reason = ANTICIPATED, ""
        out.append(TestResult(tool.name, kind, args, verdict, expected, reason))
    world.restore(fixture)
    return out


def test_tool_sandboxed(spec: DomainSpec, tool: ToolSpec, fixture: bytes, seed: int = 0,
                        cases: list[dict[str, Any]] | None = None,
                        limits: SandboxLimits | None = None) -> tuple[ToolReport, list[TestResult], SandboxOutcome]:
    """(ToolReport, case results, outcome) for ``tool`` tested on ``fixture``.

    The tester runs here, never trusting a verdict from confined code: every call of the tool's
    Python runs in the sandbox (:func:`run_python_call`) and only its writes come back, replayed
    here. The first call the sandbox stops (time, memory, a refused operation) ends the run, and
    the report gets one unexpected failure saying why.
    """
    import random

    from scaleenv.tools.testing import UNEXPECTED, TestResult, ToolReport, test_tool
    from scaleenv.world.world import World

    one = spec.model_copy(update={"tools": [tool]})
    t1, t2 = _CALL_LIMITS.set(limits), _ABORT_ON_STOP.set(True)
    world = World.from_snapshot(one, fixture)
    try:
        hints = [c["args"] for c in cases or [] if isinstance(c, dict) and c.get("kind") == "positive"
                 and isinstance(c.get("args"), dict)]
        report = test_tool(world, tool, random.Random(f"test:{seed}:{tool.name}"), hints)
        results = run_cases(world, tool, fixture, list(cases or []))
        return report, results, SandboxOutcome(True)
    except SandboxStopped as stop:
        outcome = stop.outcome
    finally:
        _CALL_LIMITS.reset(t1)
        _ABORT_ON_STOP.reset(t2)
        world.close()
    report = ToolReport(tool.name, admitted=False)
    report.tests.append(TestResult(tool.name, "sandbox", {}, UNEXPECTED, reason=stable_reason(outcome)))
    return report, [], outcome


test_tool_sandboxed.__test__ = False  # type: ignore[attr-defined]  # pytest's marker: not a test
