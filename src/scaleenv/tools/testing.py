"""Procedural testing of tools (the paper's Step 3), for procedural and LLM-written tools alike.

For every tool: positive tests (arguments that satisfy the preconditions must succeed, hold the
postconditions and change state as declared) and negative tests (one per precondition, violated
on purpose, must fail with the declared error and leave the world unchanged). Each test is
classified as Success, Anticipated rejection or Unexpected failure; a tool with any unexpected
failure is not admitted.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.formats.sqlinfo import analyze_sql
from scaleenv.tools.runtime import execute_tool
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.world import World

SUCCESS = "success"
ANTICIPATED = "anticipated_rejection"
UNEXPECTED = "unexpected_failure"


@dataclass
class TestResult:
    tool: str
    kind: str  # positive | negative | invalid_arguments
    args: dict[str, Any]
    verdict: str
    expected_error: str | None = None
    reason: str = ""


@dataclass
class ToolReport:
    tool: str
    admitted: bool
    tests: list[TestResult] = field(default_factory=list)
    untested_preconditions: list[int] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {SUCCESS: 0, ANTICIPATED: 0, UNEXPECTED: 0}
        for t in self.tests:
            out[t.verdict] += 1
        return out

    @property
    def positive_args(self) -> dict[str, Any] | None:
        return next((t.args for t in self.tests if t.kind == "positive" and t.verdict == SUCCESS), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "admitted": self.admitted,
            "counts": self.counts(),
            "negative_tests": sum(t.kind == "negative" for t in self.tests),
            "untested_preconditions": self.untested_preconditions,
            "positive_args": self.positive_args,
            "failures": [asdict(t) for t in self.tests if t.verdict == UNEXPECTED],
        }


def _written_tables(world: World, tool: ToolSpec) -> set[str] | None:
    if tool.implementation.kind == "python":
        return None
    out: set[str] = set()
    for stmt in tool.effects:
        out |= analyze_sql(world.conn, stmt).tables_written
    return out


def _positive(world: World, tool: ToolSpec, sampler: ArgSampler, snap: bytes,
              hints: list[dict[str, Any]] | None = None) -> TestResult:
    last = "no arguments satisfy the preconditions on the fixture world"
    for _ in range(4):
        args = sampler.satisfying_args(tool, widen=True, hints=hints)
        if args is None:
            if sampler.refusal is not None:
                last += f": {sampler.refusal.text()}"
            break
        world.restore(snap)
        res = execute_tool(world, tool, args)
        if not res.ok:
            last = f"call with satisfying arguments failed: {res.error}: {res.message}"
            continue
        touched = world.touched()
        if tool.kind == "read":
            if touched:
                return TestResult(tool.name, "positive", args, UNEXPECTED, reason="a read tool changed the world")
            return TestResult(tool.name, "positive", args, SUCCESS)
        if not touched:
            last = "the call succeeded but changed nothing"
            continue
        declared = _written_tables(world, tool)
        if declared is not None and not set(touched) <= declared:
            return TestResult(tool.name, "positive", args, UNEXPECTED,
                              reason=f"wrote undeclared tables {sorted(set(touched) - declared)}")
        return TestResult(tool.name, "positive", args, SUCCESS)
    return TestResult(tool.name, "positive", {}, UNEXPECTED, reason=last)


def test_tool(world: World, tool: ToolSpec, rng: random.Random,
              hints: list[dict[str, Any]] | None = None) -> ToolReport:
    """Run the positive and negative tests of one tool on a fixture world (restored afterwards).

    The positive test's arguments are searched for on the world (each parameter's values drawn from
    the column it carries); where that search finds none, ``hints`` (argument sets meant to succeed,
    such as a test agent's positive cases) are tried whole and lend their values to a wider search."""
    snap = world.snapshot()
    sampler = ArgSampler(world, rng)
    report = ToolReport(tool.name, admitted=False)
    pos = _positive(world, tool, sampler, snap, hints)
    world.restore(snap)
    report.tests.append(pos)
    base = pos.args if pos.verdict == SUCCESS else sampler.random_args(tool)
    world.clear_changes()
    for i, pre in enumerate(tool.preconditions):
        args = sampler.violating_args(tool, base, i)
        if args is None:
            report.untested_preconditions.append(i)
            continue
        res = execute_tool(world, tool, args)
        changed = bool(world.touched())  # every write is logged by triggers, rolled-back ones are not
        if res.ok:
            verdict, reason = UNEXPECTED, "succeeded although a precondition is violated"
        elif res.error != pre.error:
            verdict, reason = UNEXPECTED, f"expected error {pre.error}, got {res.error}: {res.message}"
        elif changed:
            verdict, reason = UNEXPECTED, "the rejected call changed the world"
        else:
            verdict, reason = ANTICIPATED, ""
        if changed:
            world.restore(snap)
        report.tests.append(TestResult(tool.name, "negative", args, verdict, pre.error, reason))
    required = [p.name for p in tool.parameters if p.required]
    if required:
        args = {k: v for k, v in base.items() if k != required[0]}
        res = execute_tool(world, tool, args)
        ok = (not res.ok) and res.error == "invalid_arguments" and not world.touched()
        report.tests.append(TestResult(tool.name, "invalid_arguments", args, ANTICIPATED if ok else UNEXPECTED,
                                       "invalid_arguments", "" if ok else f"missing argument not rejected: {res.output}"))
    world.restore(snap)
    report.admitted = report.counts()[UNEXPECTED] == 0
    return report


def test_domain(spec: DomainSpec, world: World, seed: int = 0) -> list[ToolReport]:
    """Test every tool of ``spec`` on ``world`` (left unchanged)."""
    return [test_tool(world, tool, random.Random(f"test:{seed}:{tool.name}")) for tool in spec.tools]


def tests_summary(spec: DomainSpec, reports: list[ToolReport]) -> dict[str, Any]:
    counts = {SUCCESS: 0, ANTICIPATED: 0, UNEXPECTED: 0}
    for r in reports:
        for k, v in r.counts().items():
            counts[k] += v
    return {
        "domain": spec.name,
        "tools": len(reports),
        "admitted": sum(r.admitted for r in reports),
        "rejected": [r.tool for r in reports if not r.admitted],
        "counts": counts,
        "reports": [r.to_json() for r in reports],
    }
