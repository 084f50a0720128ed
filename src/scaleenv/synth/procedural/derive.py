"""Derive a DomainSpec (tables + 25-70 tools with contracts) from a blueprint and a seed.

Different seeds pick different naming variants and drop some optional tools; the same seed always
gives the same spec.
"""

from __future__ import annotations

import random
import re
from typing import Any, Literal, cast

from scaleenv.env.language import article
from scaleenv.formats.domain import (
    Column,
    Contract,
    DomainSpec,
    ErrorSpec,
    Generated,
    Param,
    ParamType,
    Policy,
    PolicyRule,
    Returns,
    Table,
    ToolSpec,
)
from scaleenv.synth.procedural.blueprint import (
    Blueprint,
    BlueprintColumn,
    Entity,
    Lifecycle,
    Operation,
    Transition,
    entity_rules,
)
from scaleenv.synth.procedural.invariants import blueprint_invariants

MIN_TOOLS, MAX_TOOLS = 25, 70

_VERBS = {
    "get": ["get", "get", "lookup", "fetch"],
    "search": ["search", "find"],
    "create": ["create", "add", "register"],
    "update": ["update", "change", "set"],
    "delete": ["delete", "remove"],
    "list": ["list"],
    "count": ["count"],
    "total": ["total", "sum"],
}
_PARAM_TYPES: dict[str, ParamType] = {"text": "string", "integer": "integer", "real": "number", "boolean": "boolean",
                "date": "string", "datetime": "string", "json": "string"}
_FORMAT_HINT = {"date": " (YYYY-MM-DD)", "datetime": " (YYYY-MM-DDTHH:MM:SS)", "json": " (a JSON document)"}
_OPTIONAL_FAMILIES = {"update", "list", "count", "total", "search"}
_PERSON_COLUMN = re.compile(r"^(email|e_mail|email_address|phone|phone_number|mobile|full_name|first_name|last_name)$")


def _pick(rng: random.Random, options: str | list[str]) -> str:
    if isinstance(options, str):
        return options
    return options[rng.randrange(len(options))]


def _human(name: str) -> str:
    return name.replace("_", " ")


class _Deriver:
    def __init__(self, bp: Blueprint, seed: int):
        self.bp = bp
        self.rng = random.Random(f"{bp.name}:{seed}")
        self.verbs = {fam: _pick(self.rng, opts) for fam, opts in _VERBS.items()}
        self.entity_names = {e.name: _pick(self.rng, [e.singular, *e.aliases]) for e in bp.entities}
        self.tables: dict[str, Table] = {}
        self.tools: list[ToolSpec] = []
        self.refs: dict[str, ToolSpec] = {}  # a policy's name for a tool -> the tool (renamed in place)

    # --- tables --------------------------------------------------------------------
    def column(self, ent: Entity, c: BlueprintColumn) -> Column:
        fk = f"{c.ref}.id" if c.ref else None
        match = c.match or ("exempt" if c.auto else "exact")
        enum = c.enum
        if ent.lifecycle and c.name == ent.lifecycle.column:
            enum = list(ent.lifecycle.states)
        return Column(name=c.name, type=c.type, description=c.description, nullable=c.nullable,
                      default=c.default, enum=enum, min=c.min, max=c.max, unique=c.unique,
                      foreign_key=fk, match=match)

    def build_tables(self) -> None:
        for ent in self.bp.entities:
            cols = [Column(name="id", type="text", description=f"Unique {ent.singular} id ({ent.id_prefix}-...)",
                           match="exact")]
            cols += [self.column(ent, c) for c in ent.columns]
            self.tables[ent.name] = Table(name=ent.name, description=ent.description, primary_key="id",
                                          columns=cols)

    # --- helpers -------------------------------------------------------------------
    def sing(self, ent: Entity) -> str:
        return self.entity_names[ent.name]

    def id_param(self, ent: Entity, name: str | None = None) -> Param:
        s = self.sing(ent)
        return Param(name=name or f"{s}_id", type="string", column=f"{ent.name}.id",
                     description=f"The {_human(s)} id, e.g. {ent.id_prefix}-0001.")

    def exists(self, ent: Entity, pname: str) -> Contract:
        return Contract(sql=f'SELECT 1 FROM "{ent.name}" WHERE id = :{pname}', error=f"{self.sing(ent)}_not_found",
                        message=f"No {_human(self.sing(ent))} with id {{{pname}}}.")

    def add(self, tool: ToolSpec, family: str, ent: Entity | None, **meta: object) -> None:
        codes = {c.error for c in tool.preconditions + tool.postconditions}
        known = {e.code for e in tool.errors}
        tool.errors += [ErrorSpec(code=c, description=_human(c).capitalize() + ".") for c in sorted(codes - known)]
        tool.meta.update({"family": family, "entity": ent.name if ent else None, **meta})
        self.tools.append(tool)

    def value_param(self, ent: Entity, c: BlueprintColumn, required: bool, name: str | None = None) -> Param:
        col = self.tables[ent.name].column(c.name)
        assert col is not None
        desc = c.description or f"The {_human(c.name)} of the {_human(self.sing(ent))}"
        ref = self.bp.entity(c.ref) if c.ref else None
        if ref is not None:
            desc = f"The id of the {_human(self.sing(ref))} ({ref.id_prefix}-...)"
        p = Param(name=name or c.name, type=_PARAM_TYPES[c.type], description=desc + _FORMAT_HINT.get(c.type, ""),
                  required=required, column=f"{ent.name}.{c.name}")
        if col.enum:
            p.enum = list(col.enum)
        if c.type in ("integer", "real"):
            p.minimum, p.maximum = c.min, c.max
        return p

    def returns_row(self, ent: Entity, key: str) -> Returns:
        return Returns(description=f"The {_human(self.sing(ent))} record.",
                       query=f'SELECT * FROM "{ent.name}" WHERE id = :{key}', mode="one", table=ent.name)

    # --- generic families ---------------------------------------------------------
    def derive_entity(self, ent: Entity) -> None:
        s, v = self.sing(ent), self.verbs
        key = f"{s}_id"
        lc = ent.lifecycle
        # lookup
        self.add(ToolSpec(
            name=f"{v['get']}_{s}", kind="read", description=f"Get the details of one {_human(s)} by id.",
            parameters=[self.id_param(ent)], preconditions=[self.exists(ent, key)],
            returns=self.returns_row(ent, key)), "get", ent)
        # search
        searchable = [c for c in ent.columns if c.search]
        if searchable:
            conds, params = [], []
            for c in searchable:
                p = self.value_param(ent, c, required=False)
                params.append(p)
                if c.type == "text" and not (c.enum or (lc and c.name == lc.column)):
                    conds.append(f"(:{c.name} IS NULL OR \"{c.name}\" LIKE '%' || :{c.name} || '%')")
                else:
                    conds.append(f"(:{c.name} IS NULL OR \"{c.name}\" = :{c.name})")
            params.append(Param(name="limit", type="integer", required=False, minimum=1, maximum=100,
                                description="Maximum number of results (default 20)."))
            self.add(ToolSpec(
                name=f"{v['search']}_{ent.name}", kind="read",
                description=f"Search {_human(ent.name)} by {', '.join(_human(c.name) for c in searchable)}; "
                            "text filters match substrings, case-insensitively. All filters are optional.",
                parameters=params,
                returns=Returns(description=f"Matching {_human(ent.name)}, ordered by id.", table=ent.name,
                                mode="many", query=f'SELECT * FROM "{ent.name}" WHERE {" AND ".join(conds)} '
                                                   "ORDER BY id LIMIT COALESCE(:limit, 20)")), "search", ent)
        # list by parent
        for c in ent.columns:
            parent = self.bp.entity(c.ref) if c.ref else None
            if parent is None:
                continue
            ps = self.sing(parent)
            pname = c.name
            self.add(ToolSpec(
                name=f"{v['list']}_{ent.name}_by_{c.name.removesuffix('_id')}", kind="read",
                description=f"List the {_human(ent.name)} of {article(_human(ps))}.",
                parameters=[Param(name=pname, type="string", column=f"{ent.name}.{c.name}",
                                  description=f"The {_human(ps)} id, e.g. {parent.id_prefix}-0001.")],
                preconditions=[self.exists(parent, pname)],
                returns=Returns(description=f"The {_human(ent.name)}, ordered by id.", mode="many", table=ent.name,
                                query=f'SELECT * FROM "{ent.name}" WHERE "{c.name}" = :{pname} ORDER BY id')),
                "list", ent, parent=parent.name)
        if ent.create:
            self.derive_create(ent)
        derived = {d.column for d in ent.derived}
        for c in ent.columns:
            if c.mutable and c.name not in derived:
                self.derive_update(ent, c)
        if ent.delete:
            self.derive_delete(ent)
        if lc:
            for t in lc.transitions:
                self.derive_transition(ent, t)
        self.derive_aggregates(ent)

    def derive_create(self, ent: Entity) -> None:
        s = self.sing(ent)
        lc = ent.lifecycle
        params, pre, cols, vals = [], [], ["id"], [":new_id"]
        generated = {"new_id": Generated(kind="next_id", table=ent.name, column="id", prefix=f"{ent.id_prefix}-")}
        derived = {d.column for d in ent.derived}
        for c in ent.columns:
            cols.append(c.name)
            if lc and c.name == lc.column:
                vals.append(f"'{lc.initial}'")
                continue
            if c.name in derived:
                vals.append("0" if c.type in ("integer", "real") else "NULL")  # the world's trigger computes it
                continue
            if lc and c.name in lc.set_in and lc.initial not in lc.set_in[c.name]:
                vals.append("NULL")  # set later, by the transition into a state that carries it
                continue
            if c.auto:
                generated[f"auto_{c.name}"] = Generated(kind=c.auto)
                vals.append(f":auto_{c.name}")
                continue
            optional = c.nullable or c.default is not None
            params.append(self.value_param(ent, c, required=not optional))
            vals.append(f"COALESCE(:{c.name}, {_lit(c.default)})" if c.default is not None else f":{c.name}")
            if c.ref:
                parent = self.bp.entity(c.ref)
                assert parent is not None
                pre.append(Contract(sql=f'SELECT :{c.name} IS NULL OR EXISTS (SELECT 1 FROM "{parent.name}" '
                                        f"WHERE id = :{c.name})",
                                    error=f"{self.sing(parent)}_not_found",
                                    message=f"No {_human(self.sing(parent))} with id {{{c.name}}}."))
            if c.type == "text" and not c.enum and not optional and not c.ref:
                pre.append(_not_blank(c.name, c.name))
            if c.unique:
                pre.append(Contract(sql=f'SELECT NOT EXISTS (SELECT 1 FROM "{ent.name}" WHERE "{c.name}" = :{c.name})',
                                    error=f"duplicate_{c.name}",
                                    message=f"A {_human(s)} with this {_human(c.name)} already exists."))
            if lc:
                pre += _clock_contracts(ent, c.name, f":{c.name}", [lc.initial], generated)
        names = {p.name for p in params}
        for c in ent.columns:
            if isinstance(c.gen, dict) and set(c.gen) == {"by"} and c.name in names and c.gen["by"][0] in names:
                pre.append(_by_contract(c, f":{c.name}", f":{c.gen['by'][0]}", ""))
        for group in ent.unique_together:
            if all(g in names for g in group):
                cond = " AND ".join(f'"{g}" = :{g}' for g in group)
                pre.append(Contract(sql=f'SELECT NOT EXISTS (SELECT 1 FROM "{ent.name}" WHERE {cond})',
                                    error=f"duplicate_{group[-1]}",
                                    message=f"Another {_human(s)} already has this {', '.join(map(_human, group))}."))
        source = f"(SELECT {', '.join(f'{v} AS {_q(c)}' for c, v in zip(cols, vals, strict=True))}) AS {_q(ent.name)}"
        pre += _rule_contracts(ent, source, generated, self.bp)
        effect = f'INSERT INTO "{ent.name}" ({", ".join(f"{chr(34)}{c}{chr(34)}" for c in cols)}) ' \
                 f"VALUES ({', '.join(vals)})"
        post = [Contract(sql=f'SELECT 1 FROM "{ent.name}" WHERE id = :new_id', error="create_failed",
                         message=f"The {_human(s)} was not created.")]
        self.add(ToolSpec(
            name=f"{self.verbs['create']}_{s}", kind="write",
            description=f"Create a new {_human(s)}. {ent.description}".strip(),
            parameters=params, generated=generated, preconditions=pre, effects=[effect], postconditions=post,
            returns=self.returns_row(ent, "new_id")), "create", ent, phrasings=ent.create_phrasings)

    def derive_update(self, ent: Entity, c: BlueprintColumn) -> None:
        s = self.sing(ent)
        key = f"{s}_id"
        p = self.value_param(ent, c, required=True, name=f"new_{c.name}")
        pre = [self.exists(ent, key)]
        if c.ref:
            parent = self.bp.entity(c.ref)
            assert parent is not None
            pre.append(Contract(sql=f'SELECT 1 FROM "{parent.name}" WHERE id = :new_{c.name}',
                                error=f"{self.sing(parent)}_not_found",
                                message=f"No {_human(self.sing(parent))} with id {{new_{c.name}}}."))
        if c.type == "text" and not c.enum and not c.nullable and not c.ref:
            pre.append(_not_blank(f"new_{c.name}", c.name))
        if c.unique:
            pre.append(Contract(
                sql=f'SELECT NOT EXISTS (SELECT 1 FROM "{ent.name}" WHERE "{c.name}" = :new_{c.name} AND id != :{key})',
                error=f"duplicate_{c.name}", message=f"Another {_human(s)} already has this {_human(c.name)}."))
        generated: dict[str, Generated] = {}
        for group in ent.unique_together:
            if c.name in group:
                others = [g for g in group if g != c.name]
                cond = " AND ".join([f'o."{g}" IS t."{g}"' for g in others] + [f'o."{c.name}" = :new_{c.name}'])
                pre.append(Contract(
                    sql=f'SELECT NOT EXISTS (SELECT 1 FROM "{ent.name}" o, "{ent.name}" t WHERE t.id = :{key} '
                        f"AND o.id != :{key} AND {cond})",
                    error=f"duplicate_{c.name}",
                    message=f"Another {_human(s)} already has this {', '.join(map(_human, group))}."))
        if isinstance(c.gen, dict) and set(c.gen) == {"by"}:
            pre.append(_by_contract(c, f":new_{c.name}", _q(c.gen["by"][0]), f' FROM "{ent.name}" WHERE id = :{key}'))
        lc = ent.lifecycle
        if lc:
            pre += _clock_contracts(ent, c.name, f":new_{c.name}", None, generated, key)
            if c.name in lc.set_in:
                pre.append(Contract(
                    sql=f'SELECT ("{lc.column}" IN ({", ".join(map(_lit, lc.set_in[c.name]))})) = '
                        f'(:new_{c.name} IS NOT NULL) FROM "{ent.name}" WHERE id = :{key}',
                    error="invalid_status",
                    message=f"The {_human(c.name)} can only be set when the {_human(s)} is "
                            f"{' or '.join(lc.set_in[c.name])}."))
            finals = _final_states(lc)
            if finals:
                pre.append(Contract(
                    sql=f'SELECT "{lc.column}" NOT IN ({", ".join(map(_lit, finals))}) FROM "{ent.name}" '
                        f"WHERE id = :{key}",
                    error="invalid_status", message=f"This {_human(s)} is closed and can no longer be changed."))
        if entity_rules(ent, self.bp):
            row = ", ".join(f":new_{c.name} AS {_q(c.name)}" if x.name == c.name else _q(x.name)
                            for x in [BlueprintColumn(name="id"), *ent.columns])
            pre += _rule_contracts(ent, f"(SELECT {row} FROM {_q(ent.name)} WHERE id = :{key}) AS {_q(ent.name)}",
                                   generated, self.bp)
        self.add(ToolSpec(
            name=f"{self.verbs['update']}_{s}_{c.name}", kind="write",
            description=f"Change the {_human(c.name)} of {article(_human(s))}.",
            parameters=[self.id_param(ent), p], preconditions=pre, generated=generated,
            effects=[f'UPDATE "{ent.name}" SET "{c.name}" = :new_{c.name} WHERE id = :{key}'],
            postconditions=[Contract(sql=f'SELECT "{c.name}" IS :new_{c.name} FROM "{ent.name}" WHERE id = :{key}',
                                     error="update_failed", message="The change did not apply.")],
            returns=self.returns_row(ent, key)), "update", ent, column=c.name, **({"staff": True} if c.staff else {}))

    def derive_delete(self, ent: Entity) -> None:
        s = self.sing(ent)
        key = f"{s}_id"
        pre = [self.exists(ent, key)]
        for other in self.bp.entities:
            for c in other.columns:
                if c.ref == ent.name:
                    pre.append(Contract(
                        sql=f'SELECT NOT EXISTS (SELECT 1 FROM "{other.name}" WHERE "{c.name}" = :{key})',
                        error="has_dependents",
                        message=f"This {_human(s)} still has {_human(other.name)} and cannot be deleted."))
        self.add(ToolSpec(
            name=f"{self.verbs['delete']}_{s}", kind="write", description=f"Delete {article(_human(s))} permanently.",
            parameters=[self.id_param(ent)], preconditions=pre,
            effects=[f'DELETE FROM "{ent.name}" WHERE id = :{key}'],
            postconditions=[Contract(sql=f'SELECT NOT EXISTS (SELECT 1 FROM "{ent.name}" WHERE id = :{key})',
                                     error="delete_failed")],
            returns=Returns(description="Confirmation.", query=f"SELECT :{key} AS deleted_id", mode="one")),
            "delete", ent)

    def derive_transition(self, ent: Entity, t: Transition) -> None:
        lc = ent.lifecycle
        assert lc is not None
        s = self.sing(ent)
        key = f"{s}_id"
        verb = _pick(self.rng, t.verb)
        sets = [f'"{lc.column}" = {_lit(t.to)}']
        generated = {}
        for col, val in t.set.items():
            if val in ("now", "today"):
                generated[f"auto_{col}"] = Generated(kind=val)
                sets.append(f'"{col}" = :auto_{col}')
            else:
                sets.append(f'"{col}" = {_lit(val)}')
        for col, states in lc.set_in.items():
            if col in t.set:
                continue
            if t.to in states and _col(ent, col).ref:
                continue  # a link is set by the tool that picks it (blueprint_problems: never entered here unset)
            if t.to in states:
                kind: Literal["now", "today"] = "now" if _col(ent, col).type == "datetime" else "today"
                generated[f"auto_{col}"] = Generated(kind=kind)
                sets.append(f'"{col}" = COALESCE("{col}", :auto_{col})')
            else:
                sets.append(f'"{col}" = NULL')
        clock_pre: list[Contract] = []
        for col in {**lc.future_in, **lc.past_in}:
            clock_pre += _clock_contracts(ent, col, f'(SELECT "{col}" FROM "{ent.name}" WHERE id = :{key})',
                                          [t.to], generated)
        if entity_rules(ent, self.bp):
            after = {lc.column: _lit(t.to)}
            for col, val in t.set.items():
                after[col] = f":auto_{col}" if val in ("now", "today") else _lit(val)
            row = ", ".join(f"{after[x.name]} AS {_q(x.name)}" if x.name in after else _q(x.name)
                            for x in [BlueprintColumn(name="id"), *ent.columns])
            clock_pre += _rule_contracts(
                ent, f"(SELECT {row} FROM {_q(ent.name)} WHERE id = :{key}) AS {_q(ent.name)}", generated, self.bp)
        froms = ", ".join(map(_lit, t.from_))
        effects = [f'UPDATE "{ent.name}" SET {", ".join(sets)} WHERE id = :{key}'] + self.follow_parents(ent, t, key)
        self.add(ToolSpec(
            name=f"{verb}_{s}", kind="write",
            description=(t.description or f"{_human(verb).capitalize()} {article(_human(s))}.")
            + f" Only allowed when its {_human(lc.column)} is {' or '.join(t.from_)}; it becomes {t.to}.",
            parameters=[self.id_param(ent)], generated=generated,
            preconditions=[self.exists(ent, key), Contract(
                sql=f'SELECT "{lc.column}" IN ({froms}) FROM "{ent.name}" WHERE id = :{key}', error="invalid_status",
                message=f"This {_human(s)} is not in a state that allows this (needs {' or '.join(t.from_)}).")]
            + clock_pre,
            effects=effects,
            postconditions=[Contract(sql=f'SELECT "{lc.column}" = {_lit(t.to)} FROM "{ent.name}" WHERE id = :{key}',
                                     error="transition_failed")],
            returns=self.returns_row(ent, key)), "transition", ent, to=t.to, state_column=lc.column,
            phrasings=[with_request(p.replace(f"{{{ent.singular}_id}}", f"{{{key}}}"), t.to, ent.name in self.person_tables())
                       for p in t.phrasings], verb=verb,
            **({"by": t.by} if t.by else {}), **({"staff": True} if t.staff else {}))
        self.refs[f"{ent.name}.{t.verb if isinstance(t.verb, str) else t.verb[0]}"] = self.tools[-1]

    def follow_parents(self, ent: Entity, t: Transition, key: str) -> list[str]:
        """Effects that keep each ``status_agrees`` of ``ent`` when ``t`` takes a row out of its
        states: the parent goes back to ``otherwise`` once no child of it is left in them (a copy is
        no longer on loan when its loan is declared lost)."""
        lc = ent.lifecycle
        out = []
        for k in ent.constraints:
            fk = next((c for c in ent.columns if c.name == k.fk), None)
            parent = self.bp.entity(fk.ref) if fk is not None and fk.ref else None
            if k.kind != "status_agrees" or fk is None or lc is None or parent is None or parent.lifecycle is None:
                continue
            if t.to in k.states or not set(t.from_) & set(k.states):
                continue
            pcol = _q(parent.lifecycle.column)
            back = k.follow.get(t.to) or k.otherwise or parent.lifecycle.initial
            out.append(f"UPDATE {_q(parent.name)} SET {pcol} = {_lit(back)} WHERE id = (SELECT {_q(fk.name)} "
                       f"FROM {_q(ent.name)} WHERE id = :{key}) AND {pcol} IN ({', '.join(map(_lit, k.parent_states))}) "
                       f"AND NOT EXISTS (SELECT 1 FROM {_q(ent.name)} c WHERE c.{_q(fk.name)} = {_q(parent.name)}.id "
                       f"AND c.{_q(lc.column)} IN ({', '.join(map(_lit, k.states))}))")
        return out

    def derive_aggregates(self, ent: Entity) -> None:
        lc = ent.lifecycle
        for c in ent.columns:
            if not (c.enum or (lc and c.name == lc.column)):
                continue
            col = self.tables[ent.name].column(c.name)
            assert col is not None
            self.add(ToolSpec(
                name=f"{self.verbs['count']}_{ent.name}_by_{c.name}", kind="read",
                description=f"Count the {_human(ent.name)} with a given {_human(c.name)}.",
                parameters=[Param(name=c.name, type="string", enum=list(col.enum or []), column=f"{ent.name}.{c.name}",
                                  description=f"The {_human(c.name)} to count.")],
                returns=Returns(description="The number of matching records.", mode="scalar",
                                query=f'SELECT COUNT(*) FROM "{ent.name}" WHERE "{c.name}" = :{c.name}')),
                "count", ent, column=c.name)
        for c in ent.columns:
            if not c.sum:
                continue
            for fk in ent.columns:
                parent = self.bp.entity(fk.ref) if fk.ref else None
                if parent is None:
                    continue
                self.add(ToolSpec(
                    name=f"{self.verbs['total']}_{c.name}_by_{fk.name.removesuffix('_id')}", kind="read",
                    description=f"Total {_human(c.name)} over the {_human(ent.name)} of {article(_human(self.sing(parent)))}.",
                    parameters=[Param(name=fk.name, type="string", column=f"{ent.name}.{fk.name}",
                                      description=f"The {_human(self.sing(parent))} id.")],
                    preconditions=[self.exists(parent, fk.name)],
                    returns=Returns(description="The rounded total.", mode="scalar",
                                    query=f'SELECT ROUND(COALESCE(SUM("{c.name}"), 0), 2) FROM "{ent.name}" '
                                          f'WHERE "{fk.name}" = :{fk.name}')),
                    "total", ent, column=c.name, parent=parent.name)

    # --- explicit operations and views ---------------------------------------------
    def derive_operation(self, op: Operation, family: str) -> None:
        params = []
        for p in op.params:
            column = p.column or (f"{p.ref}.id" if p.ref else None)
            desc = p.description
            if p.ref and not desc:
                ref = self.bp.entity(p.ref)
                desc = f"The {_human(self.sing(ref))} id." if ref else ""
            params.append(Param(name=p.name, type=p.type, description=desc or _human(p.name), required=p.required,
                                enum=p.enum, items=p.items, minimum=p.minimum, maximum=p.maximum, column=column))
        returns = Returns(**op.returns) if op.returns else Returns(mode="none")
        errors = [ErrorSpec(code=k, description=v) for k, v in sorted(op.errors.items())]
        self.add(ToolSpec(
            name=_pick(self.rng, op.name), kind=op.kind, description=op.description, parameters=params,
            generated={k: Generated(**v) for k, v in op.generated.items()}, preconditions=list(op.preconditions),
            effects=list(op.effects), postconditions=list(op.postconditions), returns=returns, errors=errors),
            family, self.bp.entity(returns.table) if returns.table else None, phrasings=op.phrasings,
            answer=op.answer, **({"staff": True} if op.staff else {}))
        self.refs[op.name if isinstance(op.name, str) else op.name[0]] = self.tools[-1]

    def run(self) -> DomainSpec:
        self.build_tables()
        for ent in self.bp.entities:
            self.derive_entity(ent)
        for op in self.bp.operations:
            self.derive_operation(op, "operation")
        for view in self.bp.views:
            self.derive_operation(view, "view")
        self.resolve_name_clashes()
        self.trim()
        return DomainSpec(name=self.bp.name, description=self.bp.description, keywords=list(self.bp.keywords),
                          tables=list(self.tables.values()), tools=self.tools, clock=self.bp.clock,
                          invariants=blueprint_invariants(self.bp), policy=self.policy(),
                          meta={"title": self.bp.title, "entity_names": self.entity_names, "backend": "procedural",
                                "singular": {e.name: e.singular for e in self.bp.entities},
                                "display": {e.name: e.display for e in self.bp.entities if e.display},
                                "aliases": {e.name: list(e.aliases) for e in self.bp.entities if e.aliases},
                                **({"silent": silent} if (silent := [e.name for e in self.bp.entities
                                                                      if not e.speaks]) else {})})

    def policy(self) -> Policy | None:
        """The blueprint's policy with the names this seed gave the tools it governs (a rule whose
        tools were all trimmed keeps no predicate to check)."""
        if not self.bp.policy:
            return None
        kept = {id(t) for t in self.tools}
        rules = []
        for r in self.bp.policy:
            tools = [self.refs[ref].name for ref in r.tools if ref in self.refs and id(self.refs[ref]) in kept]
            rules.append(PolicyRule(name=r.name, kind=r.kind, text=r.text, tools=tools,
                                    forbid=r.forbid if tools else None, unless=r.unless if tools else None,
                                    reason=r.reason,
                                    enforced_by_tool=r.enforced_by_tool))
        return Policy(rules=rules)

    def resolve_name_clashes(self) -> None:
        """A derived name may equal an explicit one on some seeds (``find`` + ``listings`` = an operation
        named ``find_listings``): explicit operations and views keep their names; the derived tool takes
        another verb of its family, or a suffix."""
        explicit = {t.name for t in self.tools if t.meta["family"] in ("operation", "view")}
        used: set[str] = set()
        for tool in self.tools:
            fam = tool.meta["family"]
            if fam not in ("operation", "view") and (tool.name in explicit or tool.name in used):
                verb = self.verbs.get(fam)
                rest = tool.name[len(verb) + 1 :] if verb and tool.name.startswith(verb + "_") else tool.name
                options = [f"{v}_{rest}" for v in dict.fromkeys(_VERBS.get(fam, []))] + [f"{tool.name}_record"]
                tool.name = next((n for n in options if n not in explicit and n not in used), f"{tool.name}_2")
            used.add(tool.name)

    def person_tables(self) -> set[str]:
        """The entities that are people (a customer, a member, a couple): they have an e-mail, a phone
        or a full name, by which a person is found when the policy asks to verify them."""
        return {e.name for e in self.bp.entities
                if any(_PERSON_COLUMN.search(c.name) for c in e.columns)}

    def rule_listers(self) -> set[str]:
        """The list tools that show the records a policy rule reads through a key ("FROM interviews WHERE
        application_id = :id"): without them the agent could not see why a request is refused."""
        forbids = [r.forbid for r in self.bp.policy if r.forbid]
        out = set()
        for t in self.tools:
            if t.meta["family"] != "list" or not t.parameters:
                continue
            pattern = re.compile(rf"\bFROM\s+\"?{t.meta['entity']}\"?\s+WHERE\b.*\b{t.parameters[0].name}\s*=\s*:",
                                 re.IGNORECASE | re.DOTALL)
            if any(pattern.search(f) for f in forbids):
                out.add(t.name)
        return out

    def trim(self) -> None:
        """Drop a seeded share of optional tools (and enough to respect MAX_TOOLS). A search over a
        table of people stays: the identity rule of the policy needs a way to find the user."""
        people = self.person_tables()
        needed = self.rule_listers()
        optional = [t for t in self.tools if t.meta["family"] in _OPTIONAL_FAMILIES and t.name not in needed
                    and not (t.meta["family"] == "search" and t.meta.get("entity") in people)]
        self.rng.shuffle(optional)
        budget = max(0, len(self.tools) - MIN_TOOLS)
        n_drop = min(budget, max(len(self.tools) - MAX_TOOLS, round(len(optional) * 0.15)))
        drop = {t.name for t in optional[:n_drop]}
        self.tools = [t for t in self.tools if t.name not in drop]


def with_request(phrasing: str, to: str, person: bool = False) -> str:
    """A transition's phrasing that says what happened ("Order {order_id} just left the warehouse.")
    with the request said too ("... Please mark it shipped."): a customer never leaves the agent to
    guess that a statement is an instruction."""
    text = phrasing.strip()
    asks = re.search(r"\b(please|can you|could you|would you|i'd like|i want|i need|we need|you can|go ahead)\b",
                     text, re.IGNORECASE) or "?" in text
    first = re.match(r"\s*([A-Za-z']+)", text)
    imperative = bool(first and first.group(1).lower() in _IMPERATIVE_VERBS)
    # "the pitch is frozen; postpone fixture ...", "Budget freeze: put project ... on hold"
    clause = re.search(r"[;,:] *(?:then )?([a-z0-9']+)\b", text)
    imperative = imperative or bool(clause and clause.group(1) in _IMPERATIVE_VERBS)
    if asks or imperative:
        return phrasing
    return f"{text.rstrip('.!')}; please mark {'them' if person else 'it'} {_human(to)}."


_IMPERATIVE_VERBS = {
    "cancel", "close", "end", "keep", "renew", "update", "change", "delete", "remove", "freeze", "unfreeze", "pause", "resume",
    "reactivate", "suspend", "confirm", "approve", "reject", "book", "mark", "register", "record", "log", "set",
    "add", "put", "make", "give", "send", "move", "open", "reopen", "sign", "enroll", "enrol", "reserve", "schedule",
    "assign", "pay", "refund", "issue", "void", "start", "stop", "block", "unblock", "archive", "restore", "publish",
    "pull", "file", "submit", "check", "return", "report", "transfer", "switch", "upgrade", "downgrade", "lock",
    "unlock", "turn", "drop", "call", "let", "create", "flag", "note", "release", "hold", "place", "accept",
    "decline", "withdraw", "retire", "reinstate", "expire", "halt", "decommission", "disable", "enable", "run",
    "relocate", "recall", "terminate", "settle", "finalize", "postpone", "rescind", "offboard", "kick", "write",
    "bring", "reconnect", "reset", "dump", "charge", "comp", "grade", "redeem", "apply", "save", "bookmark", "link",
    "seat", "enter", "tip", "leave", "rate", "offer", "sow", "store", "prescribe", "86", "show", "ship", "dispatch",
    "deliver", "allocate", "hand", "resolve", "discontinue", "collect", "no-show", "take", "secure", "discard",
    "complete", "finish", "activate", "deactivate", "extend", "revoke", "dismiss",
}


def _not_blank(param: str, column: str) -> Contract:
    return Contract(sql=f"SELECT length(trim(:{param})) > 0", error="invalid_value",
                    message=f"The {_human(column)} must not be blank.")


def _by_contract(c: BlueprintColumn, value: str, key: str, source: str) -> Contract:
    """``value`` is one of the values a ``{by: [key, {...}]}`` generator allows for ``key``."""
    by, table = cast(dict[str, Any], c.gen)["by"]  # a {by: [key, {...}]} generator (the caller checked)
    cases = " ".join(f"WHEN {_lit(k)} THEN {value} IN ({', '.join(map(_lit, v))})" for k, v in table.items())
    return Contract(sql=f"SELECT {value} IS NULL OR CASE {key} {cases} ELSE 1 END{source}", error=f"invalid_{c.name}",
                    message=f"That {_human(c.name)} does not fit the {_human(by)}.")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rule_contracts(ent: Entity, source: str, generated: dict[str, Generated],
                    bp: Blueprint | None = None) -> list[Contract]:
    """Preconditions that the row a tool is about to write obeys the entity's ``rules`` (its
    ``constraints`` included): each rule is evaluated over ``source``, a one-row subquery aliased as
    the entity's table."""
    out = []
    for i, r in enumerate(entity_rules(ent, bp)):
        cond = f"COALESCE(({r.check}), 0)"
        if r.when:
            cond = f"(NOT COALESCE(({r.when}), 0) OR {cond})"
        sql = f"SELECT {cond} FROM {source}"
        for clock in ("now", "today"):
            if re.search(rf":{clock}\b", sql):
                generated[f"clock_{clock}"] = Generated(kind=clock)
                sql = re.sub(rf":{clock}\b", f":clock_{clock}", sql)
        out.append(Contract(sql=sql, error=f"rule_{r.name or i + 1}",
                            message=(r.description or r.check).capitalize() + "."))
    return out


def _col(ent: Entity, name: str) -> BlueprintColumn:
    return next(c for c in ent.columns if c.name == name)


def _clock_contracts(ent: Entity, column: str, value: str, states: list[str] | None,
                     generated: dict[str, Generated], key: str | None = None) -> list[Contract]:
    """Preconditions that keep ``column`` on the right side of the clock (``future_in``/``past_in``).

    ``states`` are the states the row will be in (a create or a transition); ``None`` means "its
    current state", read from the row ``key`` (an update of the column itself)."""
    lc = ent.lifecycle
    assert lc is not None
    out = []
    for mapping, op, word in ((lc.future_in, ">=", "today or later"), (lc.past_in, "<=", "today or earlier")):
        if column not in mapping:
            continue
        if op == ">=" and value.startswith(":") and _col(ent, column).type == "datetime":
            # a new time the caller gives lies ahead (no match scheduled for 07:30 at 09:00); a row already
            # in a future state may sit earlier today (an 08:30 appointment checked in at 09:00)
            generated["clock_now"] = Generated(kind="now")
            cond = f"{value} IS NULL OR datetime({value}) >= datetime(:clock_now)"
            word = "now or later"
        elif op == "<=" and _col(ent, column).type == "datetime":
            # a past state's time has come (an interview set for 19:30 today is not completed at 09:00),
            # as the world's invariant reads it
            generated["clock_now"] = Generated(kind="now")
            cond = f"{value} IS NULL OR datetime({value}) <= datetime(:clock_now)"
            word = "now or earlier"
        else:
            generated["clock_today"] = Generated(kind="today")
            cond = f"{value} IS NULL OR substr({value}, 1, 10) {op} :clock_today"
        if states is None:
            sql = (f'SELECT "{lc.column}" NOT IN ({", ".join(map(_lit, mapping[column]))}) OR {cond} '
                   f'FROM "{ent.name}" WHERE id = :{key}')
        elif any(s in mapping[column] for s in states):
            sql = f"SELECT {cond}"
        else:
            continue
        out.append(Contract(sql=sql, error="out_of_time",
                            message=f"The {_human(column)} must be {word} for {article(_human(ent.singular))} in this state."))
    return out


def _final_states(lc: Lifecycle) -> list[str]:
    sources = {s for t in lc.transitions for s in t.from_}
    return [s for s in lc.states if s not in sources and s != lc.initial]


def _lit(v: object) -> str:
    from scaleenv.world.ddl import sql_literal

    return sql_literal(v)


def derive_spec(bp: Blueprint, seed: int = 0) -> DomainSpec:
    """The domain spec for ``bp`` under ``seed`` (deterministic). Raises SpecError on a broken blueprint."""
    from scaleenv.errors import SpecError
    from scaleenv.synth.procedural.blueprint import blueprint_problems

    problems = blueprint_problems(bp)
    if problems:
        raise SpecError([(f"{bp.name}.{p}", r) for p, r in problems])
    return _Deriver(bp, seed).run()
