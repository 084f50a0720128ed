"""Controlled environment expansion (ScaleEnv §4.2.2), with a deterministic stopping rule.

Breadth-first over the dependency graph from the chain's tools: a tool joins only when tools
already included can supply its id inputs, and only after it has been executed successfully on
the task's initial state (patching the state with the rows it needs when it fails). Random
auxiliary chains (a lookup plus a tool it feeds) are added when the frontier runs dry. Stop once
there are at least ``min_tools`` exercisable tools (or all of them) and the complexity
c = (|V| + 0.5 |E|) / 50 of the included subgraph reaches 1.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from scaleenv.formats.task import Call
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.state import fresh_unique, mend_rows, next_id
from scaleenv.tools.runtime import execute_tool
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World


def complexity(ctx: DomainContext, included: list[str]) -> float:
    """c = (|V| + 0.5 |E|) / 50 over the subgraph induced by ``included``."""
    nodes = set(included)
    counts = ctx.edge_counts
    edges = sum(n for (a, b), n in counts.items() if a in nodes and b in nodes)
    return (len(nodes) + 0.5 * edges) / 50


def _suppliable(ctx: DomainContext, tool: str, supplied: set[str]) -> bool:
    spec_tool = ctx.spec.tool(tool)
    assert spec_tool is not None
    for p, kd in ctx.io[tool].inputs.items():
        param = spec_tool.param(p)
        if param is not None and param.required and kd not in supplied:
            return False
    return True


class _Exerciser:
    def __init__(self, ctx: DomainContext, initial: bytes, rng: random.Random):
        self.ctx = ctx
        self.world = World.from_snapshot(ctx.spec, initial)
        self.initial = initial
        self.rng = rng
        self.patch: dict[str, list[dict[str, Any]]] = {}
        self.taken: set[Any] = set()
        self.sampler = ArgSampler(self.world, rng)

    def _runs(self, tool: Any, args: dict[str, Any] | None) -> bool:
        if args is None:
            return False
        ok = execute_tool(self.world, tool, args).ok
        if self.world.touched():
            self.world.restore(self.initial)
        return ok

    def try_tool(self, name: str) -> bool:
        """Execute the tool on the task's initial state (known-good arguments first, then a search)."""
        tool = self.ctx.spec.tool(name)
        assert tool is not None
        if self._runs(tool, self.ctx.positive_args.get(name)):
            return True
        if self._runs(tool, self.sampler.satisfying_args(tool, attempts=2)):
            return True
        return self.patch_for(tool)

    def patch_for(self, tool: Any) -> bool:
        """Add a clone of a row of the tool's focus table and retry (the LLM back end writes such patches)."""
        focus = self.ctx.focus(tool)
        if focus is None:
            return False
        table = self.ctx.spec.table(focus[1])
        assert table is not None
        n = self.world.count(table.name)
        if n == 0:
            return False
        for _ in range(3):
            row = self.world.conn.execute(f'SELECT * FROM "{table.name}" LIMIT 1 OFFSET ?',
                                          (self.rng.randrange(n),))
            names = [d[0] for d in row.description]
            base = dict(zip(names, row.fetchone(), strict=True))
            clone = fresh_unique(table, {**base, "id": next_id(self.world, table.name)}, self.rng, self.taken)
            for c in table.columns:
                if c.enum and c.name in ("status", "state"):
                    clone[c.name] = c.enum[self.rng.randrange(len(c.enum))]
            mend_rows(self.world, table.name, [clone], self.rng)
            trial = World.from_snapshot(self.ctx.spec, self.initial)
            try:
                apply_patch(trial, {table.name: [clone]})
            except Exception:  # noqa: BLE001 - a clone that breaks a constraint is simply not used
                continue
            args = ArgSampler(trial, self.rng).satisfying_args(tool, attempts=2)
            snap = trial.snapshot()
            if args is not None and execute_tool(trial, tool, args).ok:
                self.initial = snap
                self.world.restore(snap)
                self.sampler.invalidate()
                self.patch.setdefault(table.name, []).append(clone)
                return True
        return False


FINDERS = ("search", "list", "get")
CORRECTORS = ("update", "delete", "transition")
CORRECTORS_PER_WRITE = 4


def needed_tools(ctx: DomainContext, chain: list[Call]) -> list[str]:
    """Tools a careful agent needs besides the chain's: a way to find every entity the chain refers
    to (search, list and get tools of its table), and the edit, cancel or delete tools of each
    entity a write of the chain changes (to correct a wrong write)."""
    spec = ctx.spec
    in_chain = {c.tool for c in chain}
    tables: list[str] = []
    writes: list[str] = []
    for c in chain:
        tool = spec.tool(c.tool)
        if tool is None:
            continue
        tables += list(ctx.key_params(tool).values())
        entity = tool.meta.get("entity")
        if tool.kind == "write" and entity:
            tables.append(entity)
            writes.append(entity)
    out: list[str] = []
    for t in dict.fromkeys(tables):
        out += [x.name for x in spec.tools if x.meta.get("entity") == t and x.meta.get("family") in FINDERS]
    for entity in dict.fromkeys(writes):
        fixes = [x.name for x in spec.tools if x.meta.get("entity") == entity and x.kind == "write"
                 and x.meta.get("family") in CORRECTORS and x.name not in in_chain]
        out += fixes[:CORRECTORS_PER_WRITE]
    return [n for n in dict.fromkeys(out) if n not in in_chain]


def expand_tools(ctx: DomainContext, initial: bytes, chain: list[Call], rng: random.Random,
                 min_tools: int = 20, required: tuple[str, ...] = ()) -> tuple[list[str], dict[str, list[dict[str, Any]]]]:
    """The task's exercisable tool set (chain tools first) and any rows patched in for them; the
    ``required`` tools (the finder of the user's own record) join at the end where expansion left
    them out and they run."""
    all_tools = [t.name for t in ctx.spec.tools]
    target = min(min_tools, len(all_tools))
    included = list(dict.fromkeys(c.tool for c in chain))
    supplied: set[str] = set()
    for t in included:
        supplied |= ctx.io[t].outputs
    ex = _Exerciser(ctx, initial, rng)
    failed: set[str] = set()
    queue = deque(sorted({s for t in included for s in ctx.graph.successors(t)} - set(included)))

    def include(name: str) -> None:
        included.append(name)
        supplied.update(ctx.io[name].outputs)
        for s in ctx.graph.successors(name):
            if s not in included and s not in queue:
                queue.append(s)

    def done() -> bool:
        remaining = len(all_tools) - len(included) - len(failed)
        return remaining <= 0 or (len(included) >= target and complexity(ctx, included) >= 1.0)

    for name in needed_tools(ctx, chain):
        if name not in included and name not in failed:
            if ex.try_tool(name):
                include(name)
            else:
                failed.add(name)
    deferred = 0
    while not done():
        if queue and deferred <= len(queue):
            name = queue.popleft()
            if name in included or name in failed:
                continue
            if not _suppliable(ctx, name, supplied):
                queue.append(name)
                deferred += 1
                continue
            deferred = 0
            if ex.try_tool(name):
                include(name)
            else:
                failed.add(name)
            continue
        # frontier dry: a random auxiliary chain (a supplier plus a tool it feeds)
        rest = [t for t in all_tools if t not in included and t not in failed]
        if not rest:
            break
        rng.shuffle(rest)
        added = False
        for name in rest:
            if _suppliable(ctx, name, supplied):
                if ex.try_tool(name):
                    include(name)
                    added = True
                else:
                    failed.add(name)
                break
            need = {kd for kd in ctx.io[name].inputs.values()} - supplied
            supplier = next((s for s in rest if s != name and need <= ctx.io[s].outputs
                             and _suppliable(ctx, s, supplied)), None)
            if supplier is not None and ex.try_tool(supplier):
                include(supplier)
                added = True
                break
        if not added:
            failed.update(rest[:1])
        deferred = 0
    for name in required:
        if name not in included and ex.try_tool(name):
            include(name)
    return included, ex.patch
