"""The ``bulk`` family: one request over every record of the user's that meets a condition ("cancel
every pending appointment of mine"), 2-5 of them by tier, and no other record changed.

The condition is an enum value the targets share; the user's other records under the same parent
hold another value (look-alikes the gold chain must leave alone). The query program that defines
the write set is recorded and checked against the records the gold chain acts on.
"""

from __future__ import annotations

import re
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import Column, Table, ToolSpec
from scaleenv.formats.task import Call, Task
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.phrasing import selection_sentence
from scaleenv.synth.tasks.families.selection import (
    Selection,
    SelectionBuilder,
    enum_columns,
    lister_for,
    other_value,
    qualified,
    say,
    shift_dates,
)
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.synth.tasks.instruction import EntityRef
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.validity import call_effect, lookalikes
from scaleenv.world.world import World

COUNTS = {"easy": (2, 2), "medium": (2, 2), "hard": (2, 3), "expert": (3, 5)}
"""How many records the condition covers, per tier."""


_PLURAL_OF = {"is": "are", "'s": "'re", "was": "were", "has": "have", "isn't": "aren't", "wasn't": "weren't",
              "hasn't": "haven't", "doesn't": "don't", "does": "do", "goes": "go"}
_CLAUSE_IT = re.compile(r"(^|[,;:.]\s+|\b(?:because|since|and|but|so)\s+)([Ii]t)(\s+[a-z']+|'s)\b")
""""it" opening a clause, with the word after it: the subject of that clause ("..., it gives me side effects")."""


def plural_it(text: str) -> str:
    """``text`` said of several records: "it" becomes "them", and "they" where it opens a clause as its
    subject, with its verb ("it gives me side effects" -> "they give me side effects", not "them gives")."""
    def subject(m: re.Match[str]) -> str:
        word = m.group(3).strip()
        if word in _PLURAL_OF:
            verb = _PLURAL_OF[word]
        elif word.endswith("s") and not word.endswith("ss") and word not in _NOT_VERBS and len(word) > 2:
            verb = _plural_verb(word)
        else:
            return m.group(0)
        they = "They" if m.group(2) == "It" else "they"
        return f"{m.group(1)}{they}{'' if verb.startswith(chr(39)) else ' '}{verb}"

    return re.sub(r"\bit\b", "them", _CLAUSE_IT.sub(subject, text))


_NOT_VERBS = frozenset({"always", "unless", "perhaps", "sometimes", "as", "less", "thus", "plus"})


def _plural_verb(verb: str) -> str:
    """A verb in the third person singular made plural: "gives" -> "give", "watches" -> "watch"."""
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if verb.endswith(("ches", "shes", "xes", "sses", "oes", "zes")):
        return verb[:-2]
    return verb[:-1]


class BulkBuilder(SelectionBuilder):
    """Every record of the user's that meets a condition gets the same write."""

    family = "bulk"
    leaf_goals = False
    counts = COUNTS

    @classmethod
    def table_ok(cls, ctx: DomainContext, table: Table) -> bool:
        return any(c.enum and len(c.enum) >= 2 and c.match != "exempt" for c in table.columns)

    def __init__(self, ctx: DomainContext, seed: int, attempt: int, config: ChainConfig):
        super().__init__(ctx, seed, attempt, config)
        self.filter: tuple[Column, Any] | None = None
        self.n_targets = 0

    def sibling_count(self, density: int) -> int:
        lo, hi = self.counts.get(self.tier or "medium", (2, 2))
        self.n_targets = self.rng.randint(lo, hi)
        return self.n_targets - 1 + max(1, density)

    def unique_display(self, table: Table, avoid: set[Any]) -> Any:
        """A name from the world that no record of ``table`` shares (a further target must not be a
        look-alike of another record)."""
        display = self.ctx.display_column(table.name)
        if display is None:
            return None
        for having in ("COUNT(*) = 1", "COUNT(*) >= 1"):  # a shared name's records become look-alikes
            names = [r[0] for r in self.world.conn.execute(
                f'SELECT "{display}" FROM "{table.name}" WHERE "{display}" IS NOT NULL GROUP BY 1 HAVING {having} '
                f'ORDER BY 1 LIMIT 200')]
            names = [n for n in names if n not in avoid]
            if names:
                return self.rng.choice(names)
        return None

    def add_lookalikes(self) -> None:
        """The records that share a further target's name count as look-alikes too."""
        super().add_lookalikes()
        if self.sel is None:
            return
        keep = {r["id"] for r in self.sel.targets}
        for other in self.extra_targets:
            row = self.world.row(self.sel.table, other["id"])
            extra = [i for i in lookalikes(self.world, self.ctx, self.sel.table, row) if i not in keep] if row else []
            if extra:
                self.distractor_ids.setdefault(self.sel.table, set()).update(extra)

    def shape(self, table: Table, target: dict[str, Any], rows: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        filters = enum_columns(table, target)
        if not filters:
            raise TaskRejected(Reason.NO_SELECTION, f"no condition to pick {table.name} by")
        plain = [c for c in filters if c.name not in ("status", "state")]
        f = self.rng.choice(plain) if plain and self.rng.random() < 0.6 else self.rng.choice(filters)
        fv = target[f.name]
        self.filter = (f, fv)
        same, looks = rows[: self.n_targets - 1], rows[self.n_targets - 1:]
        display = self.ctx.display_column(table.name)
        used = {target.get(display)} if display else set()
        for i, r in enumerate(same):
            shift_dates(table, r, i + 1, self.spec.clock)  # no two targets at the same time
            if display:
                name = self.unique_display(table, used)
                if name is None:
                    raise TaskRejected(Reason.NO_SELECTION, f"no name for another {table.name} record")
                r[display] = name
                used.add(name)
        for r in looks:
            r[f.name] = other_value(f, fv, self.rng)
        return looks, same

    def select(self, table: Table, target: dict[str, Any], siblings: list[dict[str, Any]]) -> Selection:
        assert self.filter is not None
        f, fv = self.filter
        found = lister_for(self.ctx, table.name)
        assert found is not None
        _, fk, parent_table = found
        want = sorted(str(r["id"]) for r in [target, *self.extra_targets])
        hits = sorted(str(r["id"]) for r in siblings if r.get(f.name) == fv)
        if hits != want or len(hits) == len(siblings):
            raise TaskRejected(Reason.SELECTION_NOT_UNIQUE, f"the condition covers {hits}, not {want}")
        pk = table.primary_key
        sql = f'SELECT "{pk}" FROM "{table.name}" WHERE "{fk}" = :parent AND "{f.name}" = :value ORDER BY "{pk}"'
        params = {"parent": target[fk], "value": fv}
        ids = [r[0] for r in self.run_program(sql, params)]
        targets = [self.world.row(table.name, i) for i in ids]
        where = self.parent_part(parent_table) or " of mine"
        held = qualified(self.noun(table.name), f, fv)
        if " that is " in held:  # "every shipment of mine that is out for delivery"
            before, after = held.split(" that is ", 1)
            phrase = f"{before}{where} that is {after}"
        elif " with " in held:  # "every rental of mine with no insurance"
            before, after = held.split(" with ", 1)
            phrase = f"{before}{where} with {after}"
        else:
            phrase = f"{held}{where}"
        return Selection(table.name, fk, target[fk], [r for r in targets if r is not None], phrase,
                         {"sql": sql, "params": params, "world": "initial", "ids": ids})

    def add_read_goal(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> bool:
        if not self.goals:
            raise TaskRejected(Reason.NO_GOAL_TOOLS, "a bulk request is a write")
        return super().add_read_goal(scratch, tool, args)

    def add_write_goal(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> None:
        super().add_write_goal(scratch, tool, args)
        self.apply_to_rest(scratch, tool)

    def apply_to_rest(self, scratch: World, tool: ToolSpec) -> None:
        """The last goal's write on every further target, in id order (each must change something)."""
        focus = self.ctx.focus(tool)
        assert focus is not None
        goal, call = self.goals[-1], self.chain[-1]
        for row in sorted(self.extra_targets, key=lambda r: str(r["id"])):
            args = {**goal.args, focus[0]: row["id"]}
            snap = scratch.snapshot()
            try:
                changed = call_effect(self.spec, scratch, snap, tool, args)
            except ToolError as e:
                raise TaskRejected(Reason.BULK_TARGET_FAILED, f"{tool.name} on {row['id']}: {e}") from None
            if not changed:
                raise TaskRejected(Reason.BULK_TARGET_FAILED, f"{tool.name} changes nothing on {row['id']}")
            self.effects.append(changed)
            self.chain.append(Call(tool=tool.name, args={**call.args, focus[0]: self.target_ref(row)}, purpose="goal"))

    def make_task(self, initial_hash: str, expected_hash: str, gold_keys: dict[str, list[Any]], tools: list[str],
                  level: str, density: int, withheld: int) -> Task:
        """The goals over the set are also reported done by their records' plural or the condition
        ("your three rabbits were transferred")."""
        task = super().make_task(initial_hash, expected_hash, gold_keys, tools, level, density, withheld)
        if self.sel is not None and self.filter is not None:
            noun, value = self.noun(self.sel.table), say(self.filter[1])
            words = [f"{noun}s", value, f"{value}s", f"{value} {noun}s"]
            for o in task.user_profile.objectives:
                if o.kind == "write" and ("every" in o.text.lower() or "each of them" in o.text.lower()):
                    o.subject = list(dict.fromkeys([*o.subject, *words]))
        return task

    def user_side(self, root: EntityRef | None, withheld: int) -> tuple[str, dict[str, Any]]:
        """A set is asked for by its condition, so the user knows no one member's name: "task title: Set
        up alerting" beside "close every medium-priority task" reads as which of them (play round 33)."""
        leaf = self.entities.get(self.sel.table) if self.sel is not None else None
        if leaf is None or leaf is root:
            return super().user_side(root, withheld)
        display, leaf.display = leaf.display, None
        try:
            return super().user_side(root, withheld)
        finally:
            leaf.display = display

    def write_sentences(self) -> None:
        if self.sel is None:
            return
        leaf = self.entities.get(self.sel.table)
        first = True
        for g in self.goals:
            if g.sentence or leaf is None or leaf not in g.refs.values():
                continue
            subject = f"every {self.sel.phrase}" if first else "each of them"
            text = selection_sentence(g, leaf, subject, self.entities, self.spec, self.me(), self.rng,
                                      later="them" if first else "it")
            # "discard each of them, I won't send them"; a dictated "Love it." in quotes stays as it is
            parts = text.split('"')
            g.sentence = '"'.join(plural_it(p) if i % 2 == 0 else p for i, p in enumerate(parts))
            first = False
