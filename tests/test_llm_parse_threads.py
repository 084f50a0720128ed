"""Python parsed while other threads run: the chain code of task attempts (which run ahead in threads)
and tool code. On CPython 3.11 before 3.11.8 a garbage collection that starts while ``ast.parse`` builds
its tree can hand the GIL to a thread that parses too, and the first parse then fails with
``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905): a build under load
crashed now and then (the warm-cache rerun of test_llm_build). Every parse the build makes goes through
:func:`scaleenv.utils.pyast.parse_python`, during which the collector does not start."""

from __future__ import annotations

import ast
import gc
import sys
from collections.abc import Callable, Iterator

import pytest

from scaleenv.synth.llm.chaincode import parse_chain
from scaleenv.tools.pyimpl import private_names
from scaleenv.tools.sandbox import vet_python
from scaleenv.utils.pyast import parse_python

CHAIN = "\n".join(f's{i} = get_pet(pet_id=s{i - 1}["id"], note=[1, 2, {{"k": (3, 4)}}])' for i in range(1, 12))
CHAIN = 's0 = find_owner_by_email(email="nora.quinn@example.com")\n' + CHAIN
TOOL = ("def run(db, args):\n" + "".join(f"    x{i} = db.query_one('SELECT {i}', {{'a': [args['p'], ({i}, 2)]}})\n"
                                          for i in range(12)) + "    return x0\n")


@pytest.fixture
def collections_in_parse() -> Iterator[list[str]]:
    """The collections that start inside ``ast.parse`` while the test runs (every allocation of a
    tracked object starts one, so a parse that lets the collector run is sure to be seen)."""
    seen: list[str] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and sys._getframe(1).f_code is ast.parse.__code__:
            seen.append(phase)

    threshold = gc.get_threshold()
    gc.callbacks.append(watch)
    gc.set_threshold(1)
    try:
        yield seen
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(watch)


@pytest.mark.parametrize("parse", [lambda: [c.tool for c in parse_chain(CHAIN)], lambda: private_names(TOOL),
                                   lambda: vet_python(TOOL)], ids=["chain", "tool_private_names", "vet_python"])
def test_no_collection_starts_while_a_tree_is_built(collections_in_parse: list[str],
                                                    parse: Callable[[], object]) -> None:
    got = parse()
    assert collections_in_parse == []
    assert got in (["find_owner_by_email"] + ["get_pet"] * 11, [])  # and the parse itself is unchanged


def test_the_collector_is_left_as_it_was() -> None:
    assert gc.isenabled()
    assert isinstance(parse_python("x = 1"), ast.Module) and gc.isenabled()
    with pytest.raises(SyntaxError):
        parse_python("x = (")
    assert gc.isenabled()
    gc.disable()
    try:
        parse_python("x = 1")
        assert not gc.isenabled()  # a program that turned it off keeps it off
    finally:
        gc.enable()
