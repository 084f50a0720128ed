"""The ``screened`` family: a bulk request ("cancel every pending appointment of mine") in which the
domain's policy forbids the change on one of the records the condition covers (that appointment is
less than 14 days away), or on two at the expert tier. The right outcome: the change made on every
other record, not on those, and the user told why.

It combines a computed choice with a policy decision: the agent must list the records, check each
against a rule that only the policy states (the tool would let the change through), act on the
allowed ones and decline the rest. The screened record is built as a further target whose columns
that the rule reads come from a record of the world that breaks the rule (for a rule over a linked
record, "no cancelling within 30 days of the flight", the link: the screened reservation is on a
donor's flight, so the agent must look up each record's flight to tell); the query program that
defines the write set is the condition with the rule's predicate negated, run on the initial world.
The write on the screened record is the task's ``forbidden`` call (the policy-ignorant gate makes it
and must score 0) and the rule's reason an answer fact, as in the ``refusal`` family.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import PolicyRule, Table, ToolSpec
from scaleenv.formats.sqlinfo import analyze_sql, sql_params
from scaleenv.formats.task import REFUSAL_FACT, Call, Task
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.bulk import BulkBuilder
from scaleenv.synth.tasks.families.refusal import with_pushback
from scaleenv.synth.tasks.families.selection import Selection, structural
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.state import _BIRTH, insert_row
from scaleenv.synth.tasks.validity import call_effect
from scaleenv.tools.policy import broken_rules
from scaleenv.tools.runtime import bind_params, first_failing_precondition
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.world import World

COUNTS = {"easy": (3, 3), "medium": (3, 3), "hard": (3, 4), "expert": (4, 5)}
"""How many records the condition covers, per tier (one or two of them screened out)."""

SCREENED = {"easy": 1, "medium": 1, "hard": 1, "expert": 2}
"""How many of the covered records the policy forbids the change on, per tier (at least two are allowed)."""

WAIVED_TIERS = ("hard", "expert")
"""The tiers at which, for a rule with an exception, one allowed record is one the rule covers but its
exception lets through (a late cancellation of an insured booking): checking the rule alone is not enough."""

REDRAWS = 8
"""Draws of the first record until the rule allows the change on it."""

DONORS = 400
"""Records of the target's table searched for one that breaks the rule."""

_CLOCK_PARAMS = frozenset({"id", "today", "now"})


def row_rules(ctx: DomainContext, tool: ToolSpec) -> list[tuple[PolicyRule, set[str]]]:
    """(rule, the columns of the tool's target it reads) for every policy rule over ``tool`` that
    depends on the target record (its id, the clock), not on the call's other arguments: on its own
    columns, or on a record it links to (the flight of a reservation), whose link is then among the
    columns (a screened record takes a donor's flight)."""
    policy, focus = ctx.spec.policy, ctx.focus(tool)
    if policy is None or focus is None:
        return []
    known: dict[str, list[tuple[PolicyRule, set[str]]]] = ctx.__dict__.setdefault("_row_rules", {})
    if tool.name in known:
        return known[tool.name]
    out = []
    table = ctx.spec.table(focus[1])
    assert table is not None
    world = World.from_snapshot(ctx.spec, ctx.base)  # the rules are prepared against the real schema
    try:
        for rule in policy.checks(tool.name):
            assert rule.predicate is not None
            if not sql_params(rule.predicate) <= _CLOCK_PARAMS | {focus[0]}:
                continue
            try:
                reads = analyze_sql(world.conn, rule.predicate).reads
            except sqlite3.Error:
                continue
            own = {c for t, c in reads if t == focus[1] and c != table.primary_key}
            links = {c.name: c.foreign_key.split(".")[0] for c in table.columns if c.foreign_key}
            others = {t for t, _ in reads if t != focus[1]}
            if own and not own & set(links) and not others:
                out.append((rule, own))
            elif own and others and others <= {links[c] for c in own if c in links}:
                out.append((rule, own))  # over a linked record (the flight of a reservation): the link moves
    finally:
        world.close()
    known[tool.name] = out
    return out


def moved_values(table: Table, donor: dict[str, Any], columns: set[str], keep: set[str] | None = None
                 ) -> dict[str, Any]:
    """The values a record takes from ``donor`` to fall on the donor's side of a rule that reads
    ``columns``: those columns and every date of the record (its dates keep their order: a rental
    still ends after it starts). A rule over a linked record (the tour of a booking) moves the link,
    and with it every value of the donor's own but its other links, its unique values and ``keep``
    (what the request's condition reads): a price copied from the tour stays the tour's."""
    links = {c.name for c in table.columns if c.foreign_key}
    if columns & links:
        return {c.name: donor[c.name] for c in table.columns
                if c.name in donor and c.name != table.primary_key and not c.unique and c.name not in (keep or set())
                and (c.name in columns or c.name not in links)}
    dates = {c.name for c in table.columns if c.type in ("date", "datetime") and c.name != table.primary_key
             and not c.foreign_key and not _BIRTH.search(c.name)}
    return {c: donor[c] for c in sorted(columns | dates) if c in donor}


def screened_program(sql: str, rule: PolicyRule, focus_param: str, pk: str) -> str:
    """The bulk program ``sql`` (``SELECT "pk" FROM "t" WHERE ...``) restricted to the records the rule
    allows: its predicate, correlated on the outer record, negated (a predicate that gives no row or
    NULL allows)."""
    assert rule.predicate is not None
    m = re.match(r'SELECT "(\w+)" FROM "(\w+)" WHERE (.*) ORDER BY "\w+"$', sql)
    if m is None:
        raise TaskRejected(Reason.NO_SELECTION, "the bulk program has no form to screen")
    table, where = m.group(2), m.group(3)
    where = re.sub(r'(?<![\w.])"(\w+)"', r'screened."\1"', where)
    forbid = re.sub(rf"(?<![:\w]):(?:id|{re.escape(focus_param)})\b", f'screened."{pk}"', rule.predicate)
    return (f'SELECT screened."{pk}" FROM "{table}" AS screened WHERE {where} '
            f'AND NOT COALESCE(({forbid}), 0) ORDER BY screened."{pk}"')


class ScreenedBuilder(BulkBuilder):
    """Every record a condition covers gets the same write, except those (one, or two at the expert tier)
    that the policy forbids."""

    family = "screened"
    tiers = ("hard", "expert")
    counts = COUNTS

    @classmethod
    def applies(cls, ctx: DomainContext) -> bool:
        return ctx.spec.policy is not None and super().applies(ctx)

    @classmethod
    def goal_ok(cls, ctx: DomainContext, tool: ToolSpec) -> bool:
        return super().goal_ok(ctx, tool) and bool(row_rules(structural(ctx), tool))

    def __init__(self, ctx: DomainContext, seed: int, attempt: int, config: ChainConfig):
        super().__init__(ctx, seed, attempt, config)
        self.rule: PolicyRule | None = None
        self.rule_columns: set[str] = set()
        self.goal_args: dict[str, Any] = {}
        self.goal_tool: ToolSpec | None = None
        """The bulk write and its arguments on the first record (the screened record gets the same call)."""
        self.screened_ids: list[Any] = []

    # --- the records ---------------------------------------------------------------------------------
    def place_goal(self, tool: ToolSpec, args: dict[str, Any], density: int) -> dict[str, Any]:
        """The rule is drawn first, then a first record that it allows (redrawn a few times)."""
        focus = self.ctx.focus(tool)
        options = row_rules(self.ctx, tool)
        if focus is None or not options:
            raise TaskRejected(Reason.NO_POLICY_VIOLATION, tool.name)
        self.rule, self.rule_columns = self.rng.choice(options)
        sampler = ArgSampler(self.world, self.rng)
        for _ in range(REDRAWS):
            if not self.breaks(self.rule, focus[0], args.get(focus[0])):
                self.goal_args, self.goal_tool = dict(args), tool
                return super().place_goal(tool, args, density)
            redrawn = sampler.satisfying_args(tool, attempts=2)
            if redrawn is None:
                break
            args = redrawn
        raise TaskRejected(Reason.BREAKS_POLICY, f"{self.rule.name} on the first record")

    def shape(self, table: Table, target: dict[str, Any], rows: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        looks, same = super().shape(table, target, rows)
        assert self.filter is not None and same
        tool = self.goal_tool
        assert tool is not None
        focus = self.ctx.focus(tool)
        assert focus is not None
        rule, cols = self.rule, self.rule_columns
        assert rule is not None
        # a rule that reads the condition's column (the exception "unless it is a chat consultation", asked
        # about "every video consultation"): a donor must hold the condition's value, or the record leaves the set
        match = {self.filter[0].name: self.filter[1]} if self.filter[0].name in cols else {}
        n = min(SCREENED.get(self.tier or "hard", 1), len(same) - 1) if len(same) > 1 else 1
        used: set[Any] = set()
        for screened in same[len(same) - n:]:  # the last ones, each from its own donor record
            donor = self.record_where(table, rule, focus[0], True, used, match=match)
            if donor is None:
                raise TaskRejected(Reason.NO_POLICY_VIOLATION, rule.name)
            used.add(donor[table.primary_key])
            screened.update(moved_values(table, donor, cols, {self.filter[0].name}))
            self.screened_ids.append(screened["id"])
        for row in same[: len(same) - n]:  # a date moved apart from the first record's may cross the rule's line
            if not self.would_break(table, rule, focus[0], row):
                continue
            allowed = self.record_where(table, rule, focus[0], False, used, match=match)
            if allowed is None:
                raise TaskRejected(Reason.BREAKS_POLICY, f"{rule.name} on {row['id']}")
            used.add(allowed[table.primary_key])
            row.update(moved_values(table, allowed, cols, {self.filter[0].name}))
            if self.would_break(table, rule, focus[0], row):
                raise TaskRejected(Reason.BREAKS_POLICY, f"{rule.name} on {row['id']}")
        kept = len(same) - n
        if rule.unless and self.tier in WAIVED_TIERS and kept >= 2:
            # one allowed record (not the first) that the rule covers but its exception lets through
            row = same[kept - 1]
            donor = self.record_where(table, rule, focus[0], False, used, covered=True, match=match)
            if donor is not None:
                used.add(donor[table.primary_key])
                row.update(moved_values(table, donor, cols, {self.filter[0].name}))
                if self.would_break(table, rule, focus[0], row):
                    raise TaskRejected(Reason.BREAKS_POLICY, f"{rule.name} on {row['id']}")
        return looks, same

    def would_break(self, table: Table, rule: PolicyRule, focus_param: str, row: dict[str, Any]) -> bool:
        """Whether ``rule`` would hold for ``row`` once added (tried in a savepoint that is rolled back)."""
        conn = self.world.conn
        conn.execute("SAVEPOINT screen")
        try:
            return not insert_row(conn, table, row) or self.breaks(rule, focus_param, row["id"])
        finally:
            conn.execute("ROLLBACK TO screen")
            conn.execute("RELEASE screen")

    def record_where(self, table: Table, rule: PolicyRule, focus_param: str, broken: bool, avoid: set[Any],
                     covered: bool = False, match: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """A record of ``table`` in the world on which ``rule`` holds (``broken``) or does not, not in ``avoid``
        and holding the values of ``match``; with ``covered``, one that the rule's predicate covers all the
        same (its exception lets it through)."""
        pk = table.primary_key
        ids = [r[0] for r in self.world.conn.execute(f'SELECT "{pk}" FROM "{table.name}" ORDER BY "{pk}" LIMIT {DONORS}')]
        self.rng.shuffle(ids)
        for i in ids:
            if i in avoid or self.breaks(rule, focus_param, i) != broken or not self.callable_on(focus_param, i):
                continue
            if covered and not self.holds(rule.forbid, focus_param, i):
                continue
            row = self.world.row(table.name, i)
            if row is not None and all(row.get(c) == v for c, v in (match or {}).items()):
                return row
        return None

    def callable_on(self, focus_param: str, key: Any) -> bool:
        """Whether the goal's tool, with the goal's arguments, passes its preconditions on record ``key``
        (a donor's dates then make a record the tool acts on: not a session that already took place)."""
        tool = self.goal_tool
        assert tool is not None
        try:
            bound = bind_params(self.world, tool, {**self.goal_args, focus_param: key})
            return first_failing_precondition(self.world, tool, bound) is None
        except ToolError:
            return False

    def breaks(self, rule: PolicyRule, focus_param: str, key: Any) -> bool:
        """Whether ``rule`` forbids the change on the record ``key`` of the world as it is (an error counts)."""
        return self.holds(rule.predicate, focus_param, key)

    def holds(self, sql: str | None, focus_param: str, key: Any) -> bool:
        """Whether the predicate ``sql`` holds for the record ``key`` of the world as it is (an error counts)."""
        assert sql is not None
        clock = self.world.clock
        try:
            hit = self.world.conn.execute(sql, {"id": key, focus_param: key, "today": clock[:10],
                                                "now": clock}).fetchone()
        except sqlite3.Error:
            return True
        return hit is not None and bool(hit[0])

    def select(self, table: Table, target: dict[str, Any], siblings: list[dict[str, Any]]) -> Selection:
        sel = super().select(table, target, siblings)
        assert sel.program is not None and self.rule is not None
        assert self.goal_tool is not None
        focus = self.ctx.focus(self.goal_tool)
        assert focus is not None
        sql = screened_program(sel.program["sql"], self.rule, focus[0], table.primary_key)
        clock = self.world.clock
        params = {**sel.program["params"], "today": clock[:10], "now": clock}
        try:
            ids = [r[0] for r in self.run_program(sql, params)]
        except sqlite3.Error as e:
            raise TaskRejected(Reason.RULE_UNVERIFIABLE, f"{self.rule.name}: {e}") from None
        want = sorted(str(i) for i in sel.program["ids"] if i not in self.screened_ids)
        if sorted(str(i) for i in ids) != want or not ids:
            raise TaskRejected(Reason.POLICY_NOT_BROKEN, f"{self.rule.name} screens {ids}, not all but "
                               f"{self.screened_ids}")
        sel.program = {"sql": sql, "params": params, "world": "initial", "ids": ids}
        return sel

    # --- the goals -----------------------------------------------------------------------------------
    def add_write_goal(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> None:
        if broken_rules(scratch, self.spec, tool, args):
            raise TaskRejected(Reason.BREAKS_POLICY, f"{tool.name} on the first record")
        super().add_write_goal(scratch, tool, args)

    def apply_to_rest(self, scratch: World, tool: ToolSpec) -> None:
        """The write on every further target but the screened ones, whose writes are the forbidden calls."""
        focus = self.ctx.focus(tool)
        assert focus is not None and self.rule is not None
        goal, call = self.goals[-1], self.chain[-1]
        rest = self.extra_targets
        self.extra_targets = [r for r in rest if r["id"] not in self.screened_ids]
        try:
            super().apply_to_rest(scratch, tool)
        finally:
            self.extra_targets = rest
        for screened in (r for r in rest if r["id"] in self.screened_ids):
            self.forbid(scratch, tool, goal.args, call, screened)
        assert self.spec.policy is not None
        rivals = [r.reason for r in self.spec.policy.rules if r.reason and r.reason != self.rule.reason]
        self.answer_facts.append({"name": REFUSAL_FACT, "value": self.rule.reason, "rivals": rivals})

    def forbid(self, scratch: World, tool: ToolSpec, goal_args: dict[str, Any], call: Call,
               screened: dict[str, Any]) -> None:
        """Record the write on ``screened`` as a forbidden call, once checked: the rule forbids it, and the
        tool would let it through and change something."""
        focus = self.ctx.focus(tool)
        assert focus is not None and self.rule is not None
        args = {**goal_args, focus[0]: screened["id"]}
        if self.rule not in broken_rules(scratch, self.spec, tool, args):
            raise TaskRejected(Reason.POLICY_NOT_BROKEN, self.rule.name)
        try:
            bound = bind_params(scratch, tool, args)
        except ToolError as e:
            raise TaskRejected(Reason.REFUSED_CALL_FAILS, f"{tool.name}: {e}") from None
        if first_failing_precondition(scratch, tool, bound) is not None:
            raise TaskRejected(Reason.REFUSED_CALL_FAILS, tool.name)
        snap = scratch.snapshot()
        try:
            changed = call_effect(self.spec, scratch, snap, tool, args)
        except ToolError as e:
            raise TaskRejected(Reason.REFUSED_CALL_FAILS, f"{tool.name}: {e}") from None
        finally:
            scratch.restore(snap)
        if not changed:
            raise TaskRejected(Reason.REFUSED_CALL_FAILS, f"{tool.name} changes nothing on {screened['id']}")
        self.forbidden.append(Call(tool=tool.name, args={**call.args, focus[0]: self.target_ref(screened)},
                                   purpose="refused: " + self.rule.name))


    def make_task(self, initial_hash: str, expected_hash: str, gold_keys: dict[str, list[Any]], tools: list[str],
                  level: str, density: int, withheld: int) -> Task:
        task = super().make_task(initial_hash, expected_hash, gold_keys, tools, level, density, withheld)
        with_pushback(task, self.rng)
        return task


__all__ = ["ScreenedBuilder", "row_rules", "screened_program"]
