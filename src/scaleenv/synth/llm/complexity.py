"""The expansion gate's complexity c(H) on the graph of *core* dependencies.

The computed dependency graph links every tool that returns a row holding an id (a foreign key
column included) to every tool taking that id, and every writer to every tool sharing its table:
hundreds of edges over a few dozen tools, so c = (|V| + 0.5 |E|) / 50 passed 1.0 ("saturated")
before a task grew at all. Even counting each ordered pair once and only id matches of a tool's own
table, the lookups and getters (each read returning a reservation "feeds" every tool that takes a
reservation id) made 20 tools of a relay-built rental domain score c = 1.86 (146 edges), and the
gate never let a task grow past its first chain. A dependency here is structural: B depends on A
when

* B takes (required) the id of a record A *creates* (or deletes) in that table: a read only
  passes an id along, and which read finds it does not change what a chain can do;
* A writes a column B's preconditions read, or inserts or deletes rows of a table whose non-key
  columns they read (A makes or breaks B's state rule: assigning an item to a reservation is what a
  swap of that item needs); or
* the dependency agent judged it an edge.

On that rental domain the same 20 tools count 51 edges (c = 0.91) and 29 tools 68 (c = 1.26), and
the first chain's neighbourhood K(C1) is a handful of tools, so the gate is asked while much is left.
"""

from __future__ import annotations

from scaleenv.synth.tasks.context import DomainContext


def _created_keys(ctx: DomainContext, name: str) -> set[str]:
    return {f"{t}.{tab.primary_key}" for t in ctx.io[name].inserts if (tab := ctx.spec.table(t))}


def core_pairs(ctx: DomainContext) -> set[tuple[str, str]]:
    """The ordered tool pairs with a core dependency (see the module docstring)."""
    spec = ctx.spec
    created = {t.name: _created_keys(ctx, t.name) for t in spec.tools}
    required: dict[str, set[str]] = {}
    for t in spec.tools:
        required[t.name] = {kd for p, kd in ctx.io[t.name].inputs.items()
                            if (param := t.param(p)) is not None and param.required}
    out: set[tuple[str, str]] = set()
    for a, b, d in ctx.graph.edges():
        if a != b and d.get("source") == "llm":
            out.add((a, b))
    state_reads = {t.name: {tab for tab, col in ctx.io[t.name].pre_reads
                            if (table := spec.table(tab)) is not None and col != table.primary_key}
                   for t in spec.tools}
    names = [t.name for t in spec.tools]
    for a in names:
        for b in names:
            if a == b or (a, b) in out:
                continue
            io_a = ctx.io[a]
            if required[b] & created[a] or io_a.writes & ctx.io[b].pre_reads or io_a.inserts & state_reads[b]:
                out.add((a, b))
    return out


def core_complexity(ctx: DomainContext, included: list[str], pairs: set[tuple[str, str]] | None = None) -> float:
    """c(H) = (|V| + 0.5 |E|) / 50 over the core pairs among ``included``."""
    nodes = set(included)
    pairs = core_pairs(ctx) if pairs is None else pairs
    edges = sum(1 for a, b in pairs if a in nodes and b in nodes)
    return (len(nodes) + 0.5 * edges) / 50
