"""Compact text renderings of schemas, tools and rows for prompts (few tokens, all the facts)."""

from __future__ import annotations

import json
import re
from typing import Any

from scaleenv.formats.domain import Column, DomainSpec, Param, Table, ToolSpec
from scaleenv.world.ddl import quote_ident
from scaleenv.world.world import World


def column_line(c: Column, pk: str) -> str:
    parts = [c.name, c.type]
    if c.name == pk:
        parts.append("PK")
    if c.foreign_key:
        parts.append(f"-> {c.foreign_key}")
    if c.nullable:
        parts.append("NULL ok")
    if c.unique:
        parts.append("unique")
    if c.enum:
        parts.append("in [" + ", ".join(map(str, c.enum)) + "]")
    if c.min is not None or c.max is not None:
        parts.append(f"[{'' if c.min is None else f'{c.min:g}'}..{'' if c.max is None else f'{c.max:g}'}]")
    if c.default is not None:
        parts.append(f"default {json.dumps(c.default)}")
    return " ".join(parts)


def table_block(t: Table, unique_together: list[list[str]] | None = None) -> str:
    cols = "; ".join(column_line(c, t.primary_key) for c in t.columns)
    rules = "".join(f"; unique together ({', '.join(g)})" for g in unique_together or [])
    return f"{t.name}: {cols}{rules}"


def summary(text: str, limit: int | None = None) -> str:
    """``text`` whole, or (over ``limit`` characters) its leading whole sentences, else whole words + '...'.

    Never cuts inside a word, so a rule stated late is either there in full or visibly left out.
    """
    text = re.sub(r"\s+", " ", text or "").strip()
    if limit is None or len(text) <= limit:
        return text
    head = text[:limit + 1]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)", head)]
    if ends and ends[-1] >= limit // 2:
        return text[:ends[-1]].rstrip() + " [...]"
    cut = head.rfind(" ")
    return (text[:cut] if cut > 0 else text[:limit]).rstrip(" ,;:") + " [...]"


def and_parents(spec: DomainSpec, names: list[str]) -> list[str]:
    """``names`` and the tables their foreign keys point at (one level), in ``names``' order first."""
    wanted = list(names)
    for n in list(wanted):
        t = spec.table(n)
        for c in t.columns if t else []:
            if c.foreign_key and c.foreign_key.split(".")[0] not in wanted:
                wanted.append(c.foreign_key.split(".")[0])
    return wanted


def tables_text(spec: DomainSpec, names: list[str] | None = None, with_parents: bool = True) -> str:
    wanted = list(names) if names is not None else [t.name for t in spec.tables]
    if with_parents:
        wanted = and_parents(spec, wanted)
    together = (spec.meta or {}).get("unique_together") or {}
    return "\n".join(table_block(t, together.get(t.name)) for t in spec.tables if t.name in wanted)


def rules_text(spec: DomainSpec, names: list[str]) -> str:
    """Per table only what limits a value: links, enums, ranges, uniqueness, optional columns (the
    column names and value formats come with the sample rows shown beside it; every other column
    is NOT NULL)."""
    together = (spec.meta or {}).get("unique_together") or {}
    lines = []
    for t in spec.tables:
        if t.name not in names:
            continue
        parts = []
        for c in t.columns:
            if c.name == t.primary_key:
                continue
            bits = [f"-> {c.foreign_key.split('.')[0]}"] if c.foreign_key else []
            if c.enum:
                bits.append("in [" + ", ".join(map(str, c.enum)) + "]")
            if c.min is not None or c.max is not None:
                bits.append(f"[{'' if c.min is None else f'{c.min:g}'}..{'' if c.max is None else f'{c.max:g}'}]")
            if c.unique:
                bits.append("unique")
            if c.nullable:
                bits.append("NULL ok")
            if bits:
                parts.append(f"{c.name} {' '.join(bits)}")
        parts += [f"unique together ({', '.join(g)})" for g in together.get(t.name) or []]
        lines.append(f"{t.name}: {'; '.join(parts) or '-'}")
    return "\n".join(lines)


def param_sig(p: Param) -> str:
    typ = p.type if p.type != "array" else f"{p.items or 'string'}[]"
    if p.enum:
        typ = "|".join(map(str, p.enum))
    return f"{p.name}{'*' if p.required else ''}:{typ}"


def tool_sig(t: ToolSpec, with_tables: bool = False, tables: list[str] | None = None,
             access: tuple[list[str], list[str]] | None = None) -> str:
    """One line per tool: signature, return, the whole description; optionally its tables, or
    ``access`` = (tables it reads, tables it writes)."""
    params = ", ".join(param_sig(p) for p in t.parameters)
    ret = t.returns.table and t.returns.mode in ("one", "many")
    out = {"one": f"{t.returns.table} row", "many": f"list of {t.returns.table} rows"}.get(t.returns.mode, "")
    ret_text = out if ret else ({"scalar": "a value", "none": "nothing"}.get(t.returns.mode, "a record"))
    line = f"{t.name}({t.kind}): {params} -> {ret_text}"
    if t.description:
        line += f" | {summary(t.description)}"
    if access is not None:
        reads, writes = access
        line += f" | reads: {', '.join(reads) or '-'}; writes: {', '.join(writes) or '-'}"
    elif with_tables and tables:
        line += f" | tables: {', '.join(tables)}"
    return line


def abstract_line(t: dict[str, Any]) -> str:
    params = ", ".join(f"{p['name']}{'*' if p.get('required', True) else ''}:"
                       + ("|".join(map(str, p["enum"])) if p.get("enum") else str(p.get("type", "string")))
                       for p in t.get("parameters", []))
    errors = ", ".join(e["code"] for e in t.get("errors", []))
    return f"{t['name']}({t.get('kind', 'read')}): {summary(t.get('description', ''))} | {params} | {errors}"


def _state_column(table: Table) -> str | None:
    """The column whose values tell a row's state apart (a status or state enum, else any enum)."""
    enums = [c.name for c in table.columns if c.enum]
    return next((n for n in enums if n in ("status", "state")), enums[0] if enums else None)


def sample_rows(world: World, tables: list[str], per_table: int = 3, max_chars: int = 3000,
                keys_only: bool = False, spread: bool = False) -> str:
    """Whole rows only, compactly: per table one line naming its columns, then one JSON array per row
    (every table's first row always, further rows while they fit in ``max_chars``). ``keys_only`` shows a
    row's id and links only (filler whose other values a reader must not copy); ``spread`` shows one row
    of each state (status value) first, so that what a chain can do on the data is visible."""
    heads: dict[str, str] = {}
    by_table: dict[str, list[str]] = {}
    for t in dict.fromkeys(tables):
        table = world.spec.table(t)
        if table is None:
            continue
        pk = quote_ident(world.primary_key(t))
        cols = "*"
        if keys_only:
            cols = ", ".join(quote_ident(c.name) for c in table.columns
                             if c.name == table.primary_key or c.foreign_key)
        order = pk
        state = _state_column(table) if spread else None
        if state:
            order = f"ROW_NUMBER() OVER (PARTITION BY {quote_ident(state)} ORDER BY {pk}), {pk}"
        cur = world.conn.execute(f"SELECT {cols} FROM {quote_ident(t)} ORDER BY {order} LIMIT ?", (per_table,))
        heads[t] = f"{t} ({', '.join(d[0] for d in cur.description)}):"
        by_table[t] = ["  " + json.dumps(list(r), ensure_ascii=False, default=str) for r in cur]
    shown: dict[str, list[str]] = {t: [] for t in by_table}
    used, left = 0, 0
    for i in range(per_table):
        for t, rows in by_table.items():
            if i >= len(rows):
                continue
            if i and used + len(rows[i]) + 1 > max_chars:  # a table's first row is always shown
                left += 1
                continue
            shown[t].append(rows[i])
            used += len(rows[i]) + 1
    # an empty table still shows its columns: prompts that list only a table's rules rely on them
    lines = [x for t in by_table for x in (heads[t], *(shown[t] or ["  (no rows)"]))]
    if left:
        lines.append(f"({left} more row(s) not shown)")
    return "\n".join(lines) if lines else "(none)"


def parse_sample_rows(text: str) -> dict[str, list[dict[str, Any]]]:
    """The rows :func:`sample_rows` shows, back as dicts by table (for tests and tools reading prompts)."""
    out: dict[str, list[dict[str, Any]]] = {}
    cols: list[str] = []
    table = ""
    for line in text.splitlines():
        m = re.match(r"^(\w+) \((.*)\):$", line)
        if m:
            table, cols = m.group(1), [c.strip() for c in m.group(2).split(",")]
            out[table] = []
        elif line.startswith("  [") and table:
            out[table].append(dict(zip(cols, json.loads(line), strict=True)))
    return out


def tool_text(t: dict[str, Any], param_columns: dict[str, str] | None = None) -> str:
    """An abstract tool (the tool-schema agent's JSON) as a few plain lines, every fact kept: kind,
    description, parameters (required*, type, enum, range, the column it carries, description),
    output, pre/postconditions and error codes."""
    cols = param_columns or {}
    lines = [f"{t['name']} ({t.get('kind', 'read')}): {summary(t.get('description', ''))}"]
    for p in t.get("parameters", []):
        typ = str(p.get("type", "string")) + (f" of {p['items']}" if p.get("items") else "")
        bits = [typ + ("" if p.get("required", True) else ", optional")]
        if p.get("enum"):
            bits.append("one of " + "|".join(map(str, p["enum"])))
        if p.get("minimum") is not None or p.get("maximum") is not None:
            bits.append(f"{'' if p.get('minimum') is None else p['minimum']}..{'' if p.get('maximum') is None else p['maximum']}")
        col = cols.get(f"{t['name']}.{p['name']}")
        if col:
            bits.append(f"= {col}")
        desc = summary(p.get("description", ""))
        star = "*" if p.get("required", True) else ""  # the legend's mark: "* = required"
        lines.append(f"- {p['name']}{star} ({'; '.join(bits)})" + (f": {desc}" if desc else ""))
    if t.get("output"):
        lines.append(f"output: {summary(str(t['output']))}")
    for key in ("preconditions", "postconditions"):
        if t.get(key):
            lines.append(f"{key}: " + "; ".join(summary(str(x)) for x in t[key]))
    errors = [f"{e['code']} ({summary(e.get('description', ''))})" if e.get("description") else e["code"]
              for e in t.get("errors", [])]
    lines.append("errors: " + (", ".join(errors) or "none"))
    return "\n".join(lines)


def next_ids(world: World, tables: list[str], skip: int = 0) -> dict[str, str]:
    """The first free ``PREFIX-NNNN`` id of every table (``skip`` more numbers ahead)."""
    from scaleenv.synth.tasks.state import next_id

    out = {}
    for t in tables:
        if world.spec.table(t) is None:
            continue
        nid = next_id(world, t)
        if skip:
            m = re.match(r"^(.*?)(\d+)$", nid)
            if m:
                nid = f"{m.group(1)}{int(m.group(2)) + skip:0{len(m.group(2))}d}"
        out[t] = nid
    return out


def next_ids_text(ids: dict[str, str]) -> str:
    return ", ".join(f"{t} {v}" for t, v in ids.items()) or "(none)"


def jdump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False, default=str)
