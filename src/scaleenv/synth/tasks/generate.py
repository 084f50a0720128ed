"""Phase 2: instantiate verified tasks by graph expansion (ScaleEnv §4.2), without an LLM.

One attempt: pick goal tools on the dependency graph, clone the rows they act on into fresh
entities (the rows the chain needs), add confusable distractors, write the seed chain as an
executable program (lookups whose outputs feed the goal calls), execute it to get the expected
state, expand the task's tool neighbourhood breadth-first, write the user side, and run the
integrity gates. Any failure rejects the attempt with a counted reason.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from scaleenv.env.cache import make_episode
from scaleenv.env.episode import Episode
from scaleenv.env.policies import OracleAgent, SwapAgent
from scaleenv.env.styles import drawn_style
from scaleenv.errors import Rejection, ScaleEnvError, ToolError
from scaleenv.formats.domain import DomainSpec, Table, ToolSpec
from scaleenv.formats.task import (
    DEFAULT_FAMILY,
    REFUSAL_FACT,
    TIERS,
    AnswerFact,
    Call,
    Difficulty,
    Slip,
    Task,
    UserProfile,
    Verification,
)
from scaleenv.synth.tasks.context import WRITE_FAMILIES, DomainContext
from scaleenv.synth.tasks.expand import expand_tools
from scaleenv.synth.tasks.gates import converse, play_policy, run_gates
from scaleenv.synth.tasks.identity import fact_key, finder_defect, owned_finders, usable_finders
from scaleenv.synth.tasks.instruction import (
    _PERSON_NAME_COLUMNS,
    EntityRef,
    Goal,
    actor_slots,
    build_user_side,
    human,
    is_person,
    language_defects,
    person_name,
    speaker_of,
)
from scaleenv.synth.tasks.pacing import with_gradual_requests
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.slips import draw_slip
from scaleenv.synth.tasks.state import (
    contact_columns,
    distractor,
    fresh_unique,
    mend_rows,
    next_id,
    renamed,
    ruled_columns,
    vary_measures,
)
from scaleenv.synth.tasks.tiers import TIER_KNOBS, draw_tier
from scaleenv.synth.tasks.true_rules import drop_true_rivals, reasons_true_of
from scaleenv.synth.tasks.validity import (
    ZERO_ANSWERS,
    answer_options,
    call_effect,
    contradicting_requests,
    exempt_columns,
    fair_rivals,
    goal_effects,
    lookalikes,
    same_answer,
    shows,
    unobservable_goals,
    wasted_requests,
)
from scaleenv.tools.chain import ChainError, resolve_args, run_chain
from scaleenv.tools.policy import broken_rules, waived_rules
from scaleenv.tools.replay import TaskWorlds
from scaleenv.tools.runtime import bind_params, first_failing_precondition, run_tool
from scaleenv.tools.sampling import ArgSampler
from scaleenv.utils.dates import clock_side, shift_iso
from scaleenv.utils.record_ids import names
from scaleenv.world.ddl import quote_ident
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World

CHILD_TABLES = 3
"""Child tables whose rows a cloned target gets (so aggregates over its children are not 0)."""

CHILD_ROWS = 3
"""Child rows cloned per child table."""


STAGE_SECONDS: Counter[str] = Counter()
"""Cumulative seconds per Phase 2 stage in this process (reported by the build and the benchmark)."""


class _stage:
    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        STAGE_SECONDS[self.name] += time.perf_counter() - self.t0  # type: ignore[assignment]  # seconds


LEVELS = TIER_KNOBS
"""The knobs per difficulty tier (see :mod:`scaleenv.synth.tasks.tiers`)."""


class TaskRejected(Rejection):
    """A candidate task was rejected (``reason``, a :class:`Reason`, is counted in ``tasks_report.json``)."""

    def __init__(self, reason: Reason | str, detail: str = ""):
        super().__init__(Reason(reason), detail)  # an unknown reason is a programming error (ValueError)


@dataclass
class ChainConfig:
    min_length: int = 3
    max_length: int = 8
    min_tools: int = 20
    family_mix: dict[str, float] | None = None
    """Share of attempts per task family (None: ``families.DEFAULT_MIX``)."""
    tier_mix: dict[str, float] | None = None
    """Share of tasks per difficulty tier (None: ``tiers.DEFAULT_TIER_MIX``)."""


def _shift_dates(row: dict[str, Any], days: int, clock: str) -> dict[str, Any]:
    """``row`` with its dates moved by ``days``, each only where it stays on its side of the clock (a
    shipment booked at 18:15 two days ago is not booked "today at 18:15" while it is 09:00)."""
    out = {}
    for k, v in row.items():
        moved = shift_iso(v, days)
        out[k] = moved if moved is v or clock_side(str(moved), clock) == clock_side(str(v), clock) else v
    return out


_OTHER_PARTY = re.compile(r"(^|_)(to|recipient|receiver|new|target|other|invitee|friend|followee|followed|blocked|"
                          r"assignee|guest|beneficiary|payee|contact|partner|member|owner|buyer|seller|candidate|"
                          r"student|patient|passenger|player|reviewer|referee|employee|driver|courier)(_|$)")
"""Parameters of a write that may name someone other than the user: the other party (a recipient,
a new owner, an invitee) or a person a member of staff acts on."""


_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN)\s+\"?(\w+)\"?", re.IGNORECASE)


def rule_readers(spec: DomainSpec, tools: list[str]) -> tuple[str, ...]:
    """A read tool of each table the check of a policy rule over ``tools`` reads (its exception too), where the
    domain has one (its get tool, else a search or a list): the agent must be able to see what the
    rule decides on."""
    if spec.policy is None:
        return ()
    used = set(tools)
    tables: list[str] = []
    for rule in spec.policy.rules:
        if rule.predicate and used & set(rule.tools):
            tables += [t for t in _SQL_TABLE.findall(rule.predicate) if spec.table(t) is not None]
    out: list[str] = []
    for table in dict.fromkeys(tables):
        readers = [t for t in spec.tools if t.kind == "read" and t.meta.get("entity") == table]
        readers.sort(key=lambda t: ("get", "search", "list").index(str(t.meta.get("family")))
                     if t.meta.get("family") in ("get", "search", "list") else 3)
        if readers and not any(r.name in used for r in readers):
            out.append(readers[0].name)
    return tuple(out)

def _sql_value(v: Any) -> Any:
    return json.dumps(v) if isinstance(v, list | dict) else v


def someone_elses(spec: DomainSpec, table: str, row: dict[str, Any], user_table: str, user_id: Any) -> str | None:
    """The person ``row`` names through its links to the user's table (a review request's
    reviewer, a booking's guest) when none of them is the user: reached through the user's own
    records (an article in the user's space), it is still another person's record."""
    tbl = spec.table(table)
    if tbl is None:
        return None
    links = [c.name for c in tbl.columns if c.foreign_key and c.foreign_key.partition(".")[0] == user_table
             and row.get(c.name) is not None]
    if not links or any(row.get(c) == user_id for c in links):
        return None
    return f"{links[0]}={row[links[0]]}"


class TaskBuilder:
    """The ``direct`` family: goals asked for directly. Other families subclass it (see
    :mod:`scaleenv.synth.tasks.families`)."""

    family = DEFAULT_FAMILY
    tiers: tuple[str, ...] = TIERS
    """The difficulty tiers this family builds tasks at."""

    @classmethod
    def applies(cls, ctx: DomainContext) -> bool:
        """Whether the domain of ``ctx`` can host tasks of this family."""
        return True

    def __init__(self, ctx: DomainContext, seed: int, attempt: int, config: ChainConfig):
        self.ctx = ctx
        self.spec = ctx.spec
        self.attempt = attempt
        self.config = config
        self.rng = random.Random(f"task:{seed}:{ctx.spec.name}:{attempt}")
        self.seed = seed
        self.world = World.from_snapshot(ctx.spec, ctx.base)
        self.patch: dict[str, list[dict[str, Any]]] = {}
        self.distractor_ids: dict[str, set[Any]] = {}
        self.reserved: dict[str, list[Any]] = {}
        self.taken: set[Any] = set()
        self._seeded: set[str] = set()
        self.own_children: set[str] = set()
        """Child tables whose rows a cloned target copies from its original (a rule reads them: the
        interviews still scheduled that forbid withdrawing the application), not from another record."""
        self.entities: dict[str, EntityRef] = {}
        self.refs: dict[str, Any] = {}  # table -> id reference (a $ref dict or a literal id)
        self.chain: list[Call] = []
        self.goals: list[Goal] = []
        self.answer_facts: list[dict[str, Any]] = []
        self.effects: list[dict[Any, Any]] = []  # the matched cells each write goal changed
        self.gold_outputs: list[Any] = []  # what the gold chain's calls return (what a correct agent sees)
        self.forbidden: list[Call] = []  # calls the literal request asks for that must not happen (Task.forbidden)
        self.waived: list[int] = []  # gold-chain steps a rule covers but its exception allows (Task.waived)
        self.ordered: list[tuple[int, int]] = []  # gold-chain writes that must be made in order (Task.ordered)
        self.tier: str | None = None  # the difficulty tier (drawn from the config's mix when unset)

    # --- initial state ---------------------------------------------------------
    def add_rows(self, table: str, rows: list[dict[str, Any]], distract: bool = False) -> None:
        mend_rows(self.world, table, rows, self.rng)  # clones and look-alikes obey the domain's invariants
        self.world.load_rows(table, rows)
        self.patch.setdefault(table, []).extend(rows)
        if distract:
            self.distractor_ids.setdefault(table, set()).update(r["id"] for r in rows)

    def clone_path(self, table: str, key: Any, reserve: int = 0) -> tuple[dict[tuple[str, Any], Any],
                                                                          list[tuple[str, dict[str, Any]]]]:
        """Clone the row and its ancestors (first required foreign key at each level), root first."""
        path: list[tuple[str, dict[str, Any]]] = []
        seen = set()
        t, k = table, key
        while (t, k) not in seen:
            seen.add((t, k))
            row = self.world.row(t, k)
            if row is None:
                raise TaskRejected(Reason.MISSING_ROW, f"{t}[{k}]")
            path.append((t, row))
            link = self.ctx.parent_link(t)
            if link is None or row.get(link[0]) is None:
                break
            t, k = link[1], row[link[0]]
        mapping: dict[tuple[str, Any], Any] = {}
        clones: list[tuple[str, dict[str, Any]]] = []
        shift = self.rng.choice([-2, -1, 1, 2, 3])
        for depth, (t, row) in enumerate(reversed(path)):
            tbl = self.spec.table(t)
            assert tbl is not None
            new = dict(row) if depth == 0 else _shift_dates(row, shift, self.spec.clock)
            if depth == 0:
                # the person or account the path hangs from has its own figures (a balance, a rating),
                # not a copy of its namesake's (play round 29)
                new = vary_measures(tbl, new, self.rng, ruled_columns(self.spec, t))
            # Distractors take the ids just below the clone's, so ids generated by the chain come out
            # the same with or without them (the orthogonality check compares both runs).
            reserved: list[str] = []
            for _ in range(reserve):
                reserved.append(next_id(self.world, t, set(reserved)))
            self.reserved[t] = reserved
            new["id"] = next_id(self.world, t, set(reserved))
            link = self.ctx.parent_link(t)
            if link and (link[1], row.get(link[0])) in mapping:
                new[link[0]] = mapping[(link[1], row[link[0]])]
            self.seed_taken(t)
            new = fresh_unique(tbl, new, self.rng, self.taken)
            try:
                self.add_rows(t, [new])
            except ScaleEnvError as e:
                raise TaskRejected(Reason.CLONE_CONFLICT, str(e)) from None
            mapping[(t, row["id"])] = new["id"]
            clones.append((t, new))
        return mapping, clones

    def seed_taken(self, table: str) -> None:
        """Mark the values the world already holds in ``table``'s unique and contact columns as taken (a
        fresh value must not collide with them), once per table."""
        if table in self._seeded:
            return
        self._seeded.add(table)
        tbl = self.spec.table(table)
        assert tbl is not None
        for c in tbl.columns:
            if c.unique and c.name != tbl.primary_key or c.name in contact_columns(tbl):
                self.taken.update(r[0] for r in self.world.conn.execute(
                    f'SELECT "{c.name}" FROM "{table}" WHERE "{c.name}" IS NOT NULL'))

    def add_distractors(self, clones: list[tuple[str, dict[str, Any]]], density: int) -> None:
        for t, row in clones:
            tbl = self.spec.table(t)
            assert tbl is not None
            self.seed_taken(t)
            rows: list[dict[str, Any]] = []
            keep = ruled_columns(self.spec, t, own=True)  # a look-alike has no rows elsewhere yet
            namesakes = self.namesake_parents(tbl, row)
            used: dict[str, set[Any]] = {}  # no two look-alikes with the same figures
            for _ in range(density):
                d = vary_measures(tbl, distractor(tbl, row, self.rng, self.taken), self.rng, keep, used)
                for fk, parents in namesakes:
                    if parents:
                        d[fk] = parents.pop(0)  # one look-alike per parent
                free = self.reserved.get(t) or []
                d["id"] = free.pop(0) if free else next_id(self.world, t, {r["id"] for r in rows})
                rows.append(d)
            if rows:
                try:
                    self.add_rows(t, rows, distract=True)
                except ScaleEnvError:
                    continue

    def namesake_parents(self, tbl: Table, row: dict[str, Any]) -> list[tuple[str, list[Any]]]:
        """(foreign key, the parents to hand out, one per look-alike) for a named record (a pet, a field):
        its look-alikes go to the parent's look-alikes, then to other records of the parent's table, never
        two under one parent nor under the record's own (one owner does not have three rabbits called Rocky; a namesake owner has one too).
        Nothing for a person's own record."""
        if self.ctx.display_column(tbl.name) != "name" or any(c.name in _PERSON_NAME_COLUMNS for c in tbl.columns):
            return []
        link = self.ctx.parent_link(tbl.name)
        out = []
        for c in tbl.columns:
            parent = c.foreign_key.split(".")[0] if c.foreign_key else None
            if parent is None or row.get(c.name) is None:
                continue
            ids = sorted(self.distractor_ids.get(parent, ()), key=str)
            self.rng.shuffle(ids)
            ptable = self.spec.table(parent)
            if link is not None and link[0] == c.name and ptable is not None:
                pk = quote_ident(ptable.primary_key)
                others = [r[0] for r in self.world.conn.execute(
                    f"SELECT {pk} FROM {quote_ident(parent)} WHERE {pk} != ? ORDER BY {pk} LIMIT 40", (row[c.name],))
                    if r[0] not in ids]
                self.rng.shuffle(others)
                ids += others
            if ids:
                out.append((c.name, ids))
        return out

    def add_children(self, clones: list[tuple[str, dict[str, Any]]], source: dict[Any, tuple[str, Any]],
                     primary: ToolSpec, args: dict[str, Any]) -> None:
        """Give the cloned target (and the path's root) child rows of their own: those of another row of
        the same table (so they differ from the original's), else the original's. Dropped again when
        they break the primary goal's preconditions."""
        targets = [clones[-1]] + ([clones[0]] if len(clones) > 1 else [])
        path_tables = {t for t, _ in clones}
        snap, patch = self.world.snapshot(), {t: list(rows) for t, rows in self.patch.items()}
        added = False
        for t, row in targets:
            orig = source.get(row["id"], (t, None))[1]
            for child, fk in self.ctx.children(t)[:CHILD_TABLES]:
                if child in path_tables:
                    continue
                rows = self.donor_children(t, child, fk, orig)
                tbl = self.spec.table(child)
                assert tbl is not None
                self.seed_taken(child)
                new_rows: list[dict[str, Any]] = []
                ids: set[Any] = set()
                for r in rows[:CHILD_ROWS]:
                    new = fresh_unique(tbl, renamed(tbl, {**r, fk: row["id"]}, self.rng, self.taken), self.rng,
                                       self.taken)
                    new["id"] = next_id(self.world, child, ids)
                    ids.add(new["id"])
                    new_rows.append(new)
                if not new_rows:
                    continue
                try:
                    self.add_rows(child, new_rows)
                    added = True
                except ScaleEnvError:
                    continue
        if added and first_failing_precondition(self.world, primary, bind_params(self.world, primary, args)) is not None:
            self.world.restore(snap)
            self.patch = patch

    def donor_children(self, table: str, child: str, fk: str, orig: Any) -> list[dict[str, Any]]:
        """The child rows of a random other row of ``table`` that has some (else of ``orig``)."""
        q = self.world.conn.execute(
            f'SELECT DISTINCT "{fk}" FROM "{child}" WHERE "{fk}" IS NOT NULL ORDER BY 1 LIMIT 200')
        parents = [r[0] for r in q if r[0] != orig]
        donor = parents[self.rng.randrange(len(parents))] if parents and child not in self.own_children else orig
        if donor is None:
            return []
        cur = self.world.conn.execute(f'SELECT * FROM "{child}" WHERE "{fk}" = ? ORDER BY 1', (donor,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def add_lookalikes(self) -> None:
        """Every record that shares an entity's name (base world included) counts as a distractor."""
        for t, ref in self.entities.items():
            extra = lookalikes(self.world, self.ctx, t, ref.row, ref.by)
            if extra:
                self.distractor_ids.setdefault(t, set()).update(extra)

    def final_lookalikes(self, initial: bytes) -> None:
        """On the task's final initial state (expansion may have cloned rows too): every record that
        shares the name of a row the task cloned and the chain names, by reference or by literal id,
        is a distractor."""
        world = World.from_snapshot(self.spec, initial)
        patched = {t: {r["id"] for r in rows} for t, rows in self.patch.items()}
        named: list[tuple[str, Any]] = [(t, ref.row["id"]) for t, ref in self.entities.items()]
        for call in self.chain:
            tool = self.spec.tool(call.tool)
            assert tool is not None
            for p, t in self.ctx.key_params(tool).items():
                v = call.args.get(p)
                if isinstance(v, str | int) and not isinstance(v, bool) and v in patched.get(t, ()):
                    named.append((t, v))
        for t, key in dict.fromkeys(named):
            if key in self.distractor_ids.get(t, ()):
                continue
            row = world.row(t, key)
            extra = lookalikes(world, self.ctx, t, row) if row is not None else []
            if extra:
                self.distractor_ids.setdefault(t, set()).update(extra)
        world.close()

    def trim_args(self, tool: ToolSpec, args: dict[str, Any]) -> dict[str, Any] | None:
        """Drop every optional literal argument the preconditions do not need (the user never asks
        for one); None when a needed one is left that nothing states."""
        keys = self.ctx.key_params(tool)
        out = dict(args)
        for p in tool.parameters:
            if p.required or p.name in keys or p.name not in out:
                continue
            trial = {k: v for k, v in out.items() if k != p.name}
            try:
                ok = first_failing_precondition(self.world, tool, bind_params(self.world, tool, trial)) is None
            except ToolError:
                ok = False
            if ok:
                out = trial
        return out

    def exempt_input(self, tool: ToolSpec, args: dict[str, Any]) -> bool:
        """Whether a value the user would give is stored in a column the reward ignores."""
        keys = self.ctx.key_params(tool)
        for name in args:
            p = tool.param(name)
            if p is None or name in keys or not p.column:
                continue
            t, _, c = p.column.partition(".")
            if c in exempt_columns(self.spec, t) and c != "id":
                return True
        return False

    # --- resolution steps --------------------------------------------------------
    def pick_where(self, rows: list[dict[str, Any]], target: dict[str, Any], table: str) -> dict[str, Any]:
        tbl = self.spec.table(table)
        assert tbl is not None
        from scaleenv.synth.tasks.instruction import INTERNAL_CODE as _INTERNAL

        display = self.ctx.display_column(table)
        # what a customer holds first (their e-mail, a booking reference, a plate), internal codes last
        held = [c for c in tbl.columns if c.unique and c.name != "id" and not _INTERNAL.search(c.name)]
        prefs = held + [c for c in tbl.columns if c.name == display]
        prefs += [c for c in tbl.columns if c.type in ("date", "datetime")]
        prefs += [c for c in tbl.columns if c.type == "text" and not c.foreign_key and c.match != "exempt"
                  and not _INTERNAL.search(c.name)]
        prefs += [c for c in tbl.columns if c.unique and c.name != "id" and _INTERNAL.search(c.name)]
        for c in prefs:
            v = target.get(c.name)
            if v is None or c.match == "exempt" or c.name == "id":
                continue
            if sum(1 for r in rows if r.get(c.name) == v) == 1:
                return {c.name: v}
        return {"id": target["id"]}

    def matching_rows(self, table: str, where: dict[str, Any]) -> int:
        """How many rows of ``table`` in the task's world hold every value of ``where``."""
        cond = " AND ".join(f"{quote_ident(c)} IS ?" for c in where)
        sql = f"SELECT COUNT(*) FROM {quote_ident(table)}" + (f" WHERE {cond}" if cond else "")
        return int(self.world.conn.execute(sql, [_sql_value(v) for v in where.values()]).fetchone()[0])

    def call_read(self, tool: ToolSpec, args: dict[str, Any], purpose: str) -> tuple[int, Any]:
        try:
            out = run_tool(self.world, tool, resolve_args(Call(tool=tool.name, args=args), self.outputs, len(self.chain)))
        except (ToolError, ChainError) as e:
            raise TaskRejected(Reason.RESOLUTION_FAILED, f"{tool.name}: {e}") from None
        self.chain.append(Call(tool=tool.name, args=args, purpose=purpose))
        self.outputs.append(out)
        return len(self.chain) - 1, out

    def resolve_entities(self, clones: list[tuple[str, dict[str, Any]]]) -> None:
        self.outputs: list[Any] = []
        for depth, (t, row) in enumerate(clones):
            sing = self.ctx.singular(t)
            ref = EntityRef(t, sing, row, display=self.ctx.display_column(t))
            step = None
            if depth == 0:
                search = self.ctx.tool_by_family("search", t)
                display = self.ctx.display_column(t)
                if search is not None and display and search.param(display) and row.get(display):
                    args: dict[str, Any] = {display: row[display]}
                    if search.param("limit"):
                        args["limit"] = 100
                    step, out = self.call_read(search, args, f"find the {human(sing)}")
                    where = self.pick_where(out or [], row, t)
                    ref.by = {display: row[display], **where}
            else:
                parent_t = clones[depth - 1][0]
                link = self.ctx.parent_link(t)
                lister = self.ctx.tool_by_family("list", t, parent=parent_t)
                if lister is not None and link is not None and lister.param(link[0]):
                    step, out = self.call_read(lister, {link[0]: self.refs[parent_t]}, f"list the {human(t)}")
                    where = self.pick_where(out or [], row, t)
                    ref.by = where
                    if "id" not in where and self.matching_rows(t, where) > 1 and parent_t in self.entities \
                            and not is_person(self.spec, self.entities[parent_t]):
                        # unique only among the parent's: say the parent (the user's own pets need no
                        # "at my owner ...": "my pet" says whose)
                        ref.within = self.entities[parent_t]
            if step is None:
                getter = self.ctx.tool_by_family("get", t)
                if getter is None or not getter.parameters:
                    self.refs[t] = row["id"]
                    ref.by = {"id": row["id"]}
                    self.entities[t] = ref
                    continue
                step, _ = self.call_read(getter, {getter.parameters[0].name: row["id"]}, f"look up the {human(sing)}")
                ref.by = {"id": row["id"]}
                self.refs[t] = {"$ref": step, "field": "id"}
            else:
                where = {k: v for k, v in ref.by.items() if k != self.ctx.display_column(t) or len(ref.by) == 1}
                self.refs[t] = {"$ref": step, "field": "id", "where": where}
            self.entities[t] = ref

    # --- goals -----------------------------------------------------------------------
    def pick_goal_tool(self, candidates: list[ToolSpec]) -> ToolSpec | None:
        if not candidates:
            return None
        weights = [WRITE_FAMILIES.get(t.meta.get("family", "operation"), 2) for t in candidates]
        return self.rng.choices(candidates, weights)[0]

    def goal_call(self, tool: ToolSpec, args: dict[str, Any], answer: str | None = None) -> None:
        ids = {row_ref.row["id"]: t for t, row_ref in self.entities.items()}
        call_args: dict[str, Any] = {}
        refs: dict[str, EntityRef] = {}
        for k, v in args.items():
            if isinstance(v, str) and v in ids and k in self.ctx.key_params(tool):
                call_args[k] = self.refs[ids[v]]
                refs[k] = self.entities[ids[v]]
            else:
                call_args[k] = v
        self.chain.append(Call(tool=tool.name, args=call_args, purpose="goal"))
        self.goals.append(Goal(tool, args, refs, answer))

    def run(self) -> Task:
        with _stage("chain"):
            initial, level, density, withheld = self.sample_chain()
        return self.finish(initial, level, density, withheld)

    def sample_chain(self) -> tuple[bytes, str, int, int]:
        """Goals, the rows they need, distractors and the seed chain; returns the initial state."""
        ctx, rng = self.ctx, self.rng
        level = self.tier = self.tier or draw_tier(rng, self.config.tier_mix, self.tiers)
        (g_lo, g_hi), (d_lo, d_hi), withheld, read_p = LEVELS[level]
        n_goals = rng.randint(g_lo, g_hi)
        density = rng.randint(d_lo, d_hi)
        # 1. primary goal and the rows it needs
        primary = self.pick_goal_tool(ctx.goal_tools)
        want_read_only = primary is None or rng.random() < 0.1
        if want_read_only:
            primary = self.pick_goal_tool(ctx.read_goal_tools)
        if primary is None:
            raise TaskRejected(Reason.NO_GOAL_TOOLS)
        focus = ctx.focus(primary)
        assert focus is not None
        sampler = ArgSampler(self.world, rng)
        args = sampler.satisfying_args(primary)
        if args is None:
            raise TaskRejected(Reason.NO_SATISFYING_ARGS, primary.name)
        args = self.place_goal(primary, args, density)
        # 2. the seed chain: lookups, then the goal calls
        initial, scratch = self.run_seed_chain()
        if want_read_only:
            self.add_read_goal(scratch, primary, args)
        else:
            self.add_write_goal(scratch, primary, args)
            for _ in range(n_goals - 1):
                if len(self.chain) >= self.config.max_length:
                    break
                self.add_more_goal(scratch)
            if rng.random() < read_p and len(self.chain) < self.config.max_length:
                self.add_more_goal(scratch, read=True)
        self.fit_length(scratch)
        return initial, level, density, withheld

    def run_seed_chain(self) -> tuple[bytes, World]:
        """The task's initial state as it stands, and a scratch world with the chain so far run on it."""
        initial = self.world.snapshot()
        scratch = World.from_snapshot(self.spec, initial)
        try:
            run_chain(scratch, self.spec, self.chain)
        except ChainError as e:
            raise TaskRejected(Reason.RESOLUTION_FAILED, str(e)) from None
        return initial, scratch

    def fit_length(self, scratch: World) -> None:
        """Pad a short chain with questions about its records; reject one over the configured length."""
        while len(self.chain) < self.config.min_length:
            if not self.add_more_goal(scratch, read=True, confirm=True):
                raise TaskRejected(Reason.CHAIN_TOO_SHORT)
        if len(self.chain) > self.config.max_length:
            raise TaskRejected(Reason.CHAIN_TOO_LONG)

    def clone_goal_rows(self, tool: ToolSpec, args: dict[str, Any], density: int
                        ) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
        """Clone the rows ``tool`` acts on (with ``density`` look-alikes each and the target's
        children); return ``args`` on the clones, and the clones."""
        focus = self.ctx.focus(tool)
        assert focus is not None
        mapping, clones = self.clone_path(focus[1], args[focus[0]], reserve=density)
        keys = self.ctx.key_params(tool)
        args = {k: mapping.get((keys[k], v), v) if k in keys else v for k, v in args.items()}
        self.add_distractors(clones, density)
        if first_failing_precondition(self.world, tool, bind_params(self.world, tool, args)) is not None:
            raise TaskRejected(Reason.CLONE_BREAKS_PRECONDITIONS, tool.name)
        self.add_children(clones, {v: k for k, v in mapping.items()}, tool, args)
        return args, clones

    def place_goal(self, tool: ToolSpec, args: dict[str, Any], density: int) -> dict[str, Any]:
        """The rows a goal call acts on, cloned into the task's world with their look-alikes and the
        look-ups that find them; return the call's arguments, only those the user states."""
        args, clones = self.clone_goal_rows(tool, args, density)
        trimmed = self.trim_args(tool, args)
        if trimmed is None:
            raise TaskRejected(Reason.UNSTATED_ARGUMENT, tool.name)
        if self.exempt_input(tool, trimmed):
            raise TaskRejected(Reason.EXEMPT_INPUT, tool.name)
        self.resolve_entities(clones)
        self.add_lookalikes()
        return trimmed

    def add_write_goal(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> None:
        """The primary write goal; arguments that change nothing (a value set to what it holds) are
        redrawn a few times before the attempt is rejected."""
        snap = scratch.snapshot()
        focus = self.ctx.focus(tool)
        sampler = ArgSampler(scratch, self.rng)
        for _ in range(3):
            try:
                changed = call_effect(self.spec, scratch, snap, tool, args)
            except ToolError as e:
                raise TaskRejected(Reason.GOAL_FAILED, f"{tool.name}: {e}") from None
            if changed:
                self.effects.append(changed)
                self.goal_call(tool, args)
                return
            scratch.restore(snap)
            fixed = {focus[0]: args[focus[0]]} if focus else {}
            fixed.update({k: v for k, v in args.items() if k in self.ctx.key_params(tool)})
            redrawn = sampler.satisfying_args(tool, attempts=3, fixed=fixed)
            redrawn = self.trim_args(tool, redrawn) if redrawn is not None else None
            if redrawn is None or self.exempt_input(tool, redrawn):
                break
            args = redrawn
        raise TaskRejected(Reason.NOOP_SUBGOAL, tool.name)

    def add_read_goal(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> bool:
        """A question about a goal entity, answered by ``tool``: an answer that is not zero, empty or a
        default, and that every look-alike of the entity answers differently (their values are the
        fact's rivals)."""
        try:
            out = run_tool(scratch, tool, args)
        except ToolError:
            return False
        rival_outs = self.rival_outputs(scratch, tool, args)
        focus = self.ctx.focus(tool)
        ref = self.entities.get(focus[1]) if focus else None
        told = [v for v in (ref.by.values() if ref else ()) if v is not None]  # the user names the entity by these
        options = []
        for name, key, value in answer_options(self.spec, self.ctx, tool, out):
            if value is None or isinstance(value, bool) or value in ZERO_ANSWERS or value == []:
                continue
            if any(same_answer(value, t) for t in told):
                continue  # a question whose answer the user gives itself ("the birth date of Rex (born ...)")
            rivals = [o if key is None else (o.get(key) if isinstance(o, dict) else None) for o in rival_outs]
            if any(same_answer(value, r) for r in rivals):
                continue
            options.append((name, value, [r for r in dict.fromkeys(_hashable(r) for r in rivals) if r is not None]))
        if not options:
            return False
        pick = options[0] if self.rng.random() < 0.5 else options[self.rng.randrange(len(options))]
        name, value, rivals = pick
        fact: dict[str, Any] = {"name": name, "value": value}
        if rivals:
            fact["rivals"] = rivals
        self.answer_facts.append(fact)
        self.goal_call(tool, args, answer=name)
        return True

    def rival_outputs(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> list[Any]:
        """What ``tool`` answers for each look-alike of the entity it asks about (None where it fails)."""
        focus = self.ctx.focus(tool)
        if focus is None:
            return []
        outs = []
        for d in sorted(self.distractor_ids.get(focus[1], ()), key=str):
            try:
                outs.append(run_tool(scratch, tool, {**args, focus[0]: d}))
            except ToolError:
                outs.append(None)
        return outs

    def more_goal_options(self, read: bool = False) -> list[tuple[ToolSpec, dict[str, Any]]]:
        """Goal tools not yet used that act on one of the task's records, each with the argument that
        names it (shuffled)."""
        pool = self.ctx.read_goal_tools if read else self.ctx.goal_tools
        used = {c.tool for c in self.chain}
        options = []
        for t in pool:
            if t.name in used or (t.kind == "write" and (f := self.ctx.focus(t)) is not None
                                  and self.shared_with_user(f[1])):
                continue  # a member does not change the plan it is on
            kp = self.ctx.key_params(t)
            hits = [p for p, table in kp.items() if table in self.entities and (q := t.param(p)) is not None
                    and q.required]
            if hits:
                options.append((t, {hits[0]: self.entities[kp[hits[0]]].row["id"]}))
        self.rng.shuffle(options)
        return options

    def add_more_goal(self, scratch: World, read: bool = False, confirm: bool = False) -> bool:
        sampler = ArgSampler(scratch, self.rng)
        for tool, fixed in self.more_goal_options(read)[:6]:
            args = sampler.satisfying_args(tool, attempts=3, fixed=fixed)
            if args is None:
                continue
            if read or confirm:
                if self.add_read_goal(scratch, tool, args):
                    return True
                continue
            trimmed = self.trim_args(tool, args)
            if trimmed is None or self.exempt_input(tool, trimmed) or self.breaks_a_rule(scratch, tool, trimmed):
                continue
            args = trimmed
            changed = self.observable_effect(scratch, tool, args)
            if changed is None:
                continue
            self.effects.append(changed)
            self.goal_call(tool, args)
            return True
        return False

    def breaks_a_rule(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> bool:
        """Whether an allowed request drawn on ``scratch`` would break a rule of the policy (freeze an
        account with an open order): the task would be rejected for it, so it is not drawn."""
        return self.spec.policy is not None and bool(broken_rules(scratch, self.spec, tool, args))

    def finish(self, initial: bytes, level: str, density: int, withheld: int) -> Task:
        with _stage("verify"):
            self.check_policy(initial)
            world, gold_keys, initial_hash, expected_hash = self.verify(initial)
        foreign = self.foreign_actor()
        if foreign:
            raise TaskRejected(Reason.FOREIGN_ACTOR, foreign)
        unknowable = self.created_id_named()
        if unknowable:
            raise TaskRejected(Reason.UNKNOWABLE_ID, unknowable)
        with _stage("expand"):
            finder = self.self_finder()
            required = ((finder,) if finder else ()) + self.required_tools()
            tools, extra = expand_tools(self.ctx, initial, self.chain + self.forbidden, self.rng, self.config.min_tools,
                                        required=required)
            if finder and finder not in tools:
                raise TaskRejected(Reason.NO_SELF_FINDER, finder)
            lacking = [t for t in required if t not in tools]
            if lacking:
                raise TaskRejected(Reason.MISSING_TOOL, lacking[0])
            if extra:
                world, initial, initial_hash, expected_hash = self.reverify(extra, gold_keys)
            self.final_lookalikes(initial)
        with _stage("verify"):
            self.check_coherent(initial, world)
            clash = contradicting_requests(self.spec, initial, self.chain, self.forbidden) if self.forbidden else []
            if clash:
                raise TaskRejected(Reason.CONTRADICTORY_REQUESTS, clash[0])
            waste = wasted_requests(self.spec, initial, self.chain, self.ordered)
            if waste:
                raise TaskRejected(Reason.WASTED_REQUEST, waste[0])
        with _stage("user_side"):
            task = self.make_task(initial_hash, expected_hash, gold_keys, tools, level, density, withheld)
            with_gradual_requests(task, random.Random(f"gradual:{self.seed}:{self.spec.name}:{self.attempt}"))
            check_language(task, self.spec.clock)
            missing = finder_defect(self.spec, task)
            if missing:
                raise TaskRejected(Reason.NO_SELF_FINDER, missing)
        with _stage("gates"):
            worlds = TaskWorlds(initial, world, gold_keys, [])
            episode = make_episode(self.spec, task, worlds)
            gates = run_gates(episode, task, self.seed)
        if not gates.passed:
            raise TaskRejected(Reason.gate(gates.failures()[0]))
        task.verification.gates = gates.to_json()
        with _stage("user_side"):
            self.add_slip(task, episode)
        return task

    def add_slip(self, task: Task, episode: Episode) -> None:
        """Let the tier's share of users give a look-alike's id at first (:mod:`~scaleenv.synth.tasks.slips`),
        where acting on the id as given scores 0 and the gold chain, told the right id by the scripted
        user, scores 1."""
        slip = draw_slip(task, random.Random(f"slip:{self.seed}:{self.spec.name}:{self.attempt}"),
                         prefer=lambda s: self.tempting_slip(task, episode, s))
        if slip is None:
            return
        careless = SwapAgent(slip.meant, slip.said, also_forbidden=True)  # the request as said, acted on
        if play_policy(episode, task, careless, random.Random(0)).score > 0.0:
            return
        task.user_profile.slip = slip
        if converse(episode, task, OracleAgent(drawn_style(task.id)), self.seed) != 1.0:
            task.user_profile.slip = None  # the scripted user could not put it right in this conversation

    def tempting_slip(self, task: Task, episode: Episode, slip: Slip) -> bool:
        """Whether ``slip`` tempts: a slip in a request the policy refuses should name a look-alike for
        which the request would be allowed (the tool runs and no rule forbids it), so an agent that acts
        on the id as given, without naming it back, changes the look-alike; on one the rule forbids as
        well, refusing without a word about the id is also right. Slips in other requests always tempt."""
        objectives = task.user_profile.objectives
        if slip.goal >= len(objectives) or objectives[slip.goal].kind != "refusal":
            return True
        world = episode.initial_world()
        for call in task.forbidden:
            try:
                meant = resolve_args(call, self.gold_outputs, len(self.gold_outputs))
            except ChainError:
                continue
            if not names(json.dumps(meant), slip.meant):
                continue
            tool = self.spec.tool(call.tool)
            args = {k: slip.said if v == slip.meant else v for k, v in meant.items()}
            if tool is None:
                return False
            try:
                params = bind_params(world, tool, args)
            except ToolError:
                return False
            return first_failing_precondition(world, tool, params) is None and not broken_rules(world, self.spec, tool,
                                                                                                   args)
        return False

    def speaker(self) -> EntityRef | None:
        """The user when it speaks for itself (the chain's root or the first person on its path);
        None when a member of staff speaks for the root."""
        return speaker_of(self.spec, next(iter(self.entities.values()), None), self.entities)

    def observable_effect(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> dict[Any, Any] | None:
        """The call's change of ``scratch`` when it is a goal: it runs, changes something, and leaves
        every earlier goal's change showing. Otherwise ``scratch`` is restored and None returned (a
        no-op, a value that already holds or only exempt columns moving, or an undone earlier goal)."""
        snap = scratch.snapshot()
        try:
            changed = call_effect(self.spec, scratch, snap, tool, args)
        except ToolError:
            scratch.restore(snap)
            return None
        if not changed or not all(shows(e, scratch, self.world) for e in self.effects) \
                or self.duplicates_a_record(scratch, changed):
            scratch.restore(snap)
            return None
        return changed

    def duplicates_a_record(self, world: World, changed: dict[Any, Any]) -> bool:
        """Whether a record the call created has the name of another record under the same parent (a
        second project "Persistent eco-centric productivity" for the team that has one, a fourth filter
        "Receipts" on one account): no one asks for that, and a careful agent would ask first."""
        for key, value in changed.items():
            if not (isinstance(key, tuple) and len(key) == 3 and key[2] == "*" and value is True):
                continue
            table, pk = key[0], key[1]
            display = self.ctx.display_column(table)
            row = world.row(table, pk)
            if display is None or row is None or row.get(display) is None:
                continue
            link = self.ctx.parent_link(table)
            where = f"{quote_ident(display)} = ? AND {quote_ident(world.primary_key(table))} != ?"
            params: list[Any] = [row[display], pk]
            if link is not None:
                where += f" AND {quote_ident(link[0])} IS ?"
                params.append(row.get(link[0]))
            if world.conn.execute(f"SELECT 1 FROM {quote_ident(table)} WHERE {where} LIMIT 1", params).fetchone():
                return True
        return False

    def created_id_named(self) -> str | None:
        """A write that names by its literal id a record an earlier call of the chain created (play round
        38, pet_care/00080: points redeemed on INV-0062, one of three invoices the same request made)."""
        created: set[str] = set()
        for call, out in zip(self.chain, self.gold_outputs, strict=False):
            tool = self.spec.tool(call.tool)
            if tool is None or tool.kind != "write":
                continue
            named = [v for v in call.args.values() if isinstance(v, str) and v in created]
            if named:
                return f"{call.tool} names {named[0]}, which the request itself creates"
            if any(g.kind == "next_id" for g in tool.generated.values()) and isinstance(out, dict) \
                    and isinstance(out.get("id"), str):
                created.add(out["id"])
        return None

    def foreign_actor(self) -> str | None:
        """A write the user asks for in another person's name: an argument naming a record of the
        user's own table other than the user ("ask the seller ... from my account USR-0007", where
        USR-0007 is someone else), or a record whose links to people all name someone else ("approve
        my review request" on another member's review), or a change of a record the user's own record
        belongs to (a member raising the fee of the plan they are on). Parameters that name the other
        party (a recipient, a new owner) are allowed. A refused request counts too ("recall my message"
        on a message someone else sent in the user's conversation)."""
        # a record the chain picks from a list counts by its id where the domain says whose move it is: in a
        # table with a move made through its parent (an offer declined by its listing's seller), the other
        # moves are the row's own person's (withdrawing an offer is its buyer's, play round 37)
        by_parent = {t.meta.get("entity") for t in self.spec.tools if t.meta.get("by")}
        moves = {t.name for t in self.spec.tools if t.meta.get("family") == "transition"
                 and t.meta.get("entity") in by_parent}
        for call in [*(self.resolved(c) if c.tool in moves else c for c in self.chain),
                     *(self.resolved(c) for c in self.forbidden)]:
            foreign = self.foreign_call(call)
            if foreign:
                return foreign
        return None

    def foreign_call(self, call: Call) -> str | None:
        """Why the write ``call`` is made in another person's name (see :meth:`foreign_actor`); None when
        the user may ask for it, or when the user is not known yet."""
        me = self.speaker()
        tool = self.spec.tool(call.tool)
        if me is None or tool is None or tool.kind != "write":
            return None
        if tool.meta.get("staff"):
            return f"{call.tool} is staff's work, not the user's"
        focus = self.ctx.focus(tool)
        if focus is not None and self.shared_with_user(focus[1]):
            # the plan a member is on, the club a player plays for: shared by many, changed by staff
            return f"{call.tool} changes the {focus[1]} record the user belongs to"
        actors = actor_slots(list(tool.meta.get("phrasings") or []))
        for name, table in self.ctx.key_params(tool).items():
            v = call.args.get(name)
            if table == me.table and isinstance(v, str | int) and v != me.row.get("id") \
                    and (not _OTHER_PARTY.search(name) or name in actors):  # "I'm {buyer_id}": the buyer acts
                return f"{call.tool}.{name}={v} is not the user {me.row.get('id')}"
            if table != me.table and name in actors and isinstance(v, str | int):
                # "collect 5 parcels from me ({customer_id})": that customer acts, and the user is a courier
                return f"{call.tool}.{name}={v} is the acting {table} record, not the user {me.row.get('id')}"
            if table != me.table and isinstance(v, str | int) and (row := self.world.row(table, v)) is not None:
                if focus is not None and name == focus[0]:
                    table, row = self.acting_record(tool, table, row)
                other = someone_elses(self.spec, table, row, me.table, me.row.get("id"))
                if other:
                    return f"{call.tool}.{name}={v} belongs to {other}, not the user {me.row.get('id')}"
        return None

    def acting_record(self, tool: ToolSpec, table: str, row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The record whose person makes ``tool``'s move on ``row``: the row itself, or the parent its
        ``by`` key names (the listing of an offer its seller declines)."""
        by, spec_table = tool.meta.get("by"), self.spec.table(table)
        column = next((c for c in spec_table.columns if c.name == by), None) if by and spec_table is not None else None
        if column is None or column.foreign_key is None or row.get(column.name) is None:
            return table, row
        parent_table = column.foreign_key.split(".")[0]
        parent = self.world.row(parent_table, row[column.name])
        return (parent_table, parent) if parent is not None else (table, row)

    def resolved(self, call: Call) -> Call:
        """``call`` with its references to the gold chain's outputs replaced by their values (as it was)
        where one does not resolve)."""
        try:
            args = resolve_args(call, self.gold_outputs, len(self.gold_outputs))
        except ChainError:
            return call
        return call.model_copy(update={"args": args})

    def shared_with_user(self, table: str) -> bool:
        """Whether ``table`` holds records the user's own record belongs to (the plan a member is on,
        the club a player plays for): shared by many people, changed by staff, not by the user."""
        me = self.speaker()
        own = self.spec.table(me.table) if me is not None else None
        if own is None or table == own.name:
            return False
        return any(c.foreign_key and c.foreign_key.split(".")[0] == table for c in own.columns)

    def required_tools(self) -> tuple[str, ...]:
        """Tools the task must hold besides the chain's and the finder: a reader of every table a
        policy rule over the task's writes looks at (a booking's tour and its departure date, for
        "no cancelling within 30 days of departure"), and a family's other choices (the branch a
        conditional request did not take)."""
        return rule_readers(self.spec, [c.tool for c in self.chain + self.forbidden])

    def self_finder(self) -> str | None:
        """The tool that finds the user's own record by what the user knows (policy rule 1 asks the
        agent to look the customer up by name or e-mail), where the user speaks for itself and the
        domain has one (else one that finds a record the user owns by its phone number); the user's
        profile is made to know its attribute."""
        me = self.speaker()
        if me is None:
            return None
        finders = usable_finders(self.spec, me.table, me.row)
        if not finders:
            return self.owned_finder(me)
        in_chain = {c.tool for c in self.chain}
        said = {me.display, *me.by} | {c for c in _PERSON_NAME_COLUMNS if me.row.get(c) == person_name(self.spec, me)}
        # one the chain calls, else one by an attribute the user already names, else the first
        pick = next((f for f in finders if f.tool in in_chain and f.column in said), None) \
            or next((f for f in finders if f.column in said), None) or finders[0]
        if pick.column not in said:
            me.self_facts[fact_key(me.singular, pick.column)] = me.row[pick.column]
        return pick.tool

    def owned_finder(self, me: EntityRef) -> str | None:
        """A finder of a record the user owns (their line by its phone number), with the user knowing
        the value of one such record: one of the task's, else their first."""
        for f in owned_finders(self.spec, me.table):
            assert f.via is not None
            ref = self.entities.get(f.table)
            row = ref.row if ref is not None and ref.row.get(f.via) == me.row["id"] else None
            if row is None or row.get(f.column) is None:
                pk = self.world.primary_key(f.table)
                got = self.world.conn.execute(
                    f'SELECT "{f.column}" FROM "{f.table}" WHERE "{f.via}" = ? AND "{f.column}" IS NOT NULL '
                    f'ORDER BY "{pk}" LIMIT 1', (me.row["id"],)).fetchone()
                if got is None:
                    continue
                row = {f.column: got[0]}
            me.self_facts[fact_key(self.ctx.singular(f.table), f.column)] = row[f.column]
            return f.tool
        return None

    def verify(self, initial: bytes) -> tuple[World, dict[str, list[Any]], str, str]:
        """Execute the chain on the initial state: the result is the expected state."""
        spec = self.spec
        world = World.from_snapshot(spec, initial)
        initial_hash = world.state_hash()
        try:
            self.gold_outputs = run_chain(world, spec, self.chain)
        except ChainError as e:
            raise TaskRejected(Reason.VERIFICATION_FAILED, str(e)) from None
        gold_keys = {t: sorted(ks, key=str) for t, ks in world.touched().items()}
        if not gold_keys and not self.answer_facts:
            raise TaskRejected(Reason.NO_EFFECT)
        expected_hash = world.state_hash()
        self.check_distractors_orthogonal(world)
        self.check_goal_effects(initial)
        world.clear_changes()
        return world, gold_keys, initial_hash, expected_hash

    def check_policy(self, initial: bytes) -> None:
        """No write of the gold chain breaks a rule of the domain's policy (the tools would let it); the
        writes that a rule covers but its exception allows are noted (``waived``), and the pairs of writes
        that must be made in the chain's order (``ordered``: see :meth:`order_pairs`)."""
        self.waived = []
        self.ordered = []
        if self.spec.policy is None or not any(self.spec.policy.checks(c.tool) for c in self.chain):
            return
        world = World.from_snapshot(self.spec, initial)
        outputs: list[Any] = []
        before: dict[int, bytes] = {}  # the world before each write
        ruled: list[int] = []
        try:
            for i, call in enumerate(self.chain):
                tool = self.spec.tool(call.tool)
                assert tool is not None
                args = resolve_args(call, outputs, i)
                if tool.kind == "write":
                    if broken_rules(world, self.spec, tool, args):
                        raise TaskRejected(Reason.BREAKS_POLICY, call.tool)
                    if waived_rules(world, self.spec, tool, args):
                        self.waived.append(i)
                    if self.spec.policy.checks(tool.name):
                        ruled.append(i)
                    before[i] = world.snapshot()
                outputs.append(run_tool(world, tool, args))
        except (ToolError, ChainError) as e:
            raise TaskRejected(Reason.VERIFICATION_FAILED, str(e)) from None
        finally:
            world.close()
        self.ordered = self.order_pairs(ruled, before, outputs)

    def order_pairs(self, ruled: list[int], before: dict[int, bytes], outputs: list[Any]) -> list[tuple[int, int]]:
        """``(a, b)``: write ``a`` of the gold chain must be made before write ``b``, because one of them is
        a write a rule covers (``ruled``) that the other, made the other way round, would make break a rule:
        a later change that ends its exception (made just before it), or an earlier one that it needs (a
        fine paid down before a renewal: left out until it is made). ``before`` holds the world before each
        write and ``outputs`` the chain's outputs, which resolve the arguments."""
        pairs: set[tuple[int, int]] = set()
        for i in ruled:
            tool = self.spec.tool(self.chain[i].tool)
            assert tool is not None
            args = resolve_args(self.chain[i], outputs, i)
            for k in sorted(before):
                if k == i:
                    continue
                # k made just before i (a later write), or i made before k (k left out up to i)
                steps = [k] if k > i else [s for s in sorted(before) if k < s < i]
                trial = World.from_snapshot(self.spec, before[i] if k > i else before[k])
                try:
                    for s in steps:
                        later = self.spec.tool(self.chain[s].tool)
                        assert later is not None
                        run_tool(trial, later, resolve_args(self.chain[s], outputs, s))
                    if broken_rules(trial, self.spec, tool, args):
                        pairs.add((min(i, k), max(i, k)))
                except (ToolError, ChainError):
                    continue  # that order cannot be made at all
                finally:
                    trial.close()
        return sorted(pairs)

    def check_coherent(self, initial: bytes, expected: World) -> None:
        """The task's initial and expected worlds obey the domain's invariants (cloned children of a
        target put into another state, for one, may not)."""
        if not self.spec.invariants:
            return
        from scaleenv.world.invariants import check_world

        start = World.from_snapshot(self.spec, initial)
        try:
            bad = check_world(start, limit=1) or check_world(expected, limit=1)
        finally:
            start.close()
        if bad:
            raise TaskRejected(Reason.INCOHERENT_WORLD, str(bad[0]))

    def check_goal_effects(self, initial: bytes) -> None:
        """Every write goal must change a matched cell, and its change must still show in the end."""
        try:
            effects, final = goal_effects(self.spec, initial, self.chain)
        except ChainError as e:
            raise TaskRejected(Reason.VERIFICATION_FAILED, str(e)) from None
        bad = unobservable_goals(self.spec, initial, effects, final)
        if bad:
            raise TaskRejected(Reason(bad[0][1]), bad[0][0])

    def reverify(self, extra: dict[str, list[dict[str, Any]]],
                 gold_keys: dict[str, list[Any]]) -> tuple[World, bytes, str, str]:
        """Expansion patched the initial state: the gold chain must still change exactly the same rows."""
        self.patch = _merge(self.patch, extra)
        world = World.from_snapshot(self.spec, self.ctx.base)
        apply_patch(world, self.patch)
        initial = world.snapshot()
        initial_hash = world.state_hash()
        try:
            self.gold_outputs = run_chain(world, self.spec, self.chain)  # what a correct agent now sees
        except ChainError as e:
            raise TaskRejected(Reason.EXPANSION_CHANGED_GOLD, str(e)) from None
        if {t: sorted(ks, key=str) for t, ks in world.touched().items()} != gold_keys:
            raise TaskRejected(Reason.EXPANSION_CHANGED_GOLD)
        expected_hash = world.state_hash()
        world.clear_changes()
        return world, initial, initial_hash, expected_hash

    def user_side(self, root: EntityRef | None, withheld: int) -> tuple[str, dict[str, Any]]:
        """The instruction and the user profile (a family may reshape the goals the user states)."""
        return build_user_side(self.spec, root, self.entities, self.goals, withheld, self.rng)

    def make_task(self, initial_hash: str, expected_hash: str, gold_keys: dict[str, list[Any]], tools: list[str],
                  level: str, density: int, withheld: int) -> Task:
        spec = self.spec
        root = next(iter(self.entities.values()), None)
        instruction, profile = self.user_side(root, withheld)
        facts = self.own_figures_are_no_rivals(fair_rivals([dict(f) for f in self.answer_facts]), tools)
        if any(f["name"] == REFUSAL_FACT for f in facts):  # a rule true of a record the agent sees is no guess
            facts = drop_true_rivals(facts, reasons_true_of(self.world, self.ctx, _scalars(self.gold_outputs)))
        refused = self.refused_records()
        for f in facts:
            if f["name"] == REFUSAL_FACT and refused:
                f["seen"] = refused  # the reason counts once the agent looked at a record it refuses on
        said = " ".join(profile["goals"])
        for g in self.goals:
            if g.tool.kind != "write":
                continue
            for k, v in g.args.items():
                p = g.tool.param(k)
                if k not in g.refs and p is not None and not p.required and str(v) not in said:
                    raise TaskRejected(Reason.UNSTATED_ARGUMENT, f"{g.tool.name}.{k}")
        return Task(
            id=f"{spec.name}/{self.attempt:05d}",
            domain=spec.name,
            instruction=instruction,
            user_profile=UserProfile.model_validate(profile),
            initial_patch=self.patch,
            gold_chain=self.chain,
            answer_facts=[AnswerFact.model_validate(f) for f in facts],
            tools=tools,
            difficulty=Difficulty(
                level=level,
                chain_length=len(self.chain),
                sub_goals=len(self.goals),
                distractor_density=density,
                withheld_facts=len(profile["withheld"]),
                tier=self.tier,
            ),
            verification=Verification(
                distractors={t: sorted(ids) for t, ids in sorted(self.distractor_ids.items())},
                initial_hash=initial_hash,
                expected_hash=expected_hash,
                gold_keys={t: len(k) for t, k in gold_keys.items()},
            ),
            attempt=self.attempt,
            family=self.family,
            forbidden=self.forbidden,
            waived=self.waived,
            ordered=self.ordered,
        )

    def refused_records(self) -> list[str]:
        """The ids of the records the forbidden calls would change (their focus argument, resolved
        against the gold chain's outputs as the policy-ignorant gate resolves it); a forbidden call
        that the outputs do not resolve rejects the task."""
        ids: set[str] = set()
        for call in self.forbidden:
            tool = self.spec.tool(call.tool)
            focus = self.ctx.focus(tool) if tool is not None else None
            if focus is None:
                continue
            try:
                value = resolve_args(call, self.gold_outputs, len(self.gold_outputs)).get(focus[0])
            except (ChainError, IndexError, KeyError, TypeError):
                # the record refused on is not where the request puts it (a hold of another book than
                # the one listed): the agent could not find it, the naive gate could not make the call
                raise TaskRejected(Reason.REFUSED_CALL_FAILS, f"{call.tool}: its record is not shown") from None
            if isinstance(value, str):
                ids.add(value)
        return sorted(ids)

    def own_figures_are_no_rivals(self, facts: list[dict[str, Any]], tools: list[str] | None = None
                                  ) -> list[dict[str, Any]]:
        """Drop the rivals that equal a figure the gold chain shows (a look-alike's total that is the
        target's cash balance), or that a read tool of the task shows about one of the task's own
        records (the planting's overall nitrogen, 75.0, beside a look-alike's insecticide total of
        75.0): a correct agent may state what it saw without being taken for a guesser."""
        seen = _scalars(self.gold_outputs) + (self.own_record_figures(tools) if tools else [])
        for f in facts:
            if f.get("rivals"):
                figures = [v for v in seen if not same_answer(v, f["value"])]
                f["rivals"] = [r for r in f["rivals"] if not any(same_answer(r, v) for v in figures)]
                if not f["rivals"]:
                    f.pop("rivals")
        return facts

    def own_record_figures(self, tools: list[str]) -> list[Any]:
        """The figures each read tool of ``tools`` that takes one record id shows about the task's own
        record of that table (called once on the initial state)."""
        out: list[Any] = []
        world = World.from_snapshot(self.spec, self.world.snapshot())
        try:
            for name in tools:
                tool = self.spec.tool(name)
                if tool is None or tool.kind != "read":
                    continue
                required = [p.name for p in tool.parameters if p.required]
                table = self.ctx.key_params(tool).get(required[0]) if len(required) == 1 else None
                ref = self.entities.get(table) if table else None
                if ref is None or ref.row.get("id") is None:
                    continue
                try:
                    out += _scalars(run_tool(world, tool, {required[0]: ref.row["id"]}))
                except ScaleEnvError:
                    continue
        finally:
            world.close()
        return out

    def check_distractors_orthogonal(self, expected: World) -> None:
        """The gold chain must give the same changes with and without the distractor rows."""
        if not self.distractor_ids:
            return
        plain = World.from_snapshot(self.spec, self.ctx.base)
        apply_patch(plain, {t: [r for r in rows if r["id"] not in self.distractor_ids.get(t, ())]
                            for t, rows in self.patch.items()})
        try:
            run_chain(plain, self.spec, self.chain)
        except ChainError:
            raise TaskRejected(Reason.DISTRACTOR_INTERFERENCE, "chain fails without distractors") from None
        with_d = expected.touched()
        for t, ids in with_d.items():
            if ids & self.distractor_ids.get(t, set()):
                raise TaskRejected(Reason.DISTRACTOR_INTERFERENCE, f"gold chain touched a distractor in {t}")
        full = {t: {r["id"] for r in rows} for t, rows in self.patch.items()}
        pruned = {t: ids - self.distractor_ids.get(t, set()) for t, ids in full.items()}
        if self._changes(plain, pruned) != self._changes(expected, full):
            raise TaskRejected(Reason.DISTRACTOR_INTERFERENCE, "the gold chain changes different rows")

    def _changes(self, world: World, patched: dict[str, set[Any]]) -> dict[str, list[str]]:
        """What the chain did to ``world`` (whose initial state was the base plus ``patched`` rows), per
        table, up to exempt columns, derived ones (a flight's seats sold counts the look-alike bookings
        too: it follows from the other changes) and the ids of rows it created."""
        base = World.from_snapshot(self.spec, self.ctx.base)
        touched = world.touched()
        new_ids = {k for t, ks in touched.items() for k in ks
                   if k not in patched.get(t, ()) and base.row(t, k) is None}
        out: dict[str, list[str]] = {}
        for t, ks in touched.items():
            table = self.spec.table(t)
            assert table is not None
            exempt = {c.name for c in table.columns if c.match == "exempt"} | {table.primary_key}
            exempt |= {i.column for i in self.spec.invariants if i.kind == "derived" and i.table == t and i.column}
            rows = []
            for k in ks:
                row = world.row(t, k)
                if row is None:
                    rows.append(f"deleted {k!r}")
                    continue
                shown = {c: ("<new id>" if v in new_ids else v) for c, v in row.items() if c not in exempt}
                rows.append(("new " if k in new_ids else f"{k!r} ") + json.dumps(shown, sort_keys=True, default=str))
            out[t] = sorted(rows)
        return out


def check_language(task: Task, today: str | None = None) -> None:
    """What the user says must read as a person speaks (the audit's language check, at build time);
    ``today`` (the domain's clock) lets age words be checked against the dates said."""
    for text in [task.instruction, *task.user_profile.goals]:
        bad = language_defects(text, today)
        if bad:
            raise TaskRejected(Reason.LANGUAGE_DEFECT, bad[0])


def _merge(a: dict[str, list[dict[str, Any]]], b: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    out = {k: list(v) for k, v in a.items()}
    for k, v in b.items():
        out.setdefault(k, []).extend(v)
    return out


@dataclass
class DomainTasks:
    tasks: list[Task]
    attempts: int
    rejections: Counter[str]


def _scalars(value: Any) -> list[Any]:
    """Every scalar inside a tool output (rows, lists of rows, nested values)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _scalars(v)]
    if isinstance(value, list):
        return [x for v in value for x in _scalars(v)]
    return [] if value is None else [value]


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, dict | list) else v
