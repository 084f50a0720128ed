"""Phase 1, implementation: the code agent, the test agent and the debug agent.

For every abstract tool the code agent writes contracts and effects in SQL (or Python over the
world API) and the test agent writes a matched fixture with positive and negative cases. The tool is
then judged in the sandbox by the procedural tester (positive tests plus one negative per
precondition) and by the agent's cases; each test is a Success, an Anticipated rejection or an
Unexpected failure. On any unexpected failure (or a static problem: SQL that does not prepare, an
import, a schema change) the debug agent reads the log and repairs the code or the fixture, for at
most ``debug_rounds`` rounds. Tools that never pass are dropped and reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from scaleenv.errors import ScaleEnvError
from scaleenv.formats.domain import (
    Contract,
    DomainSpec,
    ErrorSpec,
    Generated,
    Implementation,
    Param,
    Returns,
    ToolSpec,
)
from scaleenv.llm.base import LLMOutputError
from scaleenv.llm.session import Scoped
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.design import same_record_code
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.render import (
    and_parents,
    jdump,
    next_ids,
    next_ids_text,
    sample_rows,
    tables_text,
    tool_text,
)
from scaleenv.tools.sandbox import vet_tool
from scaleenv.tools.sandboxed_tests import test_tool_sandboxed
from scaleenv.tools.testing import UNEXPECTED, TestResult, ToolReport
from scaleenv.validation.spec import spec_problems
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World

ToolProgress = Callable[[int, int], None]
"""Called with (tools built, tools in all) as each tool is done."""


@dataclass
class ToolBuild:
    name: str
    tool: ToolSpec | None
    report: ToolReport
    admitted: bool
    rounds: int
    history: list[dict[str, Any]] = field(default_factory=list)
    # the rows its tests passed on and the arguments of its positive cases: {"rows": ..., "args": [...]}
    fixture: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.name, "admitted": self.admitted, "rounds": self.rounds, "history": self.history}


# --- turning replies into a ToolSpec -----------------------------------------------------------


def _contracts(raw: list[object] | None, default_error: str, path: str, problems: list[str]) -> list[Contract]:
    out = []
    for i, c in enumerate(raw or []):
        if isinstance(c, str):
            c = {"sql": c}
        if not isinstance(c, dict) or not isinstance(c.get("sql"), str) or not c["sql"].strip():
            problems.append(f"{path}[{i}]: must be an object with 'sql'")
            continue
        out.append(Contract(sql=c["sql"].strip().rstrip(";"), error=str(c.get("error") or default_error),
                            message=str(c.get("message") or "")))
    return out


def make_tool(abstract: dict[str, Any], impl: dict[str, Any], param_columns: dict[str, str],
              tables: list[str] | None = None) -> tuple[ToolSpec | None, list[str]]:
    """The ToolSpec of ``abstract`` implemented by ``impl`` (a code-agent reply), or the problems."""
    problems: list[str] = []
    name = abstract["name"]
    kind = str(impl.get("implementation") or "sql").lower()
    if kind not in ("sql", "python"):
        problems.append(f"implementation: must be 'sql' or 'python', got {kind!r}")
        kind = "sql"
    params = []
    for p in abstract["parameters"]:
        params.append(Param(name=p["name"], type=p["type"], description=p.get("description", ""),
                            required=p.get("required", True), enum=p.get("enum"), items=p.get("items"),
                            minimum=p.get("minimum"), maximum=p.get("maximum"),
                            column=param_columns.get(f"{name}.{p['name']}")))
    generated: dict[str, Generated] = {}
    raw_gen = impl.get("generated") or {}
    if not isinstance(raw_gen, dict):
        problems.append("generated: must be an object")
        raw_gen = {}
    for k, v in raw_gen.items():
        try:
            generated[str(k)] = Generated.model_validate(v)
        except ValidationError as e:
            problems.append(f"generated.{k}: {e.errors()[0]['msg']}")
    pre = _contracts(impl.get("preconditions"), "precondition_failed", "preconditions", problems)
    post = _contracts(impl.get("postconditions"), "postcondition_failed", "postconditions", problems)
    effects = impl.get("effects") or []
    if isinstance(effects, list):  # {"sql": "..."} objects are read as their SQL (a common slip)
        effects = [e["sql"] if isinstance(e, dict) and isinstance(e.get("sql"), str) and len(e) <= 2 else e
                   for e in effects]
    if not isinstance(effects, list) or not all(isinstance(s, str) for s in effects):
        problems.append("effects: must be a list of SQL strings")
        effects = []
    effects = [s.strip().rstrip(";") for s in effects if s.strip()]
    raw_ret = impl.get("returns") or {}
    if isinstance(raw_ret, str):
        raw_ret = {"query": raw_ret}
    try:
        returns = Returns.model_validate({k: v for k, v in raw_ret.items()
                                          if k in ("query", "mode", "table", "description")})
    except (ValidationError, AttributeError) as e:
        problems.append(f"returns: {e.errors()[0]['msg'] if isinstance(e, ValidationError) else 'must be an object'}")
        returns = Returns(mode="none")
    if not returns.query:
        returns = returns.model_copy(update={"mode": "none"})
    if returns.query:
        returns = returns.model_copy(update={"query": returns.query.strip().rstrip(";")})
    source = impl.get("source")
    if kind == "python" and not (isinstance(source, str) and source.strip()):
        problems.append("source: a python implementation needs the source of run(db, args)")
    errors = [ErrorSpec(code=e["code"], description=e.get("description", "")) for e in abstract.get("errors", [])]
    declared = {e.code for e in errors}
    # one code per not-found rule: a role-named repeat of a declared code (to_station_not_found) is that code
    pre = [c.model_copy(update={"error": same_record_code(c.error, declared)}) for c in pre]
    for c in pre + post:
        if c.error not in declared:
            errors.append(ErrorSpec(code=c.error, description=error_description(c.message, c.error)))
            declared.add(c.error)
    if problems:
        return None, problems
    try:
        tool = ToolSpec(name=name, description=abstract["description"], kind=abstract["kind"], parameters=params,
                        generated=generated, returns=returns, preconditions=pre, effects=effects,
                        postconditions=post, errors=errors,
                        implementation=Implementation(kind="python" if kind == "python" else "sql",
                                                      source=source if kind == "python" else None),
                        meta={"output": abstract.get("output", ""), "tables": list(tables or []),
                              "pre_text": abstract.get("preconditions", []),
                              "post_text": abstract.get("postconditions", [])})
    except ValidationError as e:
        return None, [f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5]]
    return tool, []


def static_problems(tables_spec: DomainSpec, tool: ToolSpec) -> list[str]:
    spec = tables_spec.model_copy(update={"tools": [tool]})
    problems = [f"{p.split(')', 1)[-1].lstrip('.') or p}: {r}" for p, r in spec_problems(spec)]
    if not problems:
        problems += vet_tool(spec, tool)
    if tool.kind == "write" and not tool.effects and tool.implementation.kind == "sql":
        problems.append("effects: a write tool implemented in SQL needs at least one effect")
    return problems


# --- agents -------------------------------------------------------------------------------------


def _check_impl(obj: object) -> list[str]:
    if not isinstance(obj, dict):
        return ["the reply must be a JSON object"]
    problems = []
    for key in ("preconditions", "effects", "postconditions"):
        if obj.get(key) is not None and not isinstance(obj[key], list):
            problems.append(f"'{key}' must be a list")
    if obj.get("generated") is not None and not isinstance(obj["generated"], dict):
        problems.append("'generated' must be an object")
    return problems


def _check_tests(obj: object) -> list[str]:
    if not isinstance(obj, dict):
        return ["the reply must be a JSON object with 'fixture' and 'cases'"]
    problems = []
    fixture = obj.get("fixture") or {}
    if not isinstance(fixture, dict) or not all(isinstance(v, list) and all(isinstance(r, dict) for r in v)
                                                for v in fixture.values()):
        problems.append("'fixture' must map table names to lists of row objects")
    cases = obj.get("cases")
    if not isinstance(cases, list) or not cases:
        problems.append("'cases' must be a non-empty list")
    else:
        for i, c in enumerate(cases):
            if not isinstance(c, dict) or c.get("kind") not in ("positive", "negative") or not isinstance(
                    c.get("args", {}), dict):
                problems.append(f"cases[{i}]: needs 'kind' (positive or negative) and an 'args' object")
    return problems


def _check_code_tests(obj: object) -> list[str]:
    """The problems of a reply holding a tool's code and its tests (each part checked as on its own)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("code"), dict) or not isinstance(obj.get("tests"), dict):
        return ['the reply must be one JSON object {"code": {...}, "tests": {"fixture": ..., "cases": [...]}}']
    return [f"code: {p}" for p in _check_impl(obj["code"])] + [f"tests: {p}" for p in _check_tests(obj["tests"])]


def _check_debug(obj: object) -> list[str]:
    if not isinstance(obj, dict):
        return ["the reply must be a JSON object"]
    problems = []
    if obj.get("implementation") is not None:
        problems += [f"implementation: {p}" for p in _check_impl(obj["implementation"])]
    if obj.get("fixture") is not None or obj.get("cases") is not None:
        t = {"fixture": obj.get("fixture") or {}, "cases": obj.get("cases") if obj.get("cases") is not None else [{
            "kind": "positive", "args": {}}]}
        problems += _check_tests(t)
    return problems


_PLACEHOLDER = re.compile(r"""\s*['"(]?\{[^{}]*\}['")]?""")


def error_description(message: str, code: str) -> str:
    """A code-added error's description from its message template: the ``{param}`` placeholders (filled
    per call in the message) dropped, since a description speaks of every call ("Payment amount
    {amount} must be greater than 0." -> "Payment amount must be greater than 0.")."""
    text = re.sub(r"\s+([.,;:!?])", r"\1", _PLACEHOLDER.sub("", message))
    text = re.sub(r"\s+", " ", text).strip()
    return text if re.search(r"[A-Za-z]", text) else code.replace("_", " ")


def with_new_errors(abstract: dict[str, Any], impl: dict[str, Any]) -> dict[str, Any]:
    """``abstract`` with the error codes that ``impl``'s preconditions name and the tool does not have
    yet (described by their message), as :func:`make_tool` adds them to the tool."""
    errors = list(abstract.get("errors") or [])
    codes = {str(e.get("code")) for e in errors}
    for c in impl.get("preconditions") or []:
        code = c.get("error") if isinstance(c, dict) else None
        if isinstance(code, str) and code and same_record_code(code, codes) not in codes:
            codes.add(code)
            errors.append({"code": code, "description": error_description(str(c.get("message") or ""), code)})
    return {**abstract, "errors": errors}


def same_record_errors(tests: dict[str, Any], abstract: dict[str, Any]) -> dict[str, Any]:
    """``tests`` with each case's expected error read as :func:`make_tool` reads the code's (one code per
    not-found rule)."""
    codes = {str(e.get("code")) for e in abstract.get("errors") or []}
    cases = [{**c, "error": same_record_code(c["error"], codes)} if isinstance(c, dict) and isinstance(
        c.get("error"), str) else c for c in tests.get("cases") or []]
    return {**tests, "cases": cases}


class ToolImplementer:
    """Implements and tests the tools of one domain (thread-safe; one tool per call)."""

    def __init__(self, ask: Scoped, title: str, tables_spec: DomainSpec, base: bytes, tool_tables: dict[str, list[str]],
                 param_columns: dict[str, str], cfg: SynthConfig, seed: int = 0):
        self.ask = ask
        self.title = title
        self.spec = tables_spec
        self.base = base
        self.tool_tables = tool_tables
        self.param_columns = param_columns
        self.cfg = cfg
        self.seed = seed
        self.prefixes: dict[str, str] = dict((tables_spec.meta or {}).get("id_prefix") or {})

    def id_examples(self, names: list[str]) -> str:
        """Id examples of the tables a tool touches (``names``), not of the whole database."""
        return ", ".join(f"{t} {self.prefixes[t]}0001" for t in names if t in self.prefixes) or "-"

    def _tool_text(self, abstract: dict[str, Any]) -> str:
        return tool_text(abstract, self.param_columns)

    def _tables(self, name: str) -> tuple[list[str], str]:
        """The tables a tool touches (the database agent's map) and their text, parents included."""
        names = list(self.tool_tables.get(name) or [t.name for t in self.spec.tables])
        return names, tables_text(self.spec, names)

    def code(self, abstract: dict[str, Any]) -> dict[str, Any]:
        """The code agent's reply for one tool. Its prompt shows only the tables the tool touches:
        the code never reads a parent table it does not name (the test prompt shows parents, whose
        ids a fixture references)."""
        names = list(self.tool_tables.get(abstract["name"]) or [t.name for t in self.spec.tables])
        msgs = render("code", title=self.title, tool_name=abstract["name"], tool=self._tool_text(abstract),
                      tables=tables_text(self.spec, names, with_parents=False), id_examples=self.id_examples(names),
                      clock=self.spec.clock)
        reply: dict[str, Any] = self.ask.for_tool(abstract["name"]).json("code", msgs, validate=_check_impl)
        return reply

    def code_and_tests(self, abstract: dict[str, Any], names: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The code agent's implementation and tests of one tool from one request: the tool, its tables,
        the filler's ids and the clock said once (what the code and the test prompts each showed)."""
        rows, ids = self._rows_and_ids(names)
        parents = [t for t in and_parents(self.spec, names) if t not in names]
        msgs = render("code_test", title=self.title, tool_name=abstract["name"], tool=self._tool_text(abstract),
                      tables=tables_text(self.spec, names, with_parents=False),
                      parents=("\nTables its rows link to (for fixture rows):\n"
                               + tables_text(self.spec, parents, with_parents=False) + "\n") if parents else "",
                      rows=rows, id_examples=self.id_examples(names), next_ids=ids, clock=self.spec.clock)
        out = self.ask.for_tool(abstract["name"]).json("code", msgs, validate=_check_code_tests)
        tests = out["tests"]
        return out["code"], {"fixture": tests.get("fixture") or {}, "cases": tests["cases"]}

    def _rows_and_ids(self, names: list[str]) -> tuple[str, str]:
        world = World.from_snapshot(self.spec, self.base)
        try:
            # ids and links only: the filler obeys the typed constraints, not the rules the descriptions
            # state (a completed ride with no fare), so its other values are no examples to copy
            rows = sample_rows(world, names, per_table=2, keys_only=True)
            ids = next_ids_text(next_ids(world, and_parents(self.spec, names), skip=100))
        finally:
            world.close()
        return rows, ids

    def tests(self, abstract: dict[str, Any], names: list[str], tables: str) -> dict[str, Any]:
        rows, ids = self._rows_and_ids(names)
        msgs = render("test", title=self.title, tool_name=abstract["name"], tool=self._tool_text(abstract),
                      tables=tables, rows=rows, next_ids=ids, clock=self.spec.clock)
        out = self.ask.for_tool(abstract["name"]).json("test", msgs, validate=_check_tests)
        return {"fixture": out.get("fixture") or {}, "cases": out["cases"]}

    def debug(self, abstract: dict[str, Any], tables: str, impl: dict[str, Any], tests: dict[str, Any],
              failures: list[str], round_no: int) -> dict[str, Any]:
        msgs = render("debug", title=self.title, tool_name=abstract["name"], tool=self._tool_text(abstract),
                      tables=tables, implementation=jdump(impl), tests=jdump(tests),
                      failures="\n".join(f"- {f}" for f in failures[:15]), round=round_no,
                      rounds=self.cfg.debug_rounds)
        reply: dict[str, Any] = self.ask.for_tool(abstract["name"]).json("debug", msgs, validate=_check_debug)
        return reply

    def fixture(self, tests: dict[str, Any]) -> tuple[bytes, list[str]]:
        world = World.from_snapshot(self.spec, self.base)
        try:
            fx = {t: rows for t, rows in (tests.get("fixture") or {}).items()}
            unknown = [t for t in fx if self.spec.table(t) is None]
            if unknown:
                return self.base, [f"fixture: unknown table(s) {unknown}"]
            apply_patch(world, fx)
            return world.snapshot(), []
        except ScaleEnvError as e:
            return self.base, [f"fixture: the rows do not load: {e}"]
        finally:
            world.close()

    def run_tests(self, tool: ToolSpec, tests: dict[str, Any]) -> tuple[ToolReport, list[str]]:
        snap, failures = self.fixture(tests)
        report, cases, outcome = test_tool_sandboxed(self.spec, tool, snap, self.seed, tests.get("cases"),
                                                     self.cfg.sandbox)
        report.tests.extend(cases)
        report.admitted = report.counts()[UNEXPECTED] == 0 and not failures
        for t in report.tests:
            if t.verdict == UNEXPECTED:
                args = f", arguments {jdump(t.args)}" if t.args else ""
                failures.append(f"{t.kind} test{args}: {t.reason}")
        return report, failures

    def build(self, abstract: dict[str, Any]) -> ToolBuild:
        name = abstract["name"]
        names, tables = self._tables(name)
        history: list[dict[str, Any]] = []
        try:
            if self.cfg.code_with_tests:
                impl, tests = self.code_and_tests(abstract, names)
                tests = same_record_errors(tests, with_new_errors(abstract, impl))
            else:
                impl = self.code(abstract)
                # the codes the code agent named reach the test (and debug) prompts as the tool's errors
                shown = with_new_errors(abstract, impl)
                tests = same_record_errors(self.tests(shown, names, tables), shown)
        except LLMOutputError as e:  # unusable output drops the tool; a failing endpoint stops the build
            return _dropped(name, 0, [f"no usable implementation or tests: {e}"], history)
        failures: list[str] = []
        tool: ToolSpec | None = None
        last: ToolReport | None = None
        for round_no in range(self.cfg.debug_rounds + 1):
            tool, failures = make_tool(abstract, impl, self.param_columns, names)
            if tool is not None:
                failures = static_problems(self.spec, tool)
            report = None
            if tool is not None and not failures:
                report, failures = self.run_tests(tool, tests)
                last = report
            history.append({"round": round_no, "failures": failures[:10]})
            if not failures and report is not None:
                return ToolBuild(name, tool, report, True, round_no + 1, history, passed_fixture(tests))
            if round_no == self.cfg.debug_rounds:
                break
            try:
                fix = self.debug(with_new_errors(abstract, impl), tables, impl, tests, failures, round_no + 1)
            except LLMOutputError as e:
                history.append({"round": round_no + 1, "failures": [f"debug agent gave no usable fix: {e}"]})
                break
            history[-1]["diagnosis"] = str(fix.get("diagnosis", ""))[:300]
            if isinstance(fix.get("implementation"), dict):
                impl = fix["implementation"]
            if fix.get("fixture") is not None:
                tests = {**tests, "fixture": fix["fixture"]}
            if fix.get("cases") is not None:
                tests = same_record_errors({**tests, "cases": fix["cases"]}, with_new_errors(abstract, impl))
        return _dropped(name, len([h for h in history if "failures" in h]), failures, history, tool, last)

    def build_all(self, abstracts: list[dict[str, Any]], progress: ToolProgress | None = None) -> list[ToolBuild]:
        workers = max(1, int(getattr(self.ask.config, "concurrency", 1)))
        done: list[ToolBuild] = []
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tool") as pool:
            for b in pool.map(self.build, abstracts):
                done.append(b)
                if progress is not None:
                    progress(len(done), len(abstracts))
        return done


def passed_fixture(tests: dict[str, Any]) -> dict[str, Any]:
    """What Phase 2 may lend a task world from a tool's passed tests: the fixture rows and the arguments
    of its positive cases (empty without rows)."""
    rows = tests.get("fixture") or {}
    if not isinstance(rows, dict) or not rows:
        return {}
    args = [c["args"] for c in tests.get("cases") or [] if isinstance(c, dict) and c.get("kind") == "positive"
            and isinstance(c.get("args"), dict)]
    return {"rows": rows, "args": args}


def _dropped(name: str, rounds: int, failures: list[str], history: list[dict[str, Any]],
             tool: ToolSpec | None = None, last: ToolReport | None = None) -> ToolBuild:
    if last is not None and last.counts()[UNEXPECTED]:
        last.admitted = False
        return ToolBuild(name, tool, last, False, rounds, history)
    report = ToolReport(name, admitted=False)
    report.tests.append(TestResult(name, "implementation", {}, UNEXPECTED,
                                   reason="; ".join(failures[:3]) or "never passed its tests"))
    return ToolBuild(name, tool, report, False, rounds, history)
