"""``ast.parse`` that several threads may call at once.

CPython 3.11 before 3.11.8 keeps the AST constructor's recursion-depth counter in state that every
thread shares (python/cpython#106905, fixed there by #113035). A cyclic garbage collection that starts
while ``ast.parse`` turns its C tree into Python objects runs finalizers, which can hand the GIL to
another thread; a parse there moves the shared counter, and the first parse fails with
``SystemError: AST constructor recursion depth mismatch``. Build steps parse tool code and chains in
threads (task attempts run ahead), so a build under load crashed now and then. With the collector
paused while the tree is built, nothing inside the construction runs Python code, so no other thread
runs in between; reference counting frees memory as usual meanwhile.
"""

from __future__ import annotations

import ast
import gc
import threading

_lock = threading.Lock()
_active = 0  # parses in progress (any thread): the collector resumes when the last one ends
_resume = False  # whether the collector was enabled when the first of them began


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` with the cyclic collector paused (see the module docstring);
    raises SyntaxError like it."""
    global _active, _resume
    with _lock:
        if _active == 0:
            _resume = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        return ast.parse(source, filename)
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _resume:
                gc.enable()
