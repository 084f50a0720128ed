"""``scaleenv audit``: every task-validity check on every task of a universe, counted per defect class.

Checks per task (each failure is one defect of the named class):

    gate_<name>              a reward-integrity gate failed (gold below 1, or noop, random, the
                             write-everything hack, read-dump, spray, parrot or a distractor swap above 0)
    unstated_argument        a write sets an optional literal argument the user's goals never state
    exempt_input             a write stores a value the user gives in a column the reward ignores
    invalid_value            a value the task puts in the world or asks for is not valid for its column
                             (a `` (new)`` suffix, an e-mail or phone number that is not one)
    noop_subgoal             a write goal changes no matched cell
    unobservable_subgoal     a write goal's change does not show in the final state
    lookalike_not_distractor a base-world record sharing a target's name is not counted as a distractor
    indiscriminate_answer    a look-alike's value for an answer fact states the answer too
    missing_tool             the task's tools lack a finder or corrector it needs (see expand.needed_tools)
    no_self_finder           the user speaks for itself, the domain can find its record by a name, e-mail
                             or phone, but the task's tools or the user's profile lack it (tasks.identity)
    contradictory_requests   a refused request would change a cell an allowed goal changes, from the same
                             state: two moves for one record ("resume it ... cancel it")
    wasted_request           a goal changes a record that a later goal of the same request ends (pay
                             towards a booking, then cancel it)
    order_dependent          a record the request creates also meets its selection ("every normal ticket
                             of mine" and a new normal ticket): the outcome would depend on write order
    zero_answers             (universe) more than 5% of the answer tasks have a zero or empty answer

Further checks plug in through :data:`TASK_HOOKS` (``(task, context) -> [(class, detail)]``),
:data:`TEXT_HOOKS` (``text -> [detail]``, run on every goal sentence) and :data:`UNIVERSE_HOOKS`
(``universe -> [(class, task id, detail)]``); known providers are picked up when importable.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.formats.task import Task
from scaleenv.universe import Universe

if TYPE_CHECKING:
    from scaleenv.env.episode import Episode
    from scaleenv.synth.tasks.context import DomainContext

ZERO_ANSWER_SHARE = 0.05
"""The largest share of answer tasks that may have a zero or empty answer."""

EXAMPLES = 5
"""Examples kept per defect class."""

TaskHook = Callable[[Task, "DomainContext"], list[tuple[str, str]]]
TextHook = Callable[[str], list[str]]
UniverseHook = Callable[[Universe], list[tuple[str, str, str]]]

TASK_HOOKS: list[TaskHook] = []
TEXT_HOOKS: list[TextHook] = []
UNIVERSE_HOOKS: list[UniverseHook] = []

_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
_PHONE = re.compile(r"^\+?[\d][\d .()/-]{5,}\d$")
_SUFFIX = re.compile(r" \(new\)$|\.new@")


def _optional_hooks() -> None:
    """Register the checks other modules provide, where they exist (the registry stays open)."""
    for mod, fn in (("scaleenv.synth.tasks.language", "language_defects"),
                    ("scaleenv.synth.tasks.instruction", "language_defects"),
                    ("scaleenv.env.users", "language_defects")):
        try:
            hook = getattr(importlib.import_module(mod), fn)
        except (ImportError, AttributeError):
            continue
        if hook not in TEXT_HOOKS:
            TEXT_HOOKS.append(hook)
        break
    shared = importlib.import_module("scaleenv.synth.contacts").shared_contacts  # look-alikes' own phones
    if shared not in TASK_HOOKS:
        TASK_HOOKS.append(shared)
    try:
        invariants = importlib.import_module("scaleenv.env.invariant_audit").audit_invariants
    except (ImportError, AttributeError):
        return

    def _invariants(universe: Universe) -> list[tuple[str, str, str]]:
        rep = invariants(universe)
        out = []
        for d in rep.get("per_domain", []):
            for ex in d.get("examples", []):
                out.append(("invariant", str(ex.get("world", d["domain"])), f"{ex.get('invariant')}: {ex.get('detail')}"))
            out += [("invariant", d["domain"], "more violations")] * max(0, d.get("violations", 0) - len(d.get("examples", [])))
        return out

    if not any(getattr(h, "__name__", "") == "_invariants" for h in UNIVERSE_HOOKS):
        UNIVERSE_HOOKS.append(_invariants)


@dataclass
class AuditResult:
    tasks: int = 0
    answer_tasks: int = 0
    zero_answer_tasks: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[dict[str, str]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, cls: str, task: str, detail: str) -> None:
        self.counts[cls] += 1
        if len(self.examples[cls]) < EXAMPLES:
            self.examples[cls].append({"task": task, "detail": detail})

    @property
    def defects(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "answer_tasks": self.answer_tasks, "zero_answer_tasks": self.zero_answer_tasks,
                "defects": self.defects, "counts": dict(sorted(self.counts.items())),
                "examples": {k: v for k, v in sorted(self.examples.items())}}


def value_defect(column: str, value: object) -> str | None:
    """Why ``value`` is not a valid value of a column named ``column`` (None when it is)."""
    if not isinstance(value, str):
        return None
    if _SUFFIX.search(value):
        return f"{column}={value!r} carries a uniqueness suffix"
    name = column.lower()
    if "email" in name and value and not _EMAIL.match(value):
        return f"{column}={value!r} is not an e-mail address"
    if re.search(r"(^|_)(phone|mobile|tel)($|_)", name) and value and not _PHONE.match(value):
        return f"{column}={value!r} is not a phone number"
    return None


class _DomainAudit:
    """Per-domain state: the spec, base world and generation context."""

    def __init__(self, universe: Universe, name: str):
        from scaleenv.synth.graph.build import ToolGraph
        from scaleenv.synth.tasks.context import DomainContext
        from scaleenv.universe import read_json
        from scaleenv.world.world import World

        self.spec = universe.spec(name)
        self.base = universe.base(name)
        graph_path = universe.domain_dir(name) / "graph.json"
        graph = ToolGraph.from_json(read_json(graph_path)) if graph_path.exists() else None
        self.ctx = DomainContext(self.spec, self.base, graph)  # type: ignore[arg-type]
        self.base_world = World.from_snapshot(self.spec, self.base)


def _literal(v: object) -> bool:
    return not (isinstance(v, dict) and "$ref" in v)


def audit_task(task: Task, dom: _DomainAudit, ep: Episode, seed: int, res: AuditResult) -> None:
    """Run every per-task check of the module docstring on ``task`` (its episode is ``ep``)."""
    from scaleenv.synth.tasks.expand import needed_tools
    from scaleenv.synth.tasks.gates import run_gates
    from scaleenv.synth.tasks.validity import (
        exempt_columns,
        goal_effects,
        is_empty_answer,
        lookalike_column,
        lookalikes,
        same_answer,
        unobservable_goals,
    )
    from scaleenv.tools.chain import ChainError, resolve_args
    from scaleenv.world.world import World

    spec, ctx, tid = dom.spec, dom.ctx, task.id
    gates = run_gates(ep, task, seed, detail=True)
    for failure in gates.failures():
        res.add("gate_" + failure.removesuffix("_not_0").removesuffix("_not_1"), tid, f"scores {gates.to_json()}")
    said = " ".join(task.user_profile.goals)
    # literal arguments of the write goals
    for call in task.gold_chain:
        tool = spec.tool(call.tool)
        if tool is None or tool.kind != "write" or call.purpose != "goal":
            continue
        keys = ctx.key_params(tool)
        for k, v in call.args.items():
            p = tool.param(k)
            if p is None or k in keys or not _literal(v):
                continue
            if not p.required and str(v) not in said:
                res.add("unstated_argument", tid, f"{tool.name}.{k}={v!r}")
            if p.column:
                t, _, c = p.column.partition(".")
                if c in exempt_columns(spec, t) and c != "id":
                    res.add("exempt_input", tid, f"{tool.name}.{k} is stored in exempt {t}.{c}")
                why = value_defect(c, v)
                if why:
                    res.add("invalid_value", tid, f"{tool.name}: {why}")
    for t, rows in task.initial_patch.items():
        for r in rows:
            for c, v in r.items():
                why = value_defect(c, v)
                if why:
                    res.add("invalid_value", tid, f"{t}[{r.get('id')}]: {why}")
    # effects of the write goals
    initial = World.from_snapshot(spec, dom.base)
    from scaleenv.world.patch import apply_patch

    apply_patch(initial, task.initial_patch)
    init_snap = initial.snapshot()
    try:
        effects, final = goal_effects(spec, init_snap, task.gold_chain)
        for goal, why in unobservable_goals(spec, init_snap, effects, final):
            res.add(why, tid, goal)
    except ChainError as e:
        res.add("gate_gold", tid, f"chain does not replay: {e}")
    # look-alikes of the cloned targets
    patched = {t: {r["id"] for r in rows} for t, rows in task.initial_patch.items()}
    distractors = {t: set(ids) for t, ids in task.verification.distractors.items()}
    outputs: list[Any] = []
    from scaleenv.tools.runtime import run_tool

    world = World.from_snapshot(spec, init_snap)
    passed: list[tuple[str, Any]] = []
    for i, call in enumerate(task.gold_chain):
        tool = spec.tool(call.tool)
        try:
            args = resolve_args(call, outputs, i)
            outputs.append(run_tool(world, tool, args) if tool else None)
        except Exception:  # noqa: BLE001 - reported by the gold gate
            break
        if tool is not None:
            passed += [(tbl, args.get(p)) for p, tbl in ctx.key_params(tool).items() if args.get(p) is not None]
    from scaleenv.synth.tasks.validity import created_in_selection

    for created in created_in_selection(task.verification.program, initial, world):
        res.add("order_dependent", tid, f"the request creates {created}, which its selection also covers")
    seen = set()
    for tbl, key in passed:
        if (tbl, key) in seen or key not in patched.get(tbl, ()) or key in distractors.get(tbl, ()):
            continue
        seen.add((tbl, key))
        row = initial.row(tbl, key)
        if row is None:
            continue
        # another target of the chain is no look-alike to count (a long task checks out two stays of one day)
        targets = {k for t, k in passed if t == tbl}
        missing = [o for o in lookalikes(initial, ctx, tbl, row) if o not in distractors.get(tbl, ()) and o not in targets]
        if missing:
            col = lookalike_column(ctx, tbl)
            shared = row.get(col) if col is not None else None
            res.add("lookalike_not_distractor", tid, f"{tbl}[{key}] shares {col}={shared!r} with {missing[:3]}")
    # answers
    if task.answer_facts:
        res.answer_tasks += 1
        if any(is_empty_answer(f.value) for f in task.answer_facts):
            res.zero_answer_tasks += 1
        for f in task.answer_facts:
            clash = [r for r in f.rivals if same_answer(f.value, r)]
            if clash:
                res.add("indiscriminate_answer", tid, f"{f.name}={f.value!r} also stated by a look-alike's {clash[0]!r}")
    # tools the job needs
    have = set(task.tools)
    for name in needed_tools(ctx, task.gold_chain):
        if name in have:
            continue
        tool = spec.tool(name)
        if tool is not None and _exercisable(spec, init_snap, tool, ctx):
            res.add("missing_tool", tid, name)
    # the user's own record: findable by what the user knows; requests that do not contradict
    from scaleenv.synth.tasks.identity import finder_defect
    from scaleenv.synth.tasks.validity import contradicting_requests, wasted_requests

    no_finder = finder_defect(spec, task)
    if no_finder:
        res.add("no_self_finder", tid, no_finder)
    try:
        for contra in contradicting_requests(spec, init_snap, task.gold_chain, task.forbidden):
            res.add("contradictory_requests", tid, contra)
        for waste in wasted_requests(spec, init_snap, task.gold_chain, task.ordered):
            res.add("wasted_request", tid, waste)
    except ChainError:
        pass  # reported by the gold gate
    for task_hook in TASK_HOOKS:
        for cls, detail in task_hook(task, ctx):
            res.add(cls, tid, detail)
    for text_hook in TEXT_HOOKS:
        for text in [task.instruction, *task.user_profile.goals]:
            for said_wrong in text_hook(text):
                res.add("language", tid, str(said_wrong))
    initial.close()
    world.close()


def _exercisable(spec: DomainSpec, snap: bytes, tool: ToolSpec, ctx: DomainContext) -> bool:
    """Whether ``tool`` runs successfully on the task's initial state (known-good or sampled arguments)."""
    import random

    from scaleenv.tools.runtime import execute_tool
    from scaleenv.tools.sampling import ArgSampler
    from scaleenv.world.world import World

    world = World.from_snapshot(spec, snap)
    try:
        for args in (ctx.positive_args.get(tool.name), ArgSampler(world, random.Random(tool.name)).satisfying_args(
                tool, attempts=2)):
            if args is not None and execute_tool(world, tool, args).ok:
                return True
            world.restore(snap)
        return False
    finally:
        world.close()


def audit_universe(path: str | Path, *, seed: int | None = None) -> AuditResult:
    """Every check of the module docstring on every task of the universe at ``path``."""
    from scaleenv.env.cache import TaskWorldCache
    from scaleenv.errors import UniverseError

    _optional_hooks()
    u = Universe(path)
    seed = u.manifest.get("build", {}).get("seed", 0) if seed is None else seed
    loader = TaskWorldCache(u)
    res = AuditResult()
    for d in u.domains:
        dom = _DomainAudit(u, d)
        tests = u.tests(d)
        dom.ctx.positive_args = {r["tool"]: r.get("positive_args") for r in tests.get("reports", []) if r.get("admitted")}
        for task in u.tasks(d):
            res.tasks += 1
            try:
                ep = loader.episode(task)
            except UniverseError as e:
                res.add("load", task.id, str(e))
                continue
            try:
                audit_task(task, dom, ep, seed, res)
            finally:
                ep.close()
        dom.base_world.close()
    if res.answer_tasks and res.zero_answer_tasks > ZERO_ANSWER_SHARE * res.answer_tasks:
        res.add("zero_answers", "*", f"{res.zero_answer_tasks} of {res.answer_tasks} answer tasks have a zero or "
                                     f"empty answer (at most {ZERO_ANSWER_SHARE:.0%})")
    for hook in UNIVERSE_HOOKS:
        for cls, where, detail in hook(u):
            res.add(cls, where, detail)
    return res
