"""Phase 1, design: the domain profile, the tool-schema agent and the database agent.

The tool-schema agent writes abstract tools (descriptions, typed flat parameters, outputs,
natural-language pre/postconditions, declared errors). The database agent derives the tables, the
tool -> tables map, the parameter -> column map and a match policy for every column; its output is
checked by the core spec validator and every problem goes back to it in a repair prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from scaleenv.formats.domain import TOOL_NAME_RE, DomainSpec, Table
from scaleenv.llm.session import Scoped
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.render import abstract_line
from scaleenv.synth.llm.seedrows import id_prefixes
from scaleenv.validation.spec import spec_problems

_TYPE_ALIASES = {"str": "string", "text": "string", "int": "integer", "float": "number", "double": "number",
                 "decimal": "number", "real": "number", "bool": "boolean", "list": "array", "date": "string",
                 "datetime": "string", "object": "string"}
_PARAM_TYPES = {"string", "integer", "number", "boolean", "array"}
_COMPATIBLE = {"string": {"text", "date", "datetime", "json"}, "integer": {"integer", "real"},
               "number": {"real", "integer"}, "boolean": {"boolean"}, "array": {"text", "json", "integer", "real"}}


@dataclass
class DomainProfile:
    name: str  # directory name (snake_case)
    title: str
    description: str
    keywords: list[str] = field(default_factory=list)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_") or "domain"


def domain_profile(ask: Scoped, name: str, description: str = "", keywords: list[str] | None = None) -> DomainProfile:
    """Name, title, description and keywords of a domain; the domain agent fills what is missing."""
    key = slug(name)
    title = name.replace("_", " ").strip().title()
    if description:
        return DomainProfile(key, title, description, list(keywords or []))

    def check(obj: dict[str, Any]) -> list[str]:  # an object: ask.json expects one
        problems = []
        if not isinstance(obj.get("description"), str) or len(obj["description"].strip()) < 10:
            problems.append("'description' must be one or two sentences")
        if not isinstance(obj.get("keywords"), list):
            problems.append("'keywords' must be a list of strings")
        return problems

    obj = ask.json("domain", render("domain", name=name.replace("_", " ")), validate=check)
    return DomainProfile(key, str(obj.get("title") or title), obj["description"].strip(),
                         [str(k) for k in obj.get("keywords", [])][:12])


# --- tool-schema agent -------------------------------------------------------------------------


def normalize_tools(obj: object) -> tuple[list[dict[str, Any]], list[str]]:
    """Clean the tool-schema agent's reply (lenient about spellings) and list what is wrong."""
    problems: list[str] = []
    raw = obj.get("tools") if isinstance(obj, dict) else obj
    if not isinstance(raw, list):
        return [], ["the reply must be an object with a list 'tools'"]
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, t in enumerate(raw):
        path = f"tools[{i}]"
        if not isinstance(t, dict):
            problems.append(f"{path}: must be an object")
            continue
        name = str(t.get("name", "")).strip()
        path = f"tools[{i}]({name})"
        if not TOOL_NAME_RE.match(name):
            problems.append(f"{path}.name: must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$")
            continue
        if name in seen:
            problems.append(f"{path}: duplicate tool name")
            continue
        seen.add(name)
        kind = str(t.get("kind", "")).lower()
        if kind not in ("read", "write"):
            problems.append(f"{path}.kind: must be 'read' or 'write'")
        desc = str(t.get("description") or "").strip()
        if not desc:
            problems.append(f"{path}.description: is empty")
        params = []
        pnames: set[str] = set()
        for j, p in enumerate(t.get("parameters") or []):
            if not isinstance(p, dict):
                problems.append(f"{path}.parameters[{j}]: must be an object")
                continue
            pname = str(p.get("name", "")).strip()
            if not TOOL_NAME_RE.match(pname) or pname in pnames:
                problems.append(f"{path}.parameters[{j}]: name {pname!r} is not a unique identifier")
                continue
            pnames.add(pname)
            typ = str(p.get("type", "string")).lower()
            typ = _TYPE_ALIASES.get(typ, typ)
            if typ not in _PARAM_TYPES:
                problems.append(f"{path}.parameters[{j}]({pname}).type: {typ!r} is not one of {sorted(_PARAM_TYPES)}")
                continue
            q: dict[str, Any] = {"name": pname, "type": typ, "description": str(p.get("description") or pname),
                                 "required": bool(p.get("required", True))}
            if typ == "array":
                items = _TYPE_ALIASES.get(str(p.get("items") or "string").lower(), str(p.get("items") or "string"))
                q["items"] = items if items in _PARAM_TYPES - {"array"} else "string"
            if isinstance(p.get("enum"), list) and p["enum"] and typ != "array":
                q["enum"] = list(p["enum"])
            for b in ("minimum", "maximum"):
                if isinstance(p.get(b), int | float) and not isinstance(p.get(b), bool):
                    q[b] = p[b]
            params.append(q)
        errors: list[dict[str, str]] = []
        for e in t.get("errors") or []:
            code = e.get("code") if isinstance(e, dict) else e
            code = re.sub(r"[^a-z0-9_]+", "_", str(code or "").lower()).strip("_")
            if code and code not in {x["code"] for x in errors}:
                errors.append({"code": code, "description": str(e.get("description", "")) if isinstance(e, dict)
                               else ""})
        for p in params:  # every id parameter, an optional filter too, can be rejected as unknown
            if p["name"].endswith("_id") and not _not_found_code(p["name"], errors):
                entity = _record_noun(p["name"])
                errors.append({"code": f"{entity}_not_found",
                               "description": f"No {entity.replace('_', ' ')} has the given {p['name']}."})
        tools.append({"name": name, "kind": kind if kind in ("read", "write") else "read", "description": desc,
                      "parameters": params, "output": str(t.get("output") or t.get("returns") or ""),
                      "preconditions": [str(x) for x in t.get("preconditions") or []],
                      "postconditions": [str(x) for x in t.get("postconditions") or []], "errors": errors})
    return tools, problems


_ROLE_WORDS = r"^(new|source|target|parent|old|current|to|from|start|end|origin|destination)_"


def _record_noun(param: str) -> str:
    """The record an id parameter names, less its role word: to_station_id -> station."""
    return re.sub(_ROLE_WORDS, "", param[:-3]) or "record"


def _not_found_code(param: str, errors: list[dict[str, str]]) -> str:
    """The tool's own not-found code for id parameter ``param``: ``<record>_not_found`` for the parameter's
    name less ``_id`` or any tail of it (station_not_found serves to_station_id), '' if it has none."""
    words = param[:-3].split("_")
    tails = {"_".join(words[i:]) for i in range(len(words))} | {_record_noun(param)}
    codes = {e["code"] for e in errors}
    exact = [f"{t}_not_found" for t in sorted(tails, key=len, reverse=True) if f"{t}_not_found" in codes]
    noun = _record_noun(param)
    return (exact or sorted(c for c in codes if c.endswith("_not_found") and noun in c) or [""])[0]


def same_record_code(code: str, codes: set[str]) -> str:
    """The declared not-found code that ``code`` repeats for one record, else ``code``: a code agent that
    writes ``to_station_not_found`` where the tool declares ``station_not_found`` means the same rule."""
    if code in codes or not code.endswith("_not_found"):
        return code
    words = code[: -len("_not_found")].split("_")
    tails = [f"{'_'.join(words[i:])}_not_found" for i in range(1, len(words))]
    return next((t for t in tails if t in codes), code)


def design_tools(ask: Scoped, profile: DomainProfile, cfg: SynthConfig) -> list[dict[str, Any]]:
    """The tool-schema agent: ``cfg.min_tools``..``cfg.max_tools`` abstract tools."""
    result: dict[str, list[dict[str, Any]]] = {}

    def check(obj: object) -> list[str]:
        tools, problems = normalize_tools(obj)
        if not cfg.min_tools <= len(tools) <= cfg.max_tools:
            problems.append(f"there are {len(tools)} valid tools; write between {cfg.min_tools} and {cfg.max_tools}")
        if tools and not any(t["kind"] == "write" for t in tools):
            problems.append("there are no write tools")
        result["tools"] = tools
        return problems

    messages = render("tool_schema", name=profile.name, title=profile.title, description=profile.description,
                      keywords=", ".join(profile.keywords) or "-", min_tools=cfg.min_tools, max_tools=cfg.max_tools,
                      target=min(cfg.max_tools, max(cfg.min_tools, cfg.target_tools)))
    ask.json("tool_schema", messages, validate=check)
    return result["tools"]


# --- database agent ------------------------------------------------------------------------------


_PREFIX = re.compile(r"[A-Z]{2,4}-")
_EXAMPLE_ID = re.compile(r"\b([A-Z]{2,4}-)\d{2,}\b")


def _described_prefixes(tables: list[Table]) -> dict[str, str]:
    """Prefixes the schema shows in its id column's description ("Permit id, e.g. PRM-0001")."""
    out = {}
    for t in tables:
        col = t.column(t.primary_key)
        m = _EXAMPLE_ID.search(col.description or "") if col is not None else None
        if m:
            out[t.name] = m.group(1)
    return out


def assign_prefixes(tables: list[Table], singular: dict[str, str], declared: dict[str, str]) -> dict[str, str]:
    """The schema's own id prefixes where it gives them; derived, distinct ones for the rest."""
    out = dict(declared)
    used = set(declared.values())
    derived = id_prefixes(tables, singular)
    for t in tables:
        if t.name in out:
            continue
        cand, k = derived[t.name], 2
        while cand in used:
            cand = f"{derived[t.name][:2]}{k}-"
            k += 1
        out[t.name] = cand
        used.add(cand)
    return {t.name: out[t.name] for t in tables}


@dataclass
class DatabaseDesign:
    tables: list[Table]
    meta: dict[str, Any]
    tool_tables: dict[str, list[str]]
    param_columns: dict[str, str]


def parse_database(obj: object, tools: list[dict[str, Any]], profile: DomainProfile,
                   cfg: SynthConfig) -> tuple[DatabaseDesign | None, list[str]]:
    """Turn the database agent's reply into tables + maps, with every problem the validator finds."""
    problems: list[str] = []
    if not isinstance(obj, dict) or not isinstance(obj.get("tables"), list):
        return None, ["the reply must be an object with a list 'tables'"]
    tables: list[Table] = []
    singular: dict[str, str] = {}
    display: dict[str, str] = {}
    examples: dict[str, list[Any]] = {}
    declared: dict[str, str] = {}
    together: dict[str, list[list[str]]] = {}
    independent: dict[str, list[str]] = {}
    for i, t in enumerate(obj["tables"]):
        if not isinstance(t, dict):
            problems.append(f"tables[{i}]: must be an object")
            continue
        t = dict(t)
        name = str(t.get("name", ""))
        path = f"tables[{i}]({name})"
        if t.get("singular"):
            singular[name] = str(t.pop("singular"))
        else:
            t.pop("singular", None)
        disp = t.pop("display", None)
        if isinstance(disp, str) and disp:
            display[name] = disp
        prefix = t.pop("id_prefix", None)
        if prefix is not None:
            if isinstance(prefix, str) and _PREFIX.fullmatch(prefix.strip().upper().rstrip("-") + "-"):
                declared[name] = prefix.strip().upper().rstrip("-") + "-"
            else:
                problems.append(f"{path}.id_prefix: must be 2 to 4 capital letters and a dash, like 'PET-'")
        groups = t.pop("unique_together", None)
        if groups:
            if not (isinstance(groups, list) and all(isinstance(g, list) and len(g) >= 2 and all(
                    isinstance(x, str) for x in g) for g in groups)):
                problems.append(f"{path}.unique_together: must be a list of column-name lists (2 or more each)")
            else:
                together[name] = [list(g) for g in groups]
        t.setdefault("primary_key", "id")
        if t["primary_key"] != "id":
            problems.append(f"{path}.primary_key: must be the column 'id'")
        cols = []
        for c in t.get("columns") or []:
            if isinstance(c, dict):
                c = dict(c)
                if c.pop("independent", False) is True:
                    independent.setdefault(name, []).append(str(c.get("name")))
                ex = c.pop("examples", None)
                if isinstance(ex, list) and ex:
                    examples[f"{name}.{c.get('name')}"] = [v for v in ex if isinstance(v, str | int | float)][:8]
                if isinstance(c.get("type"), str):
                    c["type"] = {"string": "text", "varchar": "text", "int": "integer", "float": "real",
                                 "number": "real", "bool": "boolean", "timestamp": "datetime"}.get(
                        c["type"].lower(), c["type"].lower())
            cols.append(c)
        t["columns"] = cols
        try:
            table = Table.model_validate(t)
        except ValidationError as e:
            for err in e.errors()[:5]:
                problems.append(f"{path}.{'.'.join(map(str, err['loc']))}: {err['msg']}")
            continue
        pk = table.column("id")
        if pk is None:
            problems.append(f"{path}: needs a primary key column named 'id'")
        elif pk.type != "text":
            problems.append(f"{path}.columns(id): the id column must have type text")
        tables.append(table)
    if not cfg.min_tables <= len(tables) <= cfg.max_tables:
        problems.append(f"there are {len(tables)} tables; keep between {cfg.min_tables} and {cfg.max_tables}")
    if problems:
        return None, problems
    spec = DomainSpec(name=profile.name, tables=tables)
    problems += [f"{p}: {r}" for p, r in spec_problems(spec)]
    names = {t.name for t in tables}
    for tname, d in display.items():
        t = spec.table(tname)
        if t is not None and t.column(d) is None:
            problems.append(f"tables({tname}).display: {d!r} is not a column")
    for tname, groups in together.items():
        t = spec.table(tname)
        for g in groups:
            bad = [c for c in g if t is not None and t.column(c) is None]
            if bad:
                problems.append(f"tables({tname}).unique_together: {bad} are not columns")
    for tname, cols in independent.items():
        t = spec.table(tname)
        links = {c.name for c in t.columns if c.foreign_key} if t is not None else set()
        bad = [c for c in cols if c not in links]
        if bad:
            problems.append(f"tables({tname}).columns{bad}: \"independent\" is only for a link (a foreign_key column)")
    for tname, pre in _described_prefixes(tables).items():
        declared.setdefault(tname, pre)
    dupes = sorted({p for p in declared.values() if list(declared.values()).count(p) > 1})
    if dupes:
        problems.append(f"id_prefix: {dupes} given to more than one table; every table needs its own")
    by_name = {t["name"]: t for t in tools}
    raw_tt = obj.get("tool_tables")
    tool_tables: dict[str, list[str]] = {}
    if not isinstance(raw_tt, dict):
        problems.append("'tool_tables' must map every tool to the tables it uses")
        raw_tt = {}
    for tool in tools:
        ts = raw_tt.get(tool["name"])
        if not isinstance(ts, list) or not ts:
            problems.append(f"tool_tables: tool {tool['name']} is missing")
            continue
        bad = [x for x in ts if x not in names]
        if bad:
            problems.append(f"tool_tables[{tool['name']}]: unknown table(s) {bad}")
        tool_tables[tool["name"]] = [x for x in ts if x in names]
    raw_pc = obj.get("param_columns")
    if not isinstance(raw_pc, dict):
        problems.append("'param_columns' must map 'tool.param' to 'table.column'")
        raw_pc = {}
    param_columns: dict[str, str] = {}
    flagged: set[str] = set()
    for key, ref in raw_pc.items():
        tname, _, pname = str(key).partition(".")
        owner = by_name.get(tname)
        param = next((p for p in owner["parameters"] if p["name"] == pname), None) if owner else None
        flagged.add(str(key))
        if param is None:
            problems.append(f"param_columns[{key}]: no such tool parameter")
            continue
        ref_table, _, col = str(ref).partition(".")
        ref_tab = spec.table(ref_table)
        column = ref_tab.column(col) if ref_tab else None
        if column is None:
            problems.append(f"param_columns[{key}]: {ref!r} is not a known table.column")
            continue
        if column.type not in _COMPATIBLE.get(param["type"], set()):
            problems.append(f"param_columns[{key}]: a {param['type']} parameter cannot carry {ref} ({column.type})")
            continue
        param_columns[str(key)] = str(ref)
    for tool in tools:
        for p in tool["parameters"]:
            key = f"{tool['name']}.{p['name']}"
            if p["name"].endswith("_id") and key not in flagged:
                problems.append(f"param_columns: id parameter {key} must map to the id column it refers to")
    if problems:
        return None, problems
    meta = {"singular": singular, "display": display, "examples": examples,
            "id_prefix": assign_prefixes(tables, singular, declared), "tool_tables": tool_tables}
    if together:
        meta["unique_together"] = together
    if independent:
        meta["independent_links"] = independent
    return DatabaseDesign(tables, meta, tool_tables, param_columns), []


def design_database(ask: Scoped, profile: DomainProfile, tools: list[dict[str, Any]],
                    cfg: SynthConfig) -> DatabaseDesign:
    """The database agent, with the core validator's problems fed back (``cfg.schema_rounds``)."""
    result: dict[str, DatabaseDesign | None] = {}

    def check(obj: object) -> list[str]:
        design, problems = parse_database(obj, tools, profile, cfg)
        result["design"] = design
        return problems

    messages = render("database", name=profile.name, title=profile.title, description=profile.description,
                      tools="\n".join(abstract_line(t) for t in tools), min_tables=cfg.min_tables,
                      max_tables=cfg.max_tables)
    ask.json("database", messages, validate=check, rounds=cfg.schema_rounds)
    design = result["design"]
    assert design is not None  # ask.json returns only once check found no problems, i.e. parsed a design
    return design
