"""The base of the families whose target the user singles out among its own records by a criterion
(the cheapest, the one with the Lisbon tour, every pending one) instead of by the target's facts.

The target is a record under a parent the user owns (an appointment of the user's pet, an order of
the user); its siblings under that parent are built around it (copies of the target shaped so that
the criterion picks the target and nothing else, or exactly the records the condition covers), the
user is told the criterion and never a fact that names the target, and the gold chain lists the
parent's records and acts on the ones the criterion picks. A family subclasses
:class:`SelectionBuilder` and says how to shape the siblings (:meth:`shape`) and how to check and
say the criterion (:meth:`select`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from scaleenv.env.language import spoken
from scaleenv.errors import ScaleEnvError
from scaleenv.formats.domain import Column, Table, ToolSpec
from scaleenv.formats.task import Task
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.phrasing import selection_sentence
from scaleenv.synth.tasks.generate import ChainConfig, TaskBuilder, TaskRejected
from scaleenv.synth.tasks.instruction import EntityRef, column_phrase, drop_unit, human, is_person
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.state import distractor, next_id
from scaleenv.synth.tasks.validity import created_in_selection
from scaleenv.tools.chain import ChainError, resolve_args, run_chain
from scaleenv.tools.runtime import run_tool
from scaleenv.utils.dates import clock_side, shift_iso
from scaleenv.world.world import World

_MONEY = ("price", "amount", "fee", "cost", "fare", "total", "rate", "charge", "premium", "rent", "budget")
_BIRTH = ("birth", "dob", "born")
"""The worlds' clock (a moved date stays on its side of it, as look-alikes' dates do)."""


class StructuralContext(DomainContext):
    """A domain whose tools carry no derivation metadata (the LLM back end's): the getter, lister and
    finder of an entity are found by their shape (what they take and what they return)."""

    def tool_by_family(self, family: str, entity: str, **meta: Any) -> ToolSpec | None:
        found = super().tool_by_family(family, entity, **meta)
        if found is not None or family not in ("get", "list", "search"):
            return found
        display = self.display_column(entity)
        for t in self.spec.tools:
            req = [p for p in t.parameters if p.required]
            if t.kind != "read" or t.returns.table != entity or len(req) != 1:
                continue
            key = self.key_params(t).get(req[0].name)
            if family == "get" and t.returns.mode == "one" and key == entity:
                return t
            if family == "list" and t.returns.mode == "many" and key is not None and key == meta.get("parent"):
                return t
            if family == "search" and t.returns.mode == "many" and display and req[0].name == display:
                return t
        return None


def structural(ctx: DomainContext) -> DomainContext:
    """``ctx`` itself where its tools say what they are, else its :class:`StructuralContext` (kept on it)."""
    if isinstance(ctx, StructuralContext) or any(t.meta.get("family") for t in ctx.spec.tools):
        return ctx
    view = ctx.__dict__.get("_structural")
    if view is None:
        view = ctx.__dict__["_structural"] = StructuralContext(ctx.spec, ctx.base, ctx.graph, ctx.positive_args)
    assert isinstance(view, StructuralContext)
    return view


def lister_for(ctx: DomainContext, table: str) -> tuple[ToolSpec, str, str] | None:
    """(list tool, fk column, parent table) that lists ``table``'s records under their parent, where
    the domain has one."""
    link = ctx.parent_link(table)
    if link is None:
        return None
    tool = ctx.tool_by_family("list", table, parent=link[1])
    if tool is None or tool.param(link[0]) is None:
        return None
    return tool, link[0], link[1]


def leaf_tool(ctx: DomainContext, tool: ToolSpec) -> bool:
    """Whether ``tool``'s target has a parent whose records a tool lists (then siblings can be built)."""
    focus = ctx.focus(tool)
    return focus is not None and lister_for(ctx, focus[1]) is not None


def col_words(c: Column) -> str:
    """How the user names a column (``scheduled_at`` -> ``scheduled time``, ``vet_id`` -> ``vet``)."""
    name = c.name
    if c.foreign_key and name.endswith("_id"):
        name = name[:-3]
    elif c.type == "datetime" and name.endswith("_at"):
        name = name[:-3] + "_time"
    elif c.type == "date" and name.endswith("_on"):
        name = name[:-3] + "_date"
    return human(name)


# a lone participle that names an amount ("charged"): the noun a person uses for it
_PARTICIPLE_NOUNS = {"charged": "charge", "refunded": "refund", "paid": "amount paid", "owed": "amount owed",
                     "spent": "amount spent", "billed": "amount billed", "claimed": "amount claimed",
                     "raised": "amount raised", "earned": "earnings", "donated": "donation", "deposited": "deposit"}
_WORD_NOUNS = {"battery": "battery level", "pct": "percentage"}


def measure_words(c: Column) -> str:
    """How a person names a number or date of a record: without a unit suffix (``weight_kg`` ->
    "weight", ``size_kb`` -> "size"), a lone participle as its noun (``charged`` -> "charge"),
    dates as their noun (``due_by`` -> "due date", ``given_on`` -> "vaccination date")."""
    if c.type in ("date", "datetime"):
        return column_phrase(c.name)
    words = drop_unit(col_words(c)).split()
    if len(words) == 1:
        w = words[0]
        if w in _PARTICIPLE_NOUNS:
            return _PARTICIPLE_NOUNS[w]
        if w.endswith("ed") and is_money(c):
            return f"amount {w}"
        return _WORD_NOUNS.get(w, w)
    return " ".join(words)


def plural_measure(phrase: str) -> bool:
    """Whether a measure is a plural noun ("loyalty points", "vacancies", "refills left"): it takes "are"."""
    return any(w.endswith("s") and not w.endswith(("ss", "us", "is", "ics")) and len(w) > 3 for w in phrase.split())


def is_state(c: Column) -> bool:
    """Whether ``c`` holds a record's state (its values read as a state: "open", "out for delivery")."""
    return c.name in ("status", "state")


_ACT_WORDS = {"placed", "submitted", "created", "booked", "ordered", "registered", "requested", "opened", "made",
              "filed", "posted", "listed", "issued", "sent", "applied", "entered", "logged", "raised", "reported",
              "received", "new", "scheduled", "reserved"}
"""States named by the act that makes every record ("placed" orders, "submitted" applications): said
before the noun, they read as every record of the kind, so they are said as a state ("that is still
placed")."""


def qualified(noun: str, c: Column, value: Any) -> str:
    """``noun`` qualified by an enum value as a person says it: "open bill", "order that is out for
    delivery", "full-time job posting", "job posting with employment type fixed term contract"."""
    said = say(value)
    words = said.split()
    if said.lower() in ("none", "no") and not is_state(c):
        return f"{noun} with no {col_words(c)}"  # "every rental of mine with no insurance", not "every none rental"
    if len(words) == 1 and is_state(c) and said.lower() in _ACT_WORDS:
        # "every placed order of mine" reads as every order I placed: the state is said as one
        return f"{noun} that is still {said}"
    if said.lower() in ("on", "off"):
        col = col_words(c)
        if is_state(c) or col in ("power", "state", "status"):
            return f"{noun} that is {said}"  # "every light that is on", not "every on light"
        return f"{noun} with the {col} {said}"  # a scene "that is off" reads as disabled: its light power is off
    if len(words) == 1 and c.name.lower() in _GRADE_COLUMNS:
        return f"{said}-{c.name.lower()} {noun}"  # "every low-priority ticket", not "every low ticket"
    if len(words) == 1:
        return f"{said} {noun}"
    if is_state(c):
        # "submission that needs revision", not "that is needs revision"
        return f"{noun} that {said}" if words[0].lower() in _STATE_VERBS else f"{noun} that is {said}"
    if len(words) == 2:
        return f"{'-'.join(words)} {noun}"
    return f"{noun} with {col_words(c)} {said}"


_STATE_VERBS = frozenset({"needs", "has", "have", "awaits", "requires", "lacks"})
"""First words of a state that is a verb phrase already ("needs revision")."""

_GRADE_COLUMNS = frozenset({"priority", "severity", "urgency", "level", "tier", "grade"})
"""Columns whose one-word values grade the record and are said with the column ("high-severity")."""


def words_of(c: Column) -> set[str]:
    """The words of a column's name (``amount_paid`` -> amount, paid): a word is matched whole, so
    ``current`` is no ``rent``."""
    return set(c.name.lower().split("_"))


def is_money(c: Column) -> bool:
    return bool(words_of(c) & set(_MONEY))


def order_columns(table: Table, row: dict[str, Any]) -> list[Column]:
    """Columns a record can be ranked by: numbers and dates the row holds (not ids, keys, birth dates)."""
    out = []
    for c in table.columns:
        v = row.get(c.name)
        if c.name == table.primary_key or c.foreign_key or c.unique or c.enum or c.match == "exempt":
            continue
        number = c.type in ("integer", "real") and isinstance(v, int | float) and not isinstance(v, bool)
        date = c.type in ("date", "datetime") and isinstance(v, str) and not any(b in c.name for b in _BIRTH)
        if number or date:
            out.append(c)
    return out


def enum_columns(table: Table, row: dict[str, Any]) -> list[Column]:
    """Enum columns whose value the row holds and that have another value to give a look-alike;
    status-like columns last (a look-alike in another state is a weaker decoy)."""
    cols = [c for c in table.columns if c.enum and len(c.enum) >= 2 and row.get(c.name) in c.enum
            and c.match != "exempt"]
    return sorted(cols, key=lambda c: (c.name in ("status", "state"), c.name))


def other_value(c: Column, value: Any, rng: random.Random) -> Any:
    options = [v for v in (c.enum or []) if v != value]
    return rng.choice(options) if options else None


def shift_dates(table: Table, row: dict[str, Any], days: int, clock: str) -> bool:
    """Move every date of ``row`` (birth dates aside) by ``days``, in place, when each stays on its
    side of the clock; False (row unchanged) otherwise."""
    cols = [c.name for c in table.columns if c.type in ("date", "datetime") and isinstance(row.get(c.name), str)
            and c.name != table.primary_key and not c.foreign_key and not any(b in c.name for b in _BIRTH)]

    def side(v: str) -> int:
        return clock_side(v, clock)

    moved = {c: shift_iso(row[c], days) for c in cols}
    if any(side(moved[c]) != side(row[c]) for c in cols):
        return False
    row.update(moved)
    return True


def step_of(c: Column, value: float) -> float:
    """A step between ranked values of ``c``: about a tenth of the value, at least 1 (0.5 for reals)."""
    if c.type == "integer":
        return max(1, round(abs(value) * 0.1))
    return max(0.5, round(abs(value) * 0.1, 2))


@dataclass
class Selection:
    """What a family decided about the target's siblings and how the user names the records."""

    table: str
    fk: str
    parent_id: Any
    targets: list[dict[str, Any]] = field(default_factory=list)
    """Every record the goal acts on, the primary target first."""
    phrase: str = ""
    """The target(s) as the user says it, without the owner word (``cheapest pending invoice``)."""
    program: dict[str, Any] | None = None
    listed_step: int = -1


class SelectionBuilder(TaskBuilder):
    """A task whose target is named by a criterion over the user's own records (see the module docstring)."""

    tiers: tuple[str, ...] = ("medium", "hard", "expert")
    min_siblings = 2
    leaf_goals = True
    """Whether further goals may act on the target (``that same ...``); not for a set of targets."""

    @classmethod
    def applies(cls, ctx: DomainContext) -> bool:
        ctx = structural(ctx)
        return any(cls.goal_ok(ctx, t) for t in ctx.goal_tools)

    @classmethod
    def table_ok(cls, ctx: DomainContext, table: Table) -> bool:
        """Whether the family's criterion can be built over records of ``table`` (by its columns)."""
        return True

    @classmethod
    def goal_ok(cls, ctx: DomainContext, tool: ToolSpec) -> bool:
        """Whether ``tool`` can be the goal: its target is listed under a parent and fits the criterion."""
        focus = ctx.focus(tool)
        table = ctx.spec.table(focus[1]) if focus else None
        return table is not None and leaf_tool(ctx, tool) and cls.table_ok(ctx, table)

    def __init__(self, ctx: DomainContext, seed: int, attempt: int, config: ChainConfig):
        super().__init__(structural(ctx), seed, attempt, config)
        self.sel: Selection | None = None
        self.extra_targets: list[dict[str, Any]] = []

    # --- the target and its siblings ----------------------------------------------------------------
    def pick_goal_tool(self, candidates: list[ToolSpec]) -> ToolSpec | None:
        self.primary = super().pick_goal_tool([t for t in candidates if self.goal_ok(self.ctx, t)])
        return self.primary

    def written_columns(self) -> set[str]:
        """Columns of the target's table the primary goal sets (a criterion over one would change
        under the user's feet: "settle the claim with the lowest approved amount")."""
        tool = getattr(self, "primary", None)
        return {p.column.partition(".")[2] for p in (tool.parameters if tool else []) if p.column}

    def sibling_count(self, density: int) -> int:
        return max(density, self.min_siblings)

    def add_distractors(self, clones: list[tuple[str, dict[str, Any]]], density: int) -> None:
        super().add_distractors(clones[:-1], density)
        t, row = clones[-1]
        tbl = self.spec.table(t)
        assert tbl is not None
        self.seed_taken(t)
        rows: list[dict[str, Any]] = []
        for _ in range(self.sibling_count(density)):
            d = distractor(tbl, row, self.rng, self.taken)
            free = self.reserved.get(t) or []
            d["id"] = free.pop(0) if free else next_id(self.world, t, {r["id"] for r in rows})
            rows.append(d)
        looks, same = self.shape(tbl, row, rows)
        try:
            if looks:
                self.add_rows(t, looks, distract=True)
            if same:
                self.add_rows(t, same)
        except ScaleEnvError as e:
            raise TaskRejected(Reason.CLONE_CONFLICT, str(e)) from None
        self.extra_targets = same

    def shape(self, table: Table, target: dict[str, Any], rows: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Shape the siblings built for ``target`` (copies of it): (look-alikes, further targets)."""
        raise NotImplementedError

    def select(self, table: Table, target: dict[str, Any], siblings: list[dict[str, Any]]) -> Selection:
        """Check, on the world as built, that the criterion picks the targets, and say it."""
        raise NotImplementedError

    def resolve_entities(self, clones: list[tuple[str, dict[str, Any]]]) -> None:
        super().resolve_entities(clones)
        t, row = clones[-1]
        ref, found = self.entities[t], lister_for(self.ctx, t)
        tref = self.refs.get(t)
        if found is None or not isinstance(tref, dict) or len(clones) < 2:
            raise TaskRejected(Reason.NO_SELECTION, "the target is not listed under its parent")
        _, fk, _ = found
        step = tref["$ref"]
        listed = self.outputs[step]
        world_rows = self.world.conn.execute(f'SELECT * FROM "{t}" WHERE "{fk}" = ? ORDER BY 1', (row[fk],))
        names = [d[0] for d in world_rows.description]
        siblings = [dict(zip(names, r, strict=True)) for r in world_rows.fetchall()]
        if not isinstance(listed, list) or sorted(str(r.get("id")) for r in listed if isinstance(r, dict)) != sorted(
                str(r["id"]) for r in siblings):
            raise TaskRejected(Reason.NO_SELECTION, "the lister does not show every record of the parent")
        tbl = self.spec.table(t)
        assert tbl is not None
        target = self.world.row(t, row["id"])
        assert target is not None
        speaker = self.speaker()
        if speaker is not None and speaker.table == t:
            # "freeze every active member of plan PLN-0010", said by one of them (the rest its look-alikes)
            raise TaskRejected(Reason.NO_SELECTION, f"the user would be one of the {t} the selection picks")
        if self.me() is None:  # a member of staff speaks of the records it looks after
            for r in self.entities.values():
                r.owner_word = "the"
        sel = self.select(tbl, target, siblings)
        sel.listed_step = step
        self.sel = sel
        ref.by = {}
        ref.phrase = sel.phrase

    def me(self) -> EntityRef | None:
        """The user's own record, when the user is a person who speaks for itself (the chain's root or
        the first person on its path, as :meth:`speaker` says); None when a member of staff speaks."""
        me = self.speaker()
        return me if me is not None and is_person(self.spec, me) else None

    def parent_part(self, fk_table: str) -> str:
        """`` for my pet Rex (birth date ...)``, or nothing when the parent is the user itself."""
        parent = self.entities.get(fk_table)
        if parent is None or parent is self.me():
            return ""
        return f" for {parent.describe()}"

    def noun(self, table: str) -> str:
        return human(self.ctx.singular(table))

    # --- the goals ----------------------------------------------------------------------------------
    def add_more_goal(self, scratch: World, read: bool = False, confirm: bool = False) -> bool:
        if self.leaf_goals or self.sel is None or self.sel.table not in self.entities:
            return super().add_more_goal(scratch, read, confirm)
        leaf = self.entities.pop(self.sel.table)  # further goals act on the other records only
        try:
            return super().add_more_goal(scratch, read, confirm)
        finally:
            self.entities[self.sel.table] = leaf

    def target_ref(self, row: dict[str, Any]) -> dict[str, Any]:
        """A reference to ``row`` in the lister's output."""
        assert self.sel is not None
        listed = self.outputs[self.sel.listed_step]
        return {"$ref": self.sel.listed_step, "field": "id", "where": self.pick_where(listed, row, self.sel.table)}

    def write_sentences(self) -> None:
        """Say every goal that acts on the target with the selection's phrase (first) or ``that same``."""
        if self.sel is None:
            return
        leaf = self.entities.get(self.sel.table)
        owner = "my" if self.me() is not None else "the"
        first, last = None, -2
        for i, g in enumerate(self.goals):
            if g.sentence or leaf is None or leaf not in g.refs.values():
                continue
            noun = self.noun(self.sel.table)
            if first is None:
                subject = f"{owner} {self.sel.phrase}"
                first = i
            elif last == i - 1:  # the goal just before spoke of it too
                subject = f"that same {noun}"
            else:  # another record came in between: "that same" would point at it
                subject = f"the {noun} from my first request" if first == 0 else f"the {noun} I described above"
            g.sentence = selection_sentence(g, leaf, subject, self.entities, self.spec, self.me(), self.rng)
            last = i

    def make_task(self, initial_hash: str, expected_hash: str, gold_keys: dict[str, list[Any]], tools: list[str],
                  level: str, density: int, withheld: int) -> Task:
        self.write_sentences()
        task = super().make_task(initial_hash, expected_hash, gold_keys, tools, level, density, withheld)
        if self.sel is not None and self.sel.program is not None:
            task.verification.program = self.sel.program
        return task

    # --- the query program ----------------------------------------------------------------------------
    def run_program(self, sql: str, params: dict[str, Any], world: World | None = None) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in (world or self.world).conn.execute(sql, params).fetchall()]

    def acted_on(self, initial: bytes) -> list[Any]:
        """The ids of the target's table that the gold chain's goals pass, in order (replayed)."""
        assert self.sel is not None
        world = World.from_snapshot(self.spec, initial)
        outputs: list[Any] = []
        ids: list[Any] = []
        try:
            for i, call in enumerate(self.chain):
                tool = self.spec.tool(call.tool)
                assert tool is not None
                args = resolve_args(call, outputs, i)
                if call.purpose == "goal":
                    ids += [args[p] for p, t in self.ctx.key_params(tool).items()
                            if t == self.sel.table and args.get(p) is not None]
                outputs.append(run_tool(world, tool, args))
        except (ChainError, ScaleEnvError) as e:
            raise TaskRejected(Reason.VERIFICATION_FAILED, str(e)) from None
        finally:
            world.close()
        return list(dict.fromkeys(ids))

    def verify(self, initial: bytes) -> tuple[World, dict[str, list[Any]], str, str]:
        out = super().verify(initial)
        self.check_program(initial)
        return out

    def check_program(self, initial: bytes) -> None:
        """The program's write set is what the gold chain's goals act on."""
        if self.sel is None or self.sel.program is None or "ids" not in self.sel.program:
            return
        if sorted(str(i) for i in self.acted_on(initial)) != sorted(str(i) for i in self.sel.program["ids"]):
            raise TaskRejected(Reason.PROGRAM_MISMATCH, "the gold chain acts on other records than the program picks")
        created = self.created_matches(initial)
        if created:
            raise TaskRejected(Reason.ORDER_DEPENDENT, f"the request creates {created[0]}, which the selection "
                               "also covers: the outcome would depend on the order of the writes")

    def created_matches(self, initial: bytes) -> list[Any]:
        """Records the gold chain creates that the selection's program also picks in the world after it
        (see :func:`~scaleenv.synth.tasks.validity.created_in_selection`)."""
        assert self.sel is not None
        before = World.from_snapshot(self.spec, initial)
        after = World.from_snapshot(self.spec, initial)
        try:
            run_chain(after, self.spec, self.chain)
            return created_in_selection(self.sel.program, before, after)
        except (ChainError, ScaleEnvError) as e:
            raise TaskRejected(Reason.VERIFICATION_FAILED, str(e)) from None
        finally:
            before.close()
            after.close()


def say(value: object) -> str:
    return human(str(value)) if isinstance(value, str) else spoken(value)
