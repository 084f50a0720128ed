"""Task-validity rules shared by the generator and ``scaleenv audit``: which answers carry
substance, which write goals change something that shows, which columns the reward ignores."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.formats.task import Call
from scaleenv.reward.facts import value_stated
from scaleenv.reward.state import same_value
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.instruction import human
from scaleenv.tools.chain import ChainError, resolve_args
from scaleenv.tools.runtime import run_tool
from scaleenv.world.ddl import CHANGES_TABLE
from scaleenv.world.world import World

ZERO_ANSWERS: tuple[Any, ...] = (0, 0.0, "")
"""Answers a guess finds without reading anything (``[]`` and ``{}`` are empty too)."""

Cell = tuple[str, Any, str]
"""(table, primary key, column); column ``*`` stands for the row's existence."""


def exempt_columns(spec: DomainSpec, table: str) -> set[str]:
    """Columns of ``table`` the reward does not compare (its primary key and ``exempt`` columns)."""
    t = spec.table(table)
    if t is None:
        return set()
    return {c.name for c in t.columns if c.match == "exempt"} | {t.primary_key}


def is_empty_answer(value: Any) -> bool:
    """A zero, empty or missing answer."""
    return value is None or (not isinstance(value, bool) and value in ZERO_ANSWERS) or value in ([], {})


def same_answer(value: Any, other: Any) -> bool:
    """Whether stating ``other`` also states ``value`` (then a look-alike's answer passes for it)."""
    if other is None:
        return False
    return same_value(value, other) or value_stated(value, str(other))


def answer_options(spec: DomainSpec, ctx: DomainContext, tool: ToolSpec, out: Any) -> list[tuple[str, str | None, Any]]:
    """(fact name, output key or None for a scalar, value) a read goal's output can be asked about,
    most natural first (a declared answer field; else status-like and enum columns first)."""
    if tool.returns.mode == "scalar":
        return [(human(tool.name), None, out)]
    if not isinstance(out, dict):
        return []
    answer = tool.meta.get("answer")
    if answer and answer in out:
        return [(answer, answer, out[answer])]
    table = spec.table(tool.returns.table or "")
    if table is None:
        keys = [k for k in sorted(out) if k != "id"]
        return [(k, k, out[k]) for k in keys[:1]]
    display = ctx.display_column(table.name)
    cols = [c for c in table.columns if c.name not in ("id", display) and not c.foreign_key
            and not c.unique and c.match != "exempt" and c.type not in ("json", "boolean")
            and out.get(c.name) is not None and out.get(c.name) != c.default]
    cols.sort(key=lambda c: (c.name not in ("status", "state"), c.enum is None, c.name))
    return [(f"{ctx.singular(table.name)} {c.name}", c.name, out[c.name]) for c in cols]


def fair_rivals(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Answer facts with only the rivals a correct answer cannot help saying removed: a rival the
    fact's own name states (``draft`` of "the draft status is ..."), or another fact's value states."""
    out = []
    for f in facts:
        others = [str(o["value"]) for o in facts if o is not f]
        rivals = [r for r in f.get("rivals", []) if not value_stated(r, f["name"].replace("_", " "))
                  and not value_stated(r, f["name"]) and not any(value_stated(r, o) for o in others)]
        g = {k: v for k, v in f.items() if k != "rivals"}
        if rivals:
            g["rivals"] = rivals
        out.append(g)
    return out


def _mark(world: World) -> int:
    row = world.conn.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {CHANGES_TABLE}").fetchone()
    return int(row[0])


def _keys_since(world: World, mark: int) -> dict[str, set[Any]]:
    out: dict[str, set[Any]] = {}
    for tbl, pk in world.conn.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE} WHERE rowid > ?", (mark,)):
        out.setdefault(tbl, set()).add(pk)
    return out


def cell_changes(spec: DomainSpec, before: World, after: World, keys: dict[str, set[Any]]) -> dict[Cell, Any]:
    """The matched (not exempt) cells that differ between ``before`` and ``after`` among ``keys``,
    with their new values."""
    out: dict[Cell, Any] = {}
    for t, ks in keys.items():
        exempt = exempt_columns(spec, t)
        for k in ks:
            a, b = before.row(t, k), after.row(t, k)
            if (a is None) != (b is None):
                out[(t, k, "*")] = b is not None
            elif a is not None and b is not None:
                for c, v in b.items():
                    if c not in exempt and not same_value(a.get(c), v):
                        out[(t, k, c)] = v
    return out


def call_effect(spec: DomainSpec, world: World, before: bytes, tool: ToolSpec, args: dict[str, Any]) -> dict[Cell, Any]:
    """Run one write on ``world`` (whose state is ``before``) and return the matched cells it changed."""
    mark = _mark(world)
    run_tool(world, tool, args)
    keys = _keys_since(world, mark)
    if not keys:
        return {}
    return cell_changes(spec, World.from_snapshot(spec, before), world, keys)


Effect = tuple[int, str, dict[Cell, Any]]
"""(step, tool, the matched cells it changed) of one write goal."""


def goal_effects(spec: DomainSpec, initial: bytes, chain: list[Call]) -> tuple[list[Effect], bytes]:
    """Replay ``chain`` from ``initial``: the effect of every write goal, and the final state."""
    world = World.from_snapshot(spec, initial)
    outputs: list[Any] = []
    effects = []
    for i, call in enumerate(chain):
        tool = spec.tool(call.tool)
        if tool is None:
            raise ChainError(i, f"unknown tool {call.tool!r}")
        args = resolve_args(call, outputs, i)
        try:
            if tool.kind == "write" and call.purpose == "goal":
                before = world.snapshot()
                mark = _mark(world)
                outputs.append(run_tool(world, tool, args))
                keys = _keys_since(world, mark)
                effects.append((i, tool.name, cell_changes(spec, World.from_snapshot(spec, before), world, keys)))
            else:
                outputs.append(run_tool(world, tool, args))
        except ToolError as e:
            raise ChainError(i, f"{call.tool} failed: {e.code}: {e.message}") from None
    final = world.snapshot()
    world.close()
    return effects, final


def shows(cells: dict[Cell, Any], now: World, init: World) -> bool:
    """Whether some cell of an effect still holds its new value in ``now`` and differs from ``init``."""
    for (t, k, c), v in cells.items():
        row, was = now.row(t, k), init.row(t, k)
        if c == "*":
            ok = (row is not None) == v and (was is not None) != v
        else:
            ok = row is not None and same_value(row.get(c), v) and (was is None or not same_value(was.get(c), v))
        if ok:
            return True
    return False


def unobservable_goals(spec: DomainSpec, initial: bytes, goals: list[Effect], final_snap: bytes
                       ) -> list[tuple[str, str]]:
    """(tool, reason) for each write goal that changes no matched cell (``noop_subgoal``) or whose
    change no longer shows in the final state (``unobservable_subgoal``: undone by a later goal)."""
    if not goals:
        return []
    init = World.from_snapshot(spec, initial)
    final = World.from_snapshot(spec, final_snap)
    bad = []
    for _, name, cells in goals:
        if not cells:
            bad.append((name, "noop_subgoal"))
            continue
        if not shows(cells, final, init):
            bad.append((name, "unobservable_subgoal"))
    init.close()
    final.close()
    return bad


def lookalike_column(ctx: DomainContext, table: str, by: dict[str, Any] | None = None) -> str | None:
    """The column a record is known by: its table's display column, else the first identifying fact."""
    display = ctx.display_column(table)
    if display:
        return display
    return next((k for k in (by or {}) if k != "id"), None)


def lookalikes(world: World, ctx: DomainContext, table: str, row: dict[str, Any],
               by: dict[str, Any] | None = None) -> list[Any]:
    """Ids of the other records of ``table`` that share ``row``'s name (see :func:`lookalike_column`)."""
    col = lookalike_column(ctx, table, by)
    if col is None or row.get(col) is None:
        return []
    pk = world.primary_key(table)
    cur = world.conn.execute(f'SELECT "{pk}" FROM "{table}" WHERE "{col}" = ? AND "{pk}" != ? ORDER BY 1',
                             (row[col], row[pk]))
    return [r[0] for r in cur]


def clashes(a: Cell, b: Cell) -> bool:
    """Two changes to one record that cannot both stand: the same cell, or a record created or deleted."""
    return a[0] == b[0] and str(a[1]) == str(b[1]) and (a[2] == b[2] or "*" in (a[2], b[2]))


ENDING = re.compile(r"^(cancell?ed|withdrawn|closed|deleted|voided|terminated|retired|expired|declined|rejected|"
                     r"discontinued|deactivated|revoked|abandoned)$")
"""The states that end a record: nothing more is done with it after them."""
_STATE_COLUMN = re.compile(r"(^|_)(status|state)$")


def wasted_requests(spec: DomainSpec, initial: bytes, chain: list[Call],
                    ordered: Iterable[tuple[int, int]] = ()) -> list[str]:
    """Goals that a later goal of the same request undoes by ending their record: "pay $288.49
    towards every confirmed booking ... switch each of them to tour TOUR-0017 ... please cancel
    each of them" (the payment and the switch of a booking then cancelled), or a record created and
    then cancelled. No customer asks for that; an earlier change of the record's state (put on hold,
    then cancel) is a procedure, not a waste, and so is settling the record's money where the ending needs
    it first (``ordered``, pairs of chain steps): the wallet paid back to the card, then the profile
    closed. Moving the record so that the ending is allowed (a visit rescheduled, then cancelled, to get
    round the late-cancellation rule) is still a waste."""
    effects, _ = goal_effects(spec, initial, chain)
    needed = set(ordered)
    out: list[str] = []
    for j, (end_step, ender, cells) in enumerate(effects):
        ended = {(t, k) for (t, k, c), v in cells.items()
                 if c == "*" and v is False or _STATE_COLUMN.search(c) and isinstance(v, str) and ENDING.match(v)}
        for step, name, earlier in effects[:j]:
            on_ended = [v for (t, k, _), v in earlier.items() if (t, k) in ended]
            if (step, end_step) in needed and on_ended and all(v == 0 and not isinstance(v, bool) for v in on_ended):
                continue  # a balance settled to 0 before the account closes
            hit = next(((t, k, c) for (t, k, c), v in earlier.items()
                        if (t, k) in ended and (c == "*" and v is True or c != "*" and not _STATE_COLUMN.search(c))),
                       None)
            if hit is not None:
                out.append(f"{name} on {hit[0]}[{hit[1]}].{hit[2]}, then {ender} ends it")
    return out


def contradicting_requests(spec: DomainSpec, initial: bytes, chain: list[Call], forbidden: list[Call]) -> list[str]:
    """Requests of one task that contradict each other (``goal vs refused call on table[key].column``):
    a refused call that, on the task's initial state, would change a cell that a write goal changes
    too: two alternative moves for one record ("accept the offer ... I changed my mind, cancel it").
    A refused call that only applies after the goal (publish once the review passed) is a next step,
    not a contradiction; nor is the same request made on another record (a bulk request that the
    policy screens one record out of)."""
    if not forbidden:
        return []
    effects, _ = goal_effects(spec, initial, chain)
    world = World.from_snapshot(spec, initial)
    outputs: list[Any] = []
    try:
        for i, call in enumerate(chain):
            tool = spec.tool(call.tool)
            outputs.append(run_tool(world, tool, resolve_args(call, outputs, i)) if tool else None)
    except (ToolError, ChainError):
        return []
    finally:
        world.close()
    out: list[str] = []
    for call in forbidden:
        tool = spec.tool(call.tool)
        if tool is None:
            continue
        try:
            args = resolve_args(call, outputs, len(outputs))
        except ChainError:
            continue
        w = World.from_snapshot(spec, initial)
        try:
            refused = call_effect(spec, w, initial, tool, args)
        except ToolError:
            refused = {}
        finally:
            w.close()
        for _, name, cells in effects:
            if name == call.tool:
                continue  # the same request on another record ("every pending session": each refund lands on one balance)
            hit = next((a for a in cells for b in refused if clashes(a, b)), None) or ended_while_edited(refused, cells)
            if hit is not None:
                out.append(f"{name} vs refused {call.tool} on {hit[0]}[{hit[1]}].{hit[2]}")
    return out


def ended_while_edited(refused: dict[Any, Any], edited: dict[Any, Any]) -> tuple[Any, ...] | None:
    """The first cell of ``edited`` (an allowed goal's changes) on a record that ``refused`` (a refused
    call's changes) would end: "cancel booking RSV-0074 ... change the special request of RSV-0074"
    reads as two requests no customer makes together."""
    ends = {(t, k) for (t, k, c), v in refused.items()
            if c == "*" and v is False or _STATE_COLUMN.search(c) and isinstance(v, str) and ENDING.match(v)}
    return next(((t, k, c) for (t, k, c) in edited if (t, k) in ends and c != "*" and not _STATE_COLUMN.search(c)),
                None)


def created_in_selection(program: dict[str, Any] | None, initial: World, final: World) -> list[Any]:
    """Records absent from ``initial`` that a selection's query program (``sql``, ``params``, ``ids``; its table
    after ``FROM``) picks in ``final``, the world after the gold chain: "resolve every normal ticket of
    mine" and "open a ticket" (normal by default) in one request, where written first, the new ticket
    is resolved too, and which records change would depend on the order of the writes."""
    sql = (program or {}).get("sql")
    if not isinstance((program or {}).get("ids"), list):
        return []  # a programmatic task's program computes a value, not the records a goal acts on
    if not isinstance(sql, str) or (found := re.search(r'FROM "(\w+)"', sql)) is None:
        return []
    try:
        after = [r[0] for r in final.conn.execute(sql, (program or {}).get("params") or {})]
    except sqlite3.Error:
        return []
    return [i for i in after if initial.row(found.group(1), i) is None]
