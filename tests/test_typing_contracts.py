"""Type contracts that must not regress: the share of annotations that are a bare ``Any`` (parameters,
returns, variables and fields; ``dict[str, Any]`` is not bare), over the package and over the modules
outside the folders still being retyped."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "scaleenv"

MAX_SHARE = 0.02
"""Bare ``Any`` may be at most 2% of the package's annotations."""
MAX_SHARE_TYPED = 0.005
"""...and at most 0.5% outside ``env/``, ``reward/`` and ``synth/tasks/``."""
LOOSER = ("env/", "reward/", "synth/tasks/")


def _is_bare_any(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Constant) and node.value == "Any")


def annotations(tree: ast.AST) -> list[ast.expr]:
    """Every annotation of a module: function parameters (``*args``/``**kwargs`` too), returns and
    annotated assignments (variables, dataclass and model fields)."""
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p is not None)]
            out += [p.annotation for p in params if p.annotation is not None]
            if node.returns is not None:
                out.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            out.append(node.annotation)
    return out


def counts(source: str) -> tuple[int, int]:
    """``(annotations, bare Any ones)`` of one module's source."""
    anns = annotations(ast.parse(source))
    return len(anns), sum(_is_bare_any(a) for a in anns)


def package_counts() -> dict[str, tuple[int, int]]:
    return {p.relative_to(ROOT).as_posix(): counts(p.read_text(encoding="utf-8")) for p in sorted(ROOT.rglob("*.py"))}


def _share(per: dict[str, tuple[int, int]]) -> tuple[float, list[str]]:
    total = sum(n for n, _ in per.values())
    bare = sum(b for _, b in per.values())
    worst = [f"{m}: {b}" for m, (_, b) in sorted(per.items(), key=lambda kv: -kv[1][1]) if b][:10]
    return bare / max(total, 1), worst


def test_the_counter_counts_every_kind_of_annotation() -> None:
    src = ("from typing import Any\n"
           "def f(a: Any, b: int, *c: Any, d: 'Any', **e: dict[str, Any]) -> Any: ...\n"
           "x: Any = 1\n"
           "class C:\n    y: list[Any]\n    z: str\n")
    assert counts(src) == (9, 5)


def test_bare_any_stays_under_two_percent_of_the_package() -> None:
    share, worst = _share(package_counts())
    assert share < MAX_SHARE, f"bare Any is {share:.1%} of annotations (at most {MAX_SHARE:.0%}); most in {worst}"


def test_bare_any_stays_rare_outside_the_folders_being_retyped() -> None:
    per = {m: c for m, c in package_counts().items() if not m.startswith(LOOSER)}
    share, worst = _share(per)
    assert share < MAX_SHARE_TYPED, (f"bare Any is {share:.2%} of annotations outside {', '.join(LOOSER)} "
                                     f"(at most {MAX_SHARE_TYPED:.1%}); most in {worst}")
