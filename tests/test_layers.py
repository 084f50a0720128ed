"""The package is layered by stage: a module imports only its own layer and the layers below it,
and no two modules import each other, directly or around a cycle (function-level imports count)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1] / "src" / "scaleenv"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("scaleenv", "scaleenv.errors", "scaleenv.utils", "scaleenv.progress", "scaleenv.parallel",
              "scaleenv.llm")),
    ("formats", ("scaleenv.formats", "scaleenv.schemas")),
    ("engine", ("scaleenv.world", "scaleenv.tools", "scaleenv.reward", "scaleenv.validation", "scaleenv.universe")),
    ("env", ("scaleenv.env",)),
    ("synth", ("scaleenv.synth",)),
    ("run", ("scaleenv.run",)),
    ("integrations", ("scaleenv.integrations",)),
    ("app", ("scaleenv.cli", "scaleenv.report", "scaleenv.bench")),
]
"""Lowest first. A module belongs to the layer of its longest matching prefix."""


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def import_graph() -> nx.DiGraph:
    mods = modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(mods)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [module, *(f"{module}.{a.name}" for a in node.names)]
            graph.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return graph


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    if best is None:
        pytest.fail(f"{module} belongs to no layer; add it to LAYERS in {__file__}")
    return best[0]


def test_every_module_has_a_layer_and_imports_only_downwards():
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
              for a, b in import_graph().edges if layer_of(b) > layer_of(a)]
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_no_import_cycles():
    cycles = [" -> ".join(c) for c in nx.simple_cycles(import_graph())]
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


def test_the_graph_sees_lazy_imports():
    graph = import_graph()
    # synth.build imports its back ends inside a function: the edge must still be seen
    assert graph.has_edge("scaleenv.synth.build", "scaleenv.synth.backend")
    assert graph.has_edge("scaleenv.env.core", "scaleenv.env.users")
