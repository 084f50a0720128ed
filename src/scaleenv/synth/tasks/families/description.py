"""The ``description`` family: the user names the target by what it is about, never by its id or a
fact that is unique to it ("my vaccination appointment with Dr. Lee for Rex").

The description is one attribute (medium tier) or two (hard and expert): an enum value of the
target, or the name of a record it refers to (its vet, its tour). Look-alikes are built so that each
attribute alone matches more than one of the user's records and only the whole description matches
the target; a referred record is named by its name, so the agent must look it up.
"""

from __future__ import annotations

import re
from typing import Any

from scaleenv.formats.domain import Column, Table
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.selection import (
    Selection,
    SelectionBuilder,
    col_words,
    enum_columns,
    is_state,
    lister_for,
    other_value,
    qualified,
    say,
)
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.instruction import human
from scaleenv.synth.tasks.reasons import Reason


class DescriptionBuilder(SelectionBuilder):
    """Identification by description: attributes that jointly single the target out."""

    family = "description"

    @classmethod
    def table_ok(cls, ctx: DomainContext, table: Table) -> bool:
        found = lister_for(ctx, table.name)
        parent_fk = found[1] if found else None
        refs = [c for c in table.columns if c.foreign_key and c.name != parent_fk
                and ctx.display_column(c.foreign_key.split(".")[0]) is not None]
        enums = [c for c in table.columns if c.enum and len(c.enum) >= 2 and c.match != "exempt"]
        return len(refs) + len(enums) >= 1

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.attrs: list[Column] = []

    def referred(self, c: Column) -> tuple[str, str] | None:
        """(table, display column) of the record a foreign key column refers to, when the user can
        name it and the agent can look it up by id."""
        if not c.foreign_key:
            return None
        t = c.foreign_key.split(".")[0]
        display = self.ctx.display_column(t)
        getter = self.ctx.tool_by_family("get", t)
        if display is None or getter is None or not getter.parameters:
            return None
        return t, display

    def candidates(self, table: Table, target: dict[str, Any]) -> list[Column]:
        found = lister_for(self.ctx, table.name)
        parent_fk = found[1] if found else None
        refs = [c for c in table.columns if c.name != parent_fk and target.get(c.name) is not None
                and self.referred(c) is not None and c.match != "exempt"]
        return refs + enum_columns(table, target)

    def value(self, c: Column, row: dict[str, Any]) -> Any:
        """What the user says for ``c`` of ``row``: the referred record's name, or the value."""
        ref = self.referred(c)
        if ref is None or row.get(c.name) is None:
            return row.get(c.name)
        other = self.world.row(ref[0], row[c.name])
        return other.get(ref[1]) if other else None

    def alternative(self, c: Column, target: dict[str, Any]) -> Any:
        """Another value for ``c``: another enum value, or a record of another name."""
        ref = self.referred(c)
        if ref is None:
            return other_value(c, target[c.name], self.rng)
        t, display = ref
        name = self.value(c, target)
        pk = self.world.primary_key(t)
        ids = [r[0] for r in self.world.conn.execute(
            f'SELECT "{pk}" FROM "{t}" WHERE "{display}" IS NOT NULL AND "{display}" != ? ORDER BY 1 LIMIT 50', (name,))]
        return self.rng.choice(ids) if ids else None

    def shape(self, table: Table, target: dict[str, Any], rows: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        cands = self.candidates(table, target)
        self.rng.shuffle(cands)
        cands.sort(key=lambda c: self.referred(c) is None)  # a referred name first: it takes a look-up
        want = 1 if self.tier == "medium" else 2
        if len(cands) < want:
            raise TaskRejected(Reason.NO_SELECTION, f"too few attributes describe {table.name}")
        self.attrs = cands[:want]
        for i, r in enumerate(rows):
            # two attributes: the first look-alike differs in the second only, the next in the first
            # only, the rest in both; one attribute: every look-alike differs in it
            differ = [a for j, a in enumerate(self.attrs) if len(self.attrs) == 1 or i >= 2 or j != i]
            for a in differ:
                alt = self.alternative(a, target)
                if alt is None:
                    raise TaskRejected(Reason.NO_SELECTION, f"no other value for {a.name}")
                r[a.name] = alt
        return rows, []

    def select(self, table: Table, target: dict[str, Any], siblings: list[dict[str, Any]]) -> Selection:
        found = lister_for(self.ctx, table.name)
        assert found is not None
        _, fk, parent_table = found
        want = {a.name: self.value(a, target) for a in self.attrs}
        if any(v is None for v in want.values()):
            raise TaskRejected(Reason.NO_SELECTION, "the target lacks a described value")

        def matches(row: dict[str, Any], attrs: list[Column]) -> bool:
            return all(self.value(a, row) == want[a.name] for a in attrs)

        hits = [r["id"] for r in siblings if matches(r, self.attrs)]
        if hits != [target["id"]]:
            raise TaskRejected(Reason.SELECTION_NOT_UNIQUE, f"the description matches {hits}")
        if len(self.attrs) > 1 and any(sum(matches(r, [a]) for r in siblings) < 2 for a in self.attrs):
            raise TaskRejected(Reason.SELECTION_NOT_UNIQUE, "one attribute alone singles the target out")
        for a in self.attrs:
            ref = self.referred(a)
            if ref is not None:  # the agent names the referred record by looking it up
                getter = self.ctx.tool_by_family("get", ref[0])
                assert getter is not None
                listed = self.outputs[self.refs[table.name]["$ref"]]
                where = self.pick_where(listed, target, table.name)
                self.call_read(getter, {getter.parameters[0].name: {"$ref": self.refs[table.name]["$ref"],
                                                                     "field": a.name, "where": where}},
                               f"look up the {human(self.ctx.singular(ref[0]))}")
        pk = table.primary_key
        joins, conds, params = [], [f't."{fk}" = :parent'], {"parent": target[fk]}
        for i, a in enumerate(self.attrs):
            ref = self.referred(a)
            if ref is None:
                conds.append(f't."{a.name}" = :v{i}')
            else:
                joins.append(f'JOIN "{ref[0]}" r{i} ON r{i}."{self.world.primary_key(ref[0])}" = t."{a.name}"')
                conds.append(f'r{i}."{ref[1]}" = :v{i}')
            params[f"v{i}"] = want[a.name]
        sql = f'SELECT t."{pk}" FROM "{table.name}" t {" ".join(joins)} WHERE {" AND ".join(conds)} ORDER BY 1'
        sql = sql.replace("t  WHERE", "t WHERE")
        ids = [r[0] for r in self.run_program(sql, params)]
        if ids != [target["id"]]:
            raise TaskRejected(Reason.PROGRAM_MISMATCH, f"the description's program picks {ids}")
        return Selection(table.name, fk, target[fk], [target], self.phrase(table, want) + self.parent_part(parent_table),
                         {"sql": sql, "params": params, "world": "initial", "ids": ids})

    def phrase(self, table: Table, want: dict[str, Any]) -> str:
        """The description: a state said as a person says it ("my accepted transfer", "my order that is
        out for delivery"), the other attributes after ``with`` ("with vet Janice Daniels"); a referred
        record named by a sentence of its own is quoted ("with post "Arrive full speak."")."""
        noun = self.noun(table.name)
        states = [a for a in self.attrs if is_state(a) and self.referred(a) is None]
        rest = [a for a in self.attrs if a not in states]
        head = qualified(noun, states[0], want[states[0].name]) if states else noun
        said = []
        for a in rest:
            v = want[a.name]
            if self.referred(a) is None:
                said.append(f"{col_words(a)} {say(v)}")
            else:
                text = str(v)
                # a sentence ("Arrive full speak population goal."), not a name ("Dr. Elizabeth Barron")
                quoted = bool(re.search(r"[a-z]{3}[.!?;:] \S", text)) or len(text.split()) > 5 \
                    or (text.endswith((".", "!", "?")) and len(text.split()) > 2)
                said.append(f'{col_words(a)} "{text}"' if quoted else f"{col_words(a)} {text}")
        if not said:
            return head
        if " that is " in head:  # "my order with restaurant Luigi's that is out for delivery"
            before, after = head.split(" that is ", 1)
            return f"{before} with {' and '.join(said)} that is {after}"
        return f"{head} with {' and '.join(said)}"
