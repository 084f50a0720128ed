"""The expansion gate's complexity c(H) on the graph of *core* dependencies.

The computed dependency graph links every tool that returns a row holding an id (a foreign key
column included) to every tool taking that id, and every writer to every tool sharing its table:
hundreds of edges over a few dozen tools, so c = (|V| + 0.5 |E|) / 50 passed 1.0 ("saturated")
before a task grew at all. Here an ordered pair counts once, and only when

* B takes (required) the id of the record A returns or creates (A's own table, not a foreign key
  column of its row);
* A writes a column B's preconditions read (a state precondition, not a mere shared table); or
* the dependency agent judged it an edge.
"""

from __future__ import annotations

from scaleenv.synth.tasks.context import DomainContext


def _own_keys(ctx: DomainContext, name: str) -> set[str]:
    tool = ctx.spec.tool(name)
    if tool is None:
        return set()
    keys = {f"{t}.{tab.primary_key}" for t in ctx.io[name].inserts if (tab := ctx.spec.table(t))}
    table = ctx.spec.table(tool.returns.table or "") if tool.returns.mode in ("one", "many") else None
    if table is not None:
        keys.add(f"{table.name}.{table.primary_key}")
    return keys


def core_pairs(ctx: DomainContext) -> set[tuple[str, str]]:
    """The ordered tool pairs with a core dependency (see the module docstring)."""
    spec = ctx.spec
    own = {t.name: _own_keys(ctx, t.name) for t in spec.tools}
    out: set[tuple[str, str]] = set()
    for a, b, d in ctx.graph.edges():
        if a == b or (a, b) in out:
            continue
        if d.get("source") == "llm":
            out.add((a, b))
            continue
        if d.get("kind") == "data_flow":
            tool = spec.tool(b)
            required = {kd for p, kd in ctx.io[b].inputs.items()
                        if tool is not None and (param := tool.param(p)) is not None and param.required}
            if required & own.get(a, set()):
                out.add((a, b))
        elif d.get("kind") == "precondition" and ctx.io[a].writes & ctx.io[b].pre_reads:
            out.add((a, b))
    return out


def core_complexity(ctx: DomainContext, included: list[str], pairs: set[tuple[str, str]] | None = None) -> float:
    """c(H) = (|V| + 0.5 |E|) / 50 over the core pairs among ``included``."""
    nodes = set(included)
    pairs = core_pairs(ctx) if pairs is None else pairs
    edges = sum(1 for a, b in pairs if a in nodes and b in nodes)
    return (len(nodes) + 0.5 * edges) / 50
