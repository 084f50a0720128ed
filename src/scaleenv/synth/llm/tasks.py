"""Phase 2 with LLM task agents (ScaleEnv §4.2), judged by the same verification and gates.

One attempt:

1. **Chain agent** writes the seed chain C1 as executable code (``sN = tool(...)``), around a
   suggested goal tool and its graph neighbourhood. Parse errors go back to it.
2. **State agent** writes the initial rows C1 needs and distractor rows. C1 is *executed* on
   base + rows; on failure the error goes back to the agent (bounded rounds). Distractors that
   break the chain or get touched by it are replaced by procedural ones (then dropped).
3. C1 is executed once more to get the expected state (the ground truth comes from execution).
4. **Expansion**: breadth-first over the core dependencies (``synth.llm.complexity``) from C1's
   tools; a tool joins H when its id inputs are supplied by tools in H and a call of it executes on
   the task's state. When it does not, a procedural clone of a row is tried first (free), then the
   **patch agent** writes rows (bounded per task); a patch is kept only if the call then runs and
   C1 still changes exactly the same rows.
5. **Gate**: p = π(|D_n|, c(H_n), g) by the gate agent, where g is the share of the **solver**'s
   best-of-k chains over (a sample of) the unused tools D_n that execute; with none executable
   the gate is not asked. If p ≥ τ the best executable chain joins H and is expanded; otherwise,
   while |H| < 20, a random auxiliary chain is added.
6. **Instruction agent** writes the instruction and user profile, checked to mention every literal
   of C1 and no ids that C1 and its rows do not contain.
7. The task is re-verified after the patches and must pass every integrity gate.
"""

from __future__ import annotations

import json
import random
import re
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaleenv.env.cache import make_episode
from scaleenv.env.policies import SwapAgent
from scaleenv.errors import ScaleEnvError, ToolError
from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.formats.task import (
    DEFAULT_FAMILY,
    AnswerFact,
    Call,
    Difficulty,
    Task,
    UserProfile,
    Verification,
    chain_to_python,
)
from scaleenv.llm.base import LLMOutputError
from scaleenv.llm.parse import ParseError, fenced_blocks, parse_json
from scaleenv.llm.session import Scoped
from scaleenv.synth.llm.chaincode import ChainCodeError, literal_values, parse_chain
from scaleenv.synth.llm.complexity import core_complexity, core_pairs
from scaleenv.synth.llm.config import SynthConfig
from scaleenv.synth.llm.prompts import render
from scaleenv.synth.llm.render import (
    jdump,
    next_ids,
    next_ids_text,
    rules_text,
    sample_rows,
    summary,
    tool_sig,
)
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.gates import play_policy, run_gates, swap_pairs
from scaleenv.synth.tasks.generate import LEVELS, ChainConfig, TaskBuilder, TaskRejected
from scaleenv.synth.tasks.instruction import human
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.state import fresh_unique, next_id
from scaleenv.tools.chain import ChainError, resolve_args, run_chain
from scaleenv.tools.policy import broken_rules
from scaleenv.tools.replay import TaskWorlds
from scaleenv.tools.runtime import execute_tool, run_tool
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.patch import apply_patch, table_order
from scaleenv.world.world import World

_ID_LIKE = re.compile(r"\b[A-Z][A-Z0-9]{1,5}-\d{3,}\b")


def _tables_of(tool: ToolSpec) -> list[str]:
    return list(tool.meta.get("tables") or ([tool.returns.table] if tool.returns.table else []))


def lookup_tools(spec: DomainSpec) -> dict[str, list[str]]:
    """Read tools that find records of a table from what a person knows (an e-mail, a name, a code):
    a parameter carrying a unique or display column, or one named like e-mail, name, phone or code."""
    display = (spec.meta or {}).get("display") or {}
    out: dict[str, list[str]] = {}
    for tool in spec.tools:
        if tool.kind != "read":
            continue
        for p in tool.parameters:
            table_name, _, col_name = (p.column or "").partition(".")
            table = spec.table(table_name)
            col = table.column(col_name) if table else None
            if table is None or col is None or col.name == table.primary_key or col.foreign_key:
                continue
            natural = col.unique or display.get(table.name) == col.name or any(
                k in col.name for k in ("email", "name", "phone", "code", "plate", "number", "title"))
            if natural and tool.name not in out.setdefault(table.name, []):
                out[table.name].append(tool.name)
    return out


def _tool(spec: DomainSpec, name: str) -> ToolSpec:
    """A tool that ``spec`` is known to have (a lookup tool, a parsed chain's call)."""
    tool = spec.tool(name)
    if tool is None:
        raise KeyError(f"{spec.name} has no tool {name!r}")
    return tool


def rubric_refuses(chains: int, complexity: float, remaining: int) -> bool:
    """Whether the gate prompt's rubric scores below tau whatever the solver's g: with one chain,
    fewer than three tools left (or a saturated c(H) >= 1.0 with fewer than ten); with two or more,
    c(H) of 0.6 or more or fewer than ten tools left. Asking the solver and the gate then costs
    two requests for an answer the rubric already gives."""
    if chains <= 1:
        return remaining < 3 or (complexity >= 1.0 and remaining < 10)
    return complexity >= 0.6 or remaining < 10


def rubric_decision(chains: int, complexity: float, feasibility: float, remaining: int) -> bool | None:
    """The gate prompt's rubric where its numbers decide (True: add the chain, False: stop), or None
    where they leave the case to the gate model's judgement. The rubric as written decides every case:
    with one chain, grow when g >= 0.5, three or more tools remain and c(H) < 1.0, or past a saturated
    c(H) when g >= 0.75 with ten or more left; with two or more, only while c(H) < 0.6, g >= 0.75 and
    ten or more remain."""
    if chains <= 1:
        if complexity < 1.0:
            return feasibility >= 0.5 and remaining >= 3
        return feasibility >= 0.75 and remaining >= 10
    return complexity < 0.6 and feasibility >= 0.75 and remaining >= 10


def attach_fixtures(ctx: DomainContext, tests_json: Path) -> None:
    """Lend ``ctx`` the admitted tools' test fixtures recorded in Phase 1's ``tests.json`` (none when the
    file or the record is missing: a universe built before they were kept)."""
    fixtures: dict[str, Any] = {}
    try:
        raw = json.loads(tests_json.read_text(encoding="utf-8"))
        got = (raw.get("llm") or {}).get("fixtures") if isinstance(raw, dict) else None
        fixtures = got if isinstance(got, dict) else {}
    except (OSError, ValueError):
        pass
    ctx.__dict__["llm_fixtures"] = fixtures


def fixtures_of(ctx: DomainContext) -> dict[str, dict[str, list[dict[str, Any]]]]:
    out: dict[str, dict[str, list[dict[str, Any]]]] = ctx.__dict__.get("llm_fixtures") or {}
    return out


CHAIN_REPAIR = ("Your chain for task {task} could not be used:\n{problems}\n\nReply again with one ```python code "
                "block: the complete, corrected chain for task {task} only, and nothing else.")

_TASK_LINE = re.compile(r"^\s*#\s*task\s+(\d+)\b", re.IGNORECASE)


def chain_blocks(text: str) -> dict[int, str]:
    """The chains of a batched reply by task number: each ```python block whose first line is
    "# task N" (ParseError when none is)."""
    out: dict[int, str] = {}
    for lang, body in fenced_blocks(text):
        if lang not in ("python", "py", ""):
            continue
        first = next((ln for ln in body.splitlines() if ln.strip()), "")
        m = _TASK_LINE.match(first)
        if m and int(m.group(1)) not in out:
            out[int(m.group(1))] = body
    if not out:
        raise ParseError('no ```python block starts with a line "# task N" (N: the task number)')
    return out


def _norm(v: object) -> str:
    return re.sub(r"\s+", " ", str(v)).strip().lower()


class LLMTaskBuilder(TaskBuilder):
    def __init__(self, ctx: DomainContext, ask: Scoped, seed: int, attempt: int, cfg: SynthConfig):
        lo, hi = cfg.chain_length
        super().__init__(ctx, seed, attempt, ChainConfig(min_length=lo, max_length=hi, min_tools=cfg.min_task_tools))
        self.ask = ask
        self.cfg = cfg
        self.title = str((ctx.spec.meta or {}).get("title") or ctx.spec.name)
        self.new_rows: dict[str, list[dict[str, Any]]] = {}
        self._plan: tuple[str, int, ToolSpec] | None = None
        # the builder of another attempt (None where a procedural family serves it): for batched chains
        self.siblings: Callable[[int], LLMTaskBuilder | None] | None = None
        self.record: dict[str, Any] = {"state_rounds": 0, "llm_patches": 0, "procedural_patches": 0, "gate": [],
                                       "chains": 1, "distractors": "llm"}

    # --- 1. the seed chain -------------------------------------------------------------------
    def ancestry(self, tables: set[str], required_only: bool = False) -> set[str]:
        """``tables`` and every table they reach through foreign keys (``required_only``: through
        NOT NULL ones, the parents a new row cannot do without)."""
        out, todo = set(), list(tables)
        while todo:
            t = todo.pop()
            table = self.spec.table(t)
            if t in out or table is None:
                continue
            out.add(t)
            todo += [c.foreign_key.split(".")[0] for c in table.columns
                     if c.foreign_key and not (required_only and c.nullable)]
        return out

    def neighbourhood(self, goal: ToolSpec, limit: int = 10) -> list[ToolSpec]:
        """The tools a chain around ``goal`` can use, at most ``limit``: the goal, the lookups of the
        tables it reaches, its core predecessors, the reads of its tables, then its core successors."""
        spec = self.spec
        tables = self.ancestry(set(_tables_of(goal)))
        looks = lookup_tools(spec)
        core = core_pairs(self.ctx)
        names = [goal.name]
        names += [n for t in sorted(tables) for n in looks.get(t, []) if n not in names]
        names += sorted(a for a, b in core if b == goal.name and a not in names)
        names += [t.name for t in spec.tools if t.kind == "read" and set(_tables_of(t)) & set(_tables_of(goal))
                  and t.name not in names]
        names += sorted(b for a, b in core if a == goal.name and b not in names)
        return [tool for n in names[:limit] if (tool := spec.tool(n)) is not None]

    def edges_text(self, goal: str, names: set[str], limit: int = 8) -> str:
        """The goal tool's own core dependencies (see :mod:`scaleenv.synth.llm.complexity`) among
        ``names``, at most ``limit``: the tools it depends on (A->goal). The edges between the other
        tools say little about a chain to the goal and cost most of the list, and the goal's own
        outgoing edges (a refund's to a later confirmation) point away from the chain."""
        core = core_pairs(self.ctx)
        kinds: dict[tuple[str, str], set[str]] = {}
        for a, b, d in self.ctx.graph.edges():
            if a in names and a != b and b == goal and (a, b) in core:
                kinds.setdefault((a, b), set()).add(d.get("kind", ""))
        pairs = sorted(kinds)
        shown = [f"{a}->{b} ({'/'.join(sorted(kinds[(a, b)]))})" for a, b in pairs[:limit]]
        if len(pairs) > limit:
            shown.append(f"... and {len(pairs) - limit} more")
        return ", ".join(shown) or "none"

    def lookups_text(self, tools: list[ToolSpec]) -> str:
        offered = {t.name for t in tools}
        lines = []
        for table, names in sorted(lookup_tools(self.spec).items()):
            calls = [n for n in names if n in offered]  # their parameters are in the tool list above
            if calls:
                lines.append(f"{table}: " + "; ".join(calls))
        return "\n".join(lines) or "(none: start from a record the customer can name through the tools above)"

    def policy_text(self, names: set[str]) -> str:
        """The whole policy, briefly: the checked rules (eligibility, limits) over the offered tools,
        with those tools named, then the rules every conversation follows (identity, confirmation,
        scope), so that a chain can plan for them too."""
        policy = self.spec.policy
        if policy is None:
            return "(none)"
        lines = []
        for r in policy.rules:
            if r.forbid and r.kind in ("eligibility", "limit"):
                if names & set(r.tools):
                    lines.append(f"- {summary(r.text, 160)} ({', '.join(t for t in r.tools if t in names)})")
            elif r.kind in ("identity", "confirmation", "scope"):
                lines.append(f"- {r.kind}: {summary(r.text, 120)}")
        return "\n".join(lines) or "(none)"

    def plan(self) -> tuple[str, int, ToolSpec]:
        """The attempt's tier, distractor density and goal tool, drawn once (in this order) from its own
        stream, so a sibling attempt can compute them for a batched chain request (same draws as ever)."""
        if self._plan is None:
            # the three older tiers in their old shares unless a tier is set (same draws, same tasks)
            level = self.tier = self.tier or self.rng.choices(["easy", "medium", "hard"], [0.3, 0.45, 0.25])[0]
            _, (d_lo, d_hi), _, _ = LEVELS[level]
            density = self.rng.randint(max(1, d_lo), max(1, d_hi))
            goal = self.pick_goal_tool(self.ctx.goal_tools) or self.pick_goal_tool(
                [t for t in self.spec.tools if t.kind == "write"])
            if goal is None:
                raise TaskRejected(Reason.NO_GOAL_TOOLS)
            self._plan = (level, density, goal)
        return self._plan

    def chain_request(self) -> dict[str, Any]:
        """What a chain request shows for this attempt: its goal, the tools around it, the tables whose
        rows are shown (the formats of the literals a customer states: the tables the lookups search
        and the goal acts on, not every table a shown tool touches) and the chain's length bounds."""
        level, _, goal = self.plan()
        tools = self.neighbourhood(goal)
        names = {t.name for t in tools}
        looks = lookup_tools(self.spec)
        tables = sorted({t for t, ns in looks.items() if names & set(ns)} | set(_tables_of(goal)))
        lo, hi = self.config.min_length, self.config.max_length
        if level == "easy":
            hi = min(hi, max(lo, 4))
        elif level in ("hard", "expert"):
            lo = min(hi, max(lo, 4))
        return {"goal": goal, "tools": tools, "names": names, "tables": tables, "min_len": lo, "max_len": hi}

    def check_chain(self, code: str) -> list[str]:
        """The problems of a chain the model wrote (empty when it parses and can be used)."""
        try:
            calls = parse_chain(code, self.spec)
        except ChainCodeError as e:
            return e.problems
        problems = []
        if not any(_tool(self.spec, c.tool).kind == "write" for c in calls):
            problems.append("the chain must contain at least one write tool call")
        if len(calls) > self.config.max_length:
            problems.append(f"the chain has {len(calls)} calls; at most {self.config.max_length}")
        return problems

    def write_chain(self, level: str) -> list[Call]:
        if self.cfg.chain_batch > 1 and self.siblings is not None:
            return self.write_chain_batched()
        req = self.chain_request()
        goal, tools, names = req["goal"], req["tools"], req["names"]
        msgs = render("chain", title=self.title, task_number=self.attempt, tables=rules_text(self.spec, req["tables"]),
                      tools="\n".join(tool_sig(t) for t in tools), edges=self.edges_text(goal.name, names),
                      lookups=self.lookups_text(tools), policy=self.policy_text(names),
                      rows=sample_rows(self.world, req["tables"], per_table=1), clock=self.spec.clock,
                      goal_tool=goal.name, min_len=req["min_len"], max_len=req["max_len"])
        try:
            code = self.ask.code("chain", msgs, validate=self.check_chain)
        except LLMOutputError as e:
            raise TaskRejected(Reason.CHAIN_UNUSABLE, str(e)[:200]) from None
        return parse_chain(code, self.spec)

    # --- 1b. chains of several attempts in one request -------------------------------------------
    def batch_mates(self) -> list[tuple[int, LLMTaskBuilder]]:
        """The attempts whose chains one request proposes with this one's: those of its aligned window of
        ``cfg.chain_batch`` attempts that an LLM chain serves (not a procedural family) and that have a goal."""
        k = self.cfg.chain_batch
        first = self.attempt // k * k
        mates: list[tuple[int, LLMTaskBuilder]] = []
        for a in range(first, first + k):
            b = self if a == self.attempt else (self.siblings(a) if self.siblings is not None else None)
            if b is None:
                continue
            try:
                b.plan()
            except TaskRejected:
                continue
            mates.append((a, b))
        return mates

    def batch_messages(self, mates: list[tuple[int, LLMTaskBuilder]]) -> list[dict[str, str]]:
        """One chain prompt for all of ``mates``: the tools, tables, lookups, policy and rows said once
        (the union of what each attempt's own prompt shows), then each task's goal, length and edges."""
        reqs = [(a, b.chain_request()) for a, b in mates]
        tools: list[ToolSpec] = []
        for t in [r["goal"] for _, r in reqs] + [t for _, r in reqs for t in r["tools"]]:
            if t.name not in {x.name for x in tools}:
                tools.append(t)
        names = {t.name for t in tools}
        tables = sorted({t for _, r in reqs for t in r["tables"]})
        lines = [f"Task {a}: goal tool {r['goal'].name}; {r['min_len']} to {r['max_len']} calls; the goal tool's "
                 f"direct dependencies: {self.edges_text(r['goal'].name, r['names'])}" for a, r in reqs]
        return render("chain_batch", title=self.title, task_numbers=", ".join(str(a) for a, _ in reqs),
                      tables=rules_text(self.spec, tables), tools="\n".join(tool_sig(t) for t in tools),
                      lookups=self.lookups_text(tools), policy=self.policy_text(names),
                      rows=sample_rows(self.world, tables, per_table=1), clock=self.spec.clock,
                      tasks="\n".join(lines))

    def write_chain_batched(self) -> list[Call]:
        """This attempt's chain from the request its window shares (asked once, by whichever attempt
        needs it first; its tokens are split over the window's tasks). A chain of the batch that is
        missing or unusable goes back to the model alone, charged to this task: it rejects only this task."""
        k = self.cfg.chain_batch
        key = ("chain_batch", self.spec.name, self.seed, self.attempt // k * k, k)

        def ask_batch() -> tuple[list[dict[str, str]], str, dict[int, str]]:
            mates = self.batch_mates()
            msgs = self.batch_messages(mates)
            ids = [f"{self.spec.name}/{a:05d}" for a, _ in mates]
            seen: list[str] = []

            def parse(text: str) -> dict[int, str]:
                seen.append(text)
                return chain_blocks(text)

            try:
                blocks = self.ask.for_tasks(ids).structured(
                    "chain", msgs, parse, 'one ```python code block per task, each starting with "# task N"')
            except LLMOutputError:
                blocks = {}
            return msgs, seen[-1] if seen else "", blocks

        msgs, text, blocks = self.ask.session.shared(key, ask_batch)
        code = blocks.get(self.attempt)
        problems = [f"the reply has no chain for task {self.attempt}"] if code is None else self.check_chain(code)
        if not problems:
            return parse_chain(code or "", self.spec)
        self.record["chain_repairs"] = 1
        self.ask.session.count_repair("chain")
        convo = [*msgs, {"role": "assistant", "content": text},
                 {"role": "user", "content": CHAIN_REPAIR.format(
                     task=self.attempt, problems="\n".join(f"- {p}" for p in problems[:25]))}]
        try:
            code = self.ask.code("chain", convo, validate=self.check_chain,
                                 rounds=max(0, self.ask.config.repair_rounds - 1))
        except LLMOutputError as e:
            raise TaskRejected(Reason.CHAIN_UNUSABLE, str(e)[:200]) from None
        return parse_chain(code, self.spec)

    # --- 2. the initial state ------------------------------------------------------------------
    def chain_tables(self) -> list[str]:
        """Every table a call of the chain reads or writes (declared or seen in its SQL), and the parents
        their rows cannot do without (an optional link's table is not needed for the chain to run)."""
        out: list[str] = []
        for c in self.chain:
            tool = self.spec.tool(c.tool)
            if tool is None:
                continue
            io = self.ctx.io.get(c.tool)
            seen = sorted((io.touches | io.inserts | {t for t, _ in io.writes}) if io else set())
            for t in [*_tables_of(tool), *seen]:
                if t not in out:
                    out.append(t)
        out += sorted(self.ancestry(set(out), required_only=True) - set(out))
        return [t for t in out if self.spec.table(t) is not None]

    def _with_ids(self, rows: object) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        if not isinstance(rows, dict):
            return out
        for t, rs in rows.items():
            if self.spec.table(t) is None or not isinstance(rs, list):
                continue
            clean = [dict(r) for r in rs if isinstance(r, dict)]
            out[t] = clean
        return out

    def _materialize(self, rows: dict[str, list[dict[str, Any]]], distractors: dict[str, list[dict[str, Any]]]) -> str:
        """Reset the task world to base + rows (+ distractors); '' or the error of loading the rows."""
        self.world = World.from_snapshot(self.spec, self.ctx.base)
        self.patch, self.distractor_ids = {}, {}
        for t in table_order(self.spec):
            for r in rows.get(t, []):
                if "id" not in r:
                    r["id"] = next_id(self.world, t, {x["id"] for x in rows.get(t, []) if x.get("id")})
            if rows.get(t):
                try:
                    self.add_rows(t, rows[t])
                except ScaleEnvError as e:
                    return f"rows of {t} do not load: {e}"
        for t in table_order(self.spec):
            ds = [d for d in distractors.get(t, []) if isinstance(d, dict) and d.get("id") is not None]
            if ds:
                try:
                    self.add_rows(t, ds, distract=True)
                except ScaleEnvError:
                    continue  # a distractor that breaks a constraint is simply left out
        return ""

    def _executes(self) -> str:
        scratch = World.from_snapshot(self.spec, self.world.snapshot())
        try:
            run_chain(scratch, self.spec, self.chain)
        except ChainError as e:
            return f"the chain fails at {e}"
        finally:
            scratch.close()
        return ""

    def policy_error(self) -> str:
        """'' or the first write of the chain that breaks a checked policy rule on the task's rows: a
        policy-following agent would refuse it, so the chain's final state could never be reached."""
        policy = self.spec.policy
        if policy is None or not any(policy.checks(c.tool) for c in self.chain):
            return ""
        scratch = World.from_snapshot(self.spec, self.world.snapshot())
        outputs: list[Any] = []
        try:
            for i, call in enumerate(self.chain):
                tool = _tool(self.spec, call.tool)
                args = resolve_args(call, outputs, i)
                bad = broken_rules(scratch, self.spec, tool, args) if tool.kind == "write" else []
                if bad:
                    return f"s{i} = {call.tool}(...) breaks the policy rule '{bad[0].name}': {bad[0].text}"
                outputs.append(run_tool(scratch, tool, args))
        except (ToolError, ChainError) as e:
            return f"the chain fails at {e}"
        finally:
            scratch.close()
        return ""

    def state_request(self) -> dict[str, Any]:
        """What a state request shows for this attempt's chain: its tables and the fresh ids its rows use."""
        tables = self.chain_tables()
        return {"tables": tables,
                "next_ids": next_ids_text(next_ids(self.world, tables, skip=40 + 20 * (self.attempt % 50)))}

    def batched_state(self) -> tuple[list[dict[str, str]], dict[str, Any]] | None:
        """This attempt's part of the state request its chain window shares (the attempts whose chains
        came usable from the batched chain request), and the conversation to send a part back in; None
        when this attempt's chain is not the batch's (it was sent back alone) or the reply has no part."""
        k = self.cfg.chain_batch
        first = self.attempt // k * k
        chains: dict[int, str] = self.ask.session.shared(("chain_batch", self.spec.name, self.seed, first, k),
                                                         lambda: ([], "", {}))[2]
        if chain_to_python(self.chain) != chain_to_python(parse_chain(chains.get(self.attempt) or "", self.spec)
                                                          if chains.get(self.attempt) else []):
            return None

        def ask_batch() -> tuple[list[dict[str, str]], str, dict[str, Any]]:
            mates = []
            for a, b in self.batch_mates():
                code = chains.get(a)
                if code is None or b.check_chain(code):
                    continue
                b.chain = parse_chain(code, self.spec)
                mates.append((a, b, b.state_request()))
            tables = sorted({t for _, _, r in mates for t in r["tables"]})
            lines = [f"Task {a}: new rows use fresh ids counting up from: {r['next_ids']}; "
                     f"{max(1, b.plan()[1])} distractor(s) per new record.\nReference chain:\n```python\n"
                     f"{chain_to_python(b.chain)}\n```" for a, b, r in mates]
            msgs = render("state_batch", title=self.title, task_numbers=", ".join(str(a) for a, _, _ in mates),
                          tables=rules_text(self.spec, tables), rows=sample_rows(self.world, tables, per_table=1),
                          clock=self.spec.clock, tasks="\n\n".join(lines), first=mates[0][0] if mates else 0)
            ids = [f"{self.spec.name}/{a:05d}" for a, _, _ in mates]
            seen: list[str] = []

            def parse(text: str) -> dict[str, Any]:
                seen.append(text)
                obj = parse_json(text, dict)
                if not isinstance(obj.get("tasks"), dict):
                    raise ParseError('the reply must be {"tasks": {task number: {"rows": ..., "distractors": ...}}}')
                return {str(n).strip(): part for n, part in obj["tasks"].items()}

            try:
                parts = self.ask.for_tasks(ids).structured("state", msgs, parse, "one JSON object")
            except LLMOutputError:
                parts = {}
            return msgs, seen[-1] if seen else "", parts

        msgs, text, parts = self.ask.session.shared(("state_batch", self.spec.name, self.seed, first, k), ask_batch)
        part = parts.get(str(self.attempt))
        if not isinstance(part, dict) or not isinstance(part.get("rows"), dict):
            return None
        return [*msgs, {"role": "assistant", "content": text}], part

    def write_state(self, density: int) -> bytes:
        req = self.state_request()
        tables = req["tables"]
        msgs = render("state", title=self.title, chain=chain_to_python(self.chain), tables=rules_text(self.spec, tables),
                      rows=sample_rows(self.world, tables, per_table=1), next_ids=req["next_ids"],
                      clock=self.spec.clock, distractors=max(1, density))

        def shape(obj: dict[str, Any]) -> list[str]:  # an object: ask.json expects one
            if not isinstance(obj.get("rows"), dict):
                return ["'rows' must map table names to lists of rows"]
            unknown = [t for t in list(obj["rows"]) + list(obj.get("distractors") or {}) if self.spec.table(t) is None]
            return [f"unknown table(s) {sorted(set(unknown))}"] if unknown else []

        batched = self.batched_state() if self.cfg.chain_batch > 1 and self.siblings is not None else None
        if batched is not None and shape(batched[1]):
            batched = None  # an unusable part: this task's state is asked alone
        task_of = ""
        given: dict[str, Any] = {}
        if batched is not None:  # its part of a batched reply; a failure goes back for this task alone
            msgs, given = batched
            task_of = f" for task {self.attempt}"
            self.record["state_batched"] = True

        error = ""
        obj: dict[str, Any] = {}
        for round_no in range(self.cfg.state_rounds + 1):
            if round_no == 0 and batched is not None:
                obj = given
            else:
                try:
                    obj = self.ask.json("state", msgs, validate=shape)
                except LLMOutputError as e:
                    raise TaskRejected(Reason.STATE_UNUSABLE, str(e)[:200]) from None
            error = ""
            if isinstance(obj.get("chain"), str):
                try:
                    self.chain = parse_chain(obj["chain"], self.spec)
                except ChainCodeError as e:
                    error = f"the corrected chain does not parse: {e}"
            if not error:
                error = (self._materialize(self._with_ids(obj.get("rows")), {}) or self._executes()
                         or self.policy_error())
            self.record["state_rounds"] = round_no + 1
            if not error:
                break
            if round_no == 0 and batched is not None:  # the batch's reply is already the last message
                msgs = [*msgs, {"role": "user", "content": f"Executing the chain of task {self.attempt} on its rows "
                                f"failed: {error}\nReply with the corrected JSON object for task {self.attempt} "
                                "only: {\"rows\": ..., \"distractors\": ...}. If the chain itself is wrong, add "
                                "\"chain\": the corrected Python chain as a string."}]
                continue
            msgs = [*msgs, {"role": "assistant", "content": jdump(obj)},
                    {"role": "user", "content": f"Executing the chain{task_of} on these rows failed: {error}\nReply "
                     "with the corrected JSON object (same format). If the chain itself is wrong, add \"chain\": the "
                     "corrected Python chain as a string."}]
        else:
            raise TaskRejected(Reason.STATE_NOT_EXECUTABLE, error[:200])
        self.new_rows = self._with_ids(obj.get("rows"))
        return self.add_distractor_rows(self.new_rows, self._with_ids(obj.get("distractors")), density)

    def add_distractor_rows(self, rows: dict[str, list[dict[str, Any]]], distractors: dict[str, list[dict[str, Any]]],
                            density: int) -> bytes:
        """LLM distractors if they stay orthogonal to the chain and change none of its answers (else
        without the tables whose distractors do), else procedural ones, else none."""
        # the LLM's distractors less one table's at a time: a distractor fee that changes the balance
        # the chain reads goes, the look-alike customers stay
        lesser = [{t: rs for t, rs in distractors.items() if t != gone} for gone in sorted(distractors)
                  if len(distractors) > 1]
        for source, chosen in [("llm", distractors), *(("llm", d) for d in lesser), ("procedural", {}), ("none", {})]:
            if source == "procedural":
                self._materialize(rows, {})
                self.add_distractors([(t, r) for t in table_order(self.spec) for r in rows.get(t, [])], max(1, density))
            else:
                self._materialize(rows, chosen)
            if self._executes():
                continue
            scratch = World.from_snapshot(self.spec, self.world.snapshot())
            try:
                run_chain(scratch, self.spec, self.chain)
                self.check_distractors_orthogonal(scratch)
            except (TaskRejected, ChainError):
                continue
            finally:
                scratch.close()
            if self.distractors_change_answers():
                self.record["distractors_changed_answers"] = self.record.get("distractors_changed_answers", 0) + 1
                continue
            self.record["distractors"] = source
            return self.world.snapshot()
        raise TaskRejected(Reason.STATE_NOT_EXECUTABLE, "the chain fails even without distractors")

    def distractors_change_answers(self) -> bool:
        """Whether the distractor rows change what the chain answers: its last read (the fact the
        customer learns) or any total or count it reads, with and without them (a distractor fee in a
        balance). Lists the chain picks from may hold distractors; that is what they are for."""
        if not any(self.distractor_ids.values()):
            return False
        reads = [i for i, c in enumerate(self.chain) if (t := self.spec.tool(c.tool)) is not None and t.kind == "read"
                 and (t.returns.mode == "scalar" or i == len(self.chain) - 1)]
        if not reads:
            return False
        plain = World.from_snapshot(self.spec, self.ctx.base)
        full = World.from_snapshot(self.spec, self.world.snapshot())
        try:
            apply_patch(plain, {t: [r for r in rows if r["id"] not in self.distractor_ids.get(t, ())]
                                for t, rows in self.patch.items()})
            without, with_d = run_chain(plain, self.spec, self.chain), run_chain(full, self.spec, self.chain)
        except (ChainError, ScaleEnvError):
            return True
        finally:
            plain.close()
            full.close()
        return any(jdump(without[i]) != jdump(with_d[i]) for i in reads)

    # --- 4./5. expansion and the gate ---------------------------------------------------------
    def expand(self, initial: bytes, gold_keys: dict[str, list[Any]]) -> tuple[list[str], dict[str, list[Any]]]:
        ex = _Exerciser(self, initial, gold_keys)
        ctx = self.ctx
        all_tools = [t.name for t in self.spec.tools]
        included = list(dict.fromkeys(c.tool for c in self.chain))
        supplied: set[str] = set()
        for t in included:
            supplied |= ctx.io[t].outputs
        failed: set[str] = set()
        core = core_pairs(ctx)
        # K(C) follows core dependencies only: the loose id matches of the computed graph would pull
        # most of the domain into H before the gate is ever asked whether to grow the task
        succ: dict[str, list[str]] = {}
        for a, b in sorted(core):
            succ.setdefault(a, []).append(b)

        def suppliable(name: str) -> bool:
            tool = self.spec.tool(name)
            assert tool is not None
            return all(kd in supplied for p, kd in ctx.io[name].inputs.items()
                       if (param := tool.param(p)) is not None and param.required)

        def include(name: str) -> None:
            if name not in included:
                included.append(name)
                supplied.update(ctx.io[name].outputs)

        def bfs(start: list[str]) -> None:
            """K(C): breadth-first from ``start`` over the graph, ``cfg.expand_depth`` layers deep."""
            queue = deque((s, 1) for s in sorted({s for t in start for s in succ.get(t, [])} - set(included)))
            deferred = 0
            while queue and deferred <= len(queue):
                name, depth = queue.popleft()
                if name in included or name in failed:
                    continue
                if not suppliable(name):
                    queue.append((name, depth))
                    deferred += 1
                    continue
                deferred = 0
                if ex.try_tool(name):
                    include(name)
                    if depth < self.cfg.expand_depth:
                        queued = {q for q, _ in queue}
                        queue.extend((s, depth + 1) for s in succ.get(name, [])
                                     if s not in included and s not in queued)
                else:
                    failed.add(name)

        bfs(included)
        target = min(self.config.min_tools, len(all_tools))
        chains = 1
        gate_open = True  # the gate is asked until it says stop (or the solver finds nothing executable)
        while True:
            rest = [t for t in all_tools if t not in included and t not in failed]
            if not rest:
                break
            c = core_complexity(ctx, included, core)
            if gate_open and chains < self.cfg.max_chains and rubric_refuses(chains, c, len(rest)):
                # whatever g the solver found, the gate's rubric scores below tau: ask neither
                self.record["gate"].append({"remaining": len(rest), "complexity": round(c, 3), "g": None,
                                            "p": None, "accepted": False, "asked": False})
                gate_open = False
            if gate_open and chains < self.cfg.max_chains:
                g, best = self.solve(rest, ex)
                # with no executable chain there is nothing to add: the gate's answer could not matter;
                # where the rubric's numbers decide, the code decides (a request would only restate them)
                decided = None if self.cfg.gate_llm else rubric_decision(chains, c, g, len(rest))
                if best is None:
                    p = 0.0
                elif decided is not None:
                    p = 1.0 if decided else 0.0
                else:
                    p = self.gate(len(rest), c, g, chains, len(included))
                accepted = p >= self.cfg.tau and best is not None
                self.record["gate"].append({"remaining": len(rest), "complexity": round(c, 3), "g": g, "p": p,
                                            "accepted": accepted, "asked": best is not None and decided is None})
                gate_open = accepted
                if accepted:
                    assert best is not None
                    chains += 1
                    new = [c.tool for c in best if c.tool not in included]
                    for n in new:
                        include(n)
                    bfs(new)
                    continue
            if len(included) >= target:
                break
            # |H| < 20: a random auxiliary chain (a tool whose inputs are supplied, or a supplier plus it)
            self.rng.shuffle(rest)
            added = False
            for name in rest:
                if suppliable(name):
                    if ex.try_tool(name):
                        include(name)
                        bfs([name])
                        added = True
                    else:
                        failed.add(name)
                    break
            if not added:
                break
        self.record["chains"] = chains
        self.record["exercisable_tools"] = len(included)
        return included, ex.patch

    def solve(self, rest: list[str], ex: _Exerciser) -> tuple[float, list[Call] | None]:
        """g(D_n): the share of the solver's k chains over (a sample of ``cfg.solver_tools``) unused
        tools that execute."""
        k = max(1, self.cfg.best_of_k)
        # a sample of D_n (drawn per task, in spec order): the whole of it costs tokens on every ask
        n = max(1, self.cfg.solver_tools)
        shown = rest if len(rest) <= n else [rest[i] for i in sorted(self.rng.sample(range(len(rest)), n))]
        tools = [self.spec.tool(name) for name in shown]
        # rows of every table the tools touch (the ids a chain passes, and what a filter or a write
        # acts on), the tables whose ids a required parameter takes first; bounded by characters
        inputs = sorted({kd.split(".")[0] for t in tools if t for p, kd in self.ctx.io[t.name].inputs.items()
                         if (param := t.param(p)) is not None and param.required})
        touched = sorted({x for t in tools if t for x in _tables_of(t)} - set(inputs))
        if not inputs:
            inputs, touched = touched, []
        rows = sample_rows(ex.world, inputs, per_table=4, max_chars=1100, spread=True)
        if touched:  # one row each: their formats and states, not ids to pass
            rows += "\n" + sample_rows(ex.world, touched, per_table=1)
        msgs = render("solver", title=self.title, tools="\n".join(tool_sig(t) for t in tools if t), rows=rows,
                      clock=self.spec.clock, k=k)
        text = self.ask.chat("solver", msgs).text  # a failing endpoint stops the build (resumable)
        blocks = [b for lang, b in fenced_blocks(text) if lang in ("python", "py", "")][:k]
        ok, best = 0, None
        for code in blocks:
            try:
                calls = parse_chain(code, self.spec, allowed=set(rest))
            except ChainCodeError:
                continue
            scratch = World.from_snapshot(self.spec, ex.initial)
            try:
                run_chain(scratch, self.spec, calls)
            except ChainError:
                continue
            finally:
                scratch.close()
            ok += 1
            best = best or calls
        return round(ok / k, 3), best

    def gate(self, remaining: int, c: float, g: float, chains: int, included: int) -> float:
        def check(obj: dict[str, Any]) -> list[str]:  # an object: ask.json expects one
            p = obj.get("p")
            if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
                return ["'p' must be a number between 0 and 1"]
            return []

        msgs = render("gate", title=self.title, included=included, complexity=f"{c:.2f}", remaining=remaining,
                      feasibility=f"{g:.2f}", k=self.cfg.best_of_k, chains=chains, tau=f"{self.cfg.tau:g}",
                      max_chains=self.cfg.max_chains)
        try:
            return float(self.ask.json("gate", msgs, validate=check)["p"])
        except LLMOutputError:
            return 0.0

    # --- 6. the user side ---------------------------------------------------------------------------
    def growth_text(self) -> str:
        """What the instruction agent must know of the chains the gate added: their tools only widen the
        agent's choice; the expected state is the reference chain's result alone (see :meth:`expand`)."""
        added = int(self.record.get("chains", 1)) - 1
        if added <= 0:
            return "This chain is the whole task: the expected final state is its result."
        return (f"The expansion added {added} more chain(s) to the task, but only their tools: they are offered to "
                "the agent as alternatives, and the expected final state is the result of the chain above alone. "
                "So the customer asks for this chain only, never for what the added chains' tools do.")

    def write_user_side(self, withheld_n: int) -> tuple[str, dict[str, Any]]:
        literals = [v for v in literal_values(self.chain) if not isinstance(v, bool) and _norm(v)]
        # a value of a record the task created is the customer's own to say: the identity rule may ask for
        # one the chain never passes (a student number), known or withheld
        known_ids = ({str(v) for v in literals} | {str(r.get("id")) for rs in self.patch.values() for r in rs}
                     | {str(v) for rs in self.new_rows.values() for r in rs for v in r.values()})
        answers = "; ".join(f"{f['name']}: {f['value']}" for f in self.answer_facts) or "none"
        rows = "\n".join(f"{t}: {jdump(r)}" for t in table_order(self.spec) for r in self.new_rows.get(t, []))

        def check(obj: dict[str, Any]) -> list[str]:  # an object: ask.json expects one
            problems = []
            instr = obj.get("instruction")
            prof = obj.get("user_profile")
            if not isinstance(instr, str) or not instr.strip():
                return ["'instruction' must be a non-empty string"]
            if not isinstance(prof, dict) or not isinstance(prof.get("known", {}), dict) or not isinstance(
                    prof.get("goals", []), list) or not prof.get("goals"):
                return ["'user_profile' needs 'persona', 'known' (an object), 'withheld' (a list) and 'goals' (a list)"]
            text = _norm(instr + " " + " ".join(map(str, prof.get("goals", []))) + " "
                         + " ".join(map(str, prof.get("known", {}).values())))
            missing = [v for v in literals  # a filter word may be said as people say it ("in progress")
                       if _norm(v) not in text and _norm(str(v).replace("_", " ")) not in text]
            if missing:
                problems.append(f"the instruction or known facts must mention these values of the chain: {missing[:8]}")
            invented = sorted({m for m in _ID_LIKE.findall(instr) if m not in known_ids})
            if invented:
                problems.append(f"the instruction mentions ids the chain does not use: {invented[:5]}")
            return problems

        msgs = render("instruction", title=self.title, chain=chain_to_python(self.chain), rows=rows or "(none)",
                      growth=self.growth_text(),
                      answers=answers, withheld=("[] (the customer keeps nothing back)" if withheld_n <= 0 else
                                                 f"the names of at most {withheld_n} known facts the customer "
                                                 "reveals only when asked"))
        try:
            obj = self.ask.json("instruction", msgs, validate=check)
        except LLMOutputError as e:
            raise TaskRejected(Reason.INSTRUCTION_UNGROUNDED, str(e)[:200]) from None
        prof = obj["user_profile"]
        known = {str(k): v for k, v in prof.get("known", {}).items()}
        profile = {"persona": str(prof.get("persona") or ""), "known": known,
                   "withheld": [w for w in prof.get("withheld", []) if w in known][:max(0, withheld_n)],
                   "goals": [str(g) for g in prof.get("goals", [])]}
        return obj["instruction"].strip(), profile

    # --- the whole attempt ----------------------------------------------------------------------------
    def run(self) -> Task:
        level, density, _ = self.plan()
        withheld = LEVELS[level][2]
        # unusable model output rejects the attempt; a failing endpoint (LLMError) stops the build
        self.chain = self.write_chain(level)
        initial = self.write_state(density)
        self.add_answer_fact()
        world, gold_keys, initial_hash, expected_hash = self.verify(initial)
        self.check_swap(initial, world, gold_keys)
        tools, extra = self.expand(initial, gold_keys)
        if extra:
            world, initial, initial_hash, expected_hash = self.reverify(extra, gold_keys)
        self.check_policy(initial)  # a gold write that breaks the policy is a task no good agent can do
        self.check_coherent(initial, world)  # the spec's (inferred) invariants hold before and after
        instruction, profile = self.write_user_side(withheld)
        task = self.make_llm_task(instruction, profile, tools, level, density, initial_hash, expected_hash, gold_keys)
        gates = run_gates(make_episode(self.spec, task, TaskWorlds(initial, world, gold_keys, [])), task, self.seed)
        if not gates.passed:
            raise TaskRejected(Reason.gate(gates.failures()[0]))
        task.verification.gates = gates.to_json()
        return task

    def make_llm_task(self, instruction: str, profile: dict[str, Any], tools: list[str], level: str, density: int,
                      initial_hash: str, expected_hash: str, gold_keys: dict[str, list[Any]]) -> Task:
        spec = self.spec
        return Task(
            id=f"{spec.name}/{self.attempt:05d}", domain=spec.name, instruction=instruction,
            user_profile=UserProfile.model_validate(profile),
            initial_patch=self.patch, gold_chain=self.chain,
            answer_facts=[AnswerFact(name=f["name"], value=f["value"]) for f in self.answer_facts], tools=tools,
            difficulty=Difficulty.model_validate(
                {"level": level, "chain_length": len(self.chain),
                 "sub_goals": sum(_tool(spec, c.tool).kind == "write" for c in self.chain)
                 + len(self.answer_facts),
                 "distractor_density": density, "withheld_facts": len(profile["withheld"]),
                 "chains": self.record["chains"], "tier": level}),
            verification=Verification.model_validate(
                {"backend": "llm",
                 "distractors": {t: sorted(ids, key=str) for t, ids in sorted(self.distractor_ids.items())},
                 "initial_hash": initial_hash, "expected_hash": expected_hash,
                 "gold_keys": {t: len(k) for t, k in gold_keys.items()}, "synthesis": self.record}),
            attempt=self.attempt)

    def check_swap(self, initial: bytes, world: World, gold_keys: dict[str, list[Any]]) -> None:
        """The swap gate before the expansion: the gold chain acting on a look-alike of a record it
        looks up must not reach the expected state. It needs only the chain, the rows and the answer
        facts, so a chain whose looked-up record leaves no trace is rejected before the solver, the
        gate and the instruction agent are asked (the gates run in full on the finished task)."""
        if not self.distractor_ids:
            return
        chain_tools = list(dict.fromkeys(c.tool for c in self.chain))
        draft = self.make_llm_task("(the swap check reads no instruction)", {"withheld": []}, chain_tools,
                                   self.tier or "medium", 1, "", "", gold_keys)
        ep = make_episode(self.spec, draft, TaskWorlds(initial, world, gold_keys, []))
        rng = random.Random(f"gates:{self.seed}:{draft.id}")
        for target, other in swap_pairs(ep, draft):
            if play_policy(ep, draft, SwapAgent(target, other), rng).score > 0.0:
                raise TaskRejected(Reason.gate("swap_not_0"))

    def answer_of(self, tool: ToolSpec, out: object) -> tuple[str, Any]:
        """The attribute a read goal asks about and its value in ``out`` (the last read's output)."""
        if tool.returns.mode == "scalar":
            return human(tool.name), out
        if not isinstance(out, dict):
            return "", None
        answer = tool.meta.get("answer")
        if answer and answer in out:
            return answer, out[answer]
        table = self.spec.table(tool.returns.table or "")
        if table is None:
            keys = [k for k in sorted(out) if k != "id"]
            return (keys[0], out[keys[0]]) if keys else ("", None)
        display = self.ctx.display_column(table.name)
        cols = [c for c in table.columns if c.name not in ("id", display) and not c.foreign_key
                and not c.unique and c.match != "exempt" and c.type not in ("json", "boolean")
                and out.get(c.name) is not None]
        cols.sort(key=lambda c: (c.name not in ("status", "state"), c.enum is None, c.name))
        if not cols:
            return "", None
        c = cols[0] if self.rng.random() < 0.5 else cols[self.rng.randrange(len(cols))]
        return f"{self.ctx.singular(table.name)} {c.name}", out[c.name]

    def add_answer_fact(self) -> None:
        """If the chain ends with a read, the user wants to learn what it returns: the value or one
        attribute of the record; of a list, the one record's attribute or how many records it holds."""
        last = self.spec.tool(self.chain[-1].tool)
        if last is None or last.kind != "read" or last.returns.mode not in ("one", "scalar", "many"):
            return
        scratch = World.from_snapshot(self.spec, self.world.snapshot())
        try:
            out = run_chain(scratch, self.spec, self.chain)[-1]
        except ChainError:
            return
        finally:
            scratch.close()
        if last.returns.mode == "many":
            if not isinstance(out, list) or not out:
                return
            if len(out) > 1:
                what = self.spec.table(last.returns.table or "")
                self.answer_facts.append({"name": f"number of {what.name if what else 'results'}".replace("_", " "),
                                          "value": len(out)})
                return
            out = out[0]
        name, value = self.answer_of(last, out)
        if name and value not in (None, "") and not isinstance(value, dict | list):
            self.answer_facts.append({"name": name, "value": value})


class _Exerciser:
    """Executes candidate tools on the task's state; patches the state (LLM first) when they fail."""

    def __init__(self, b: LLMTaskBuilder, initial: bytes, gold_keys: dict[str, list[Any]]):
        self.b = b
        self.spec = b.spec
        self.initial = initial
        self.world = World.from_snapshot(b.spec, initial)
        self.patch: dict[str, list[dict[str, Any]]] = {}
        self.gold_keys = gold_keys
        self.taken: set[Any] = set()
        self.budget = b.cfg.patch_budget

    def _runs(self, tool: ToolSpec, args: dict[str, Any] | None) -> tuple[bool, str]:
        if args is None:
            return False, "no arguments satisfy its preconditions"
        res = execute_tool(self.world, tool, args)
        self.world.restore(self.initial)
        return res.ok, "" if res.ok else f"{res.error}: {res.message}"

    def try_tool(self, name: str) -> bool:
        tool = self.spec.tool(name)
        assert tool is not None
        ok, _ = self._runs(tool, self.b.ctx.positive_args.get(name))
        if ok:
            return True
        known = self.b.ctx.positive_args.get(name)
        sampler = ArgSampler(self.world, self.b.rng)
        args = sampler.satisfying_args(tool, attempts=2, widen=True, hints=[known] if known else None)
        ok, error = self._runs(tool, args)
        if args is None and sampler.refusal is not None:
            error = f"{error}: {sampler.refusal.text(3)}"
        if ok:
            return True
        # free procedural patches first (the tool's own test fixture, re-keyed; a clone of a row): the
        # patch agent (a request) only when neither makes the call run
        return self.fixture_patch(tool) or self.clone_patch(tool) or self.llm_patch(tool, args, error)

    def _accept(self, rows: dict[str, list[dict[str, Any]]], tool: ToolSpec, args: dict[str, Any]) -> bool:
        trial = World.from_snapshot(self.spec, self.initial)
        try:
            apply_patch(trial, rows)
        except ScaleEnvError:
            trial.close()
            return False
        snap = trial.snapshot()
        ok = execute_tool(trial, tool, args).ok
        trial.close()
        if not ok or not self._gold_unchanged(snap):
            return False
        self.initial = snap
        self.world.restore(snap)
        for t, rs in rows.items():
            self.patch.setdefault(t, []).extend(rs)
        return True

    def _gold_unchanged(self, snap: bytes) -> bool:
        w = World.from_snapshot(self.spec, snap)
        try:
            run_chain(w, self.spec, self.b.chain)
            return {t: sorted(ks, key=str) for t, ks in w.touched().items()} == self.gold_keys
        except ChainError:
            return False
        finally:
            w.close()

    def llm_patch(self, tool: ToolSpec, args: dict[str, Any] | None, error: str) -> bool:
        if self.budget <= 0:
            return False
        self.budget -= 1
        b = self.b
        tables = [t for t in _tables_of(tool) if self.spec.table(t)] or [t.name for t in self.spec.tables][:4]
        pre = "\n".join(f"- {c.error}: {c.sql}" for c in tool.preconditions) or "- none"
        msgs = render("patch", title=b.title, tool_name=tool.name, tool=f"{tool_sig(tool)}\nPreconditions (error: SQL "
                      f"that must be true):\n{pre}",
                      tables=rules_text(self.spec, tables), rows=sample_rows(self.world, tables, per_table=1),
                      args=f"the call with arguments {jdump(args)}" if args else "the search for arguments",
                      error=error or "it failed",
                      next_ids=next_ids_text(next_ids(self.world, tables, skip=500 + 10 * b.record["llm_patches"])),
                      clock=self.spec.clock)

        def shape(obj: dict[str, Any]) -> list[str]:  # an object: ask.json expects one
            if not isinstance(obj.get("rows"), dict) or not isinstance(obj.get("args"), dict):
                return ["reply with {\"rows\": {table: [rows]}, \"args\": {parameter: value}}"]
            return []

        try:
            obj = b.ask.json("patch", msgs, validate=shape)
        except LLMOutputError:
            return False
        rows = {t: [dict(r) for r in rs if isinstance(r, dict)] for t, rs in obj["rows"].items()
                if self.spec.table(t) is not None and isinstance(rs, list)}
        if self._accept(rows, tool, obj["args"]):
            b.record["llm_patches"] += 1
            return True
        return False

    def fixture_patch(self, tool: ToolSpec) -> bool:
        """Procedural patch: the rows the tool's positive test ran on in Phase 1 (its test fixture), each
        given the next free id of its table here, links and the positive arguments re-keyed to match.
        Accepted only if the call then runs and the gold chain's changes stay as they were."""
        record = fixtures_of(self.b.ctx).get(tool.name) or {}
        fixture = record.get("rows") if isinstance(record, dict) else None
        if not isinstance(fixture, dict) or not fixture:
            return False
        known = self.b.ctx.positive_args.get(tool.name)
        # the test agent's positive cases name the fixture's own rows; the tester's arguments may name
        # rows of the Phase 1 world, which the domain's final base need not hold in the same state
        tries = [a for a in record.get("args") or [] if isinstance(a, dict)] + ([known] if isinstance(known, dict)
                                                                              else [])
        new_ids: dict[tuple[str, Any], Any] = {}
        reserved: dict[str, set[str]] = {}
        for t in table_order(self.spec):
            table = self.spec.table(t)
            for r in fixture.get(t) or []:
                if table is None or not isinstance(r, dict) or r.get(table.primary_key) is None:
                    continue
                nid = next_id(self.world, t, reserved.setdefault(t, set()))
                reserved[t].add(nid)
                new_ids[(t, r[table.primary_key])] = nid
        if not new_ids or not tries:
            return False
        rows: dict[str, list[dict[str, Any]]] = {t: [] for t, _ in new_ids}
        for t in rows:
            table = self.spec.table(t)
            assert table is not None
            for r in fixture.get(t) or []:
                if not isinstance(r, dict) or r.get(table.primary_key) is None:
                    continue
                row = {**r, table.primary_key: new_ids[(t, r[table.primary_key])]}
                for c in table.columns:
                    if c.foreign_key and row.get(c.name) is not None:
                        row[c.name] = new_ids.get((c.foreign_key.split(".")[0], row[c.name]), row[c.name])
                rows[t].append(row)
        for given in tries:
            args = {}
            for k, v in given.items():
                p = tool.param(k)
                target = self._id_table(p.column) if p is not None and p.column else None
                args[k] = new_ids.get((target, v), v) if target else v
            # the rows the call names and their parents first, then the fixture without the tables the
            # gold chain writes (a row there would shift the id the chain creates), then all of it
            created = {t for t, ks in self.gold_keys.items() if any(self.world.row(t, k) is None for k in ks)}
            for subset in (self._named_rows(rows, tool, args), self._without(rows, created), rows):
                if subset and self._accept(subset, tool, args):
                    self.b.record["fixture_patches"] = self.b.record.get("fixture_patches", 0) + 1
                    return True
        return False

    def _without(self, rows: dict[str, list[dict[str, Any]]], tables: set[str]) -> dict[str, list[dict[str, Any]]]:
        """``rows`` less those of ``tables`` and (transitively) the rows that link to a row left out."""
        gone = {(t, r.get("id")) for t in tables for r in rows.get(t, [])}
        out = {t: list(rs) for t, rs in rows.items() if t not in tables}
        changed = True
        while changed:
            changed = False
            for t, rs in out.items():
                table = self.spec.table(t)
                for r in list(rs):
                    if table and any(c.foreign_key and (c.foreign_key.split(".")[0], r.get(c.name)) in gone
                                     for c in table.columns):
                        rs.remove(r)
                        gone.add((t, r.get(table.primary_key)))
                        changed = True
        return {t: rs for t, rs in out.items() if rs}

    def _named_rows(self, rows: dict[str, list[dict[str, Any]]], tool: ToolSpec,
                    args: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """The rows of ``rows`` an argument names by id, with the rows they link to (transitively)."""
        by_key = {(t, r.get(self.spec.table(t).primary_key)): r for t, rs in rows.items()  # type: ignore[union-attr]
                  for r in rs}
        todo = [(self._id_table(p.column), args.get(p.name)) for p in tool.parameters if p.column]
        keep: dict[tuple[str, Any], dict[str, Any]] = {}
        while todo:
            t, k = todo.pop()
            if (t, k) in keep or (t, k) not in by_key or t is None:
                continue
            row = keep[(t, k)] = by_key[(t, k)]
            table = self.spec.table(t)
            for c in table.columns if table else []:
                if c.foreign_key and row.get(c.name) is not None:
                    todo.append((c.foreign_key.split(".")[0], row[c.name]))
        out: dict[str, list[dict[str, Any]]] = {}
        for (t, _), r in keep.items():
            out.setdefault(t, []).append(r)
        return out

    def _id_table(self, column: str) -> str | None:
        """The table whose ids ``table.column`` holds: its own (the primary key) or a foreign key's target."""
        t, _, c = column.partition(".")
        table = self.spec.table(t)
        col = table.column(c) if table else None
        if table is None or col is None:
            return None
        if col.foreign_key:
            return col.foreign_key.split(".")[0]
        return t if c == table.primary_key else None

    def clone_patch(self, tool: ToolSpec) -> bool:
        """Procedural fallback: a fresh clone of a row of the tool's focus table."""
        focus = self.b.ctx.focus(tool)
        if focus is None:
            return False
        table = self.spec.table(focus[1])
        if table is None:
            return False
        n = self.world.count(table.name)
        rng = self.b.rng
        for _ in range(2 if n else 0):
            cur = self.world.conn.execute(f'SELECT * FROM "{table.name}" LIMIT 1 OFFSET ?', (rng.randrange(n),))
            names = [d[0] for d in cur.description]
            base = dict(zip(names, cur.fetchone(), strict=True))
            clone = fresh_unique(table, {**base, "id": next_id(self.world, table.name)}, rng, self.taken)
            for c in table.columns:
                if c.enum and c.name in ("status", "state"):
                    clone[c.name] = c.enum[rng.randrange(len(c.enum))]
            trial = World.from_snapshot(self.spec, self.initial)
            try:
                apply_patch(trial, {table.name: [clone]})
            except ScaleEnvError:
                trial.close()
                continue
            known = self.b.ctx.positive_args.get(tool.name)
            args = ArgSampler(trial, rng).satisfying_args(tool, attempts=2, widen=True,
                                                          hints=[known] if known else None)
            trial.close()
            if args is not None and self._accept({table.name: [clone]}, tool, args):
                self.b.record["procedural_patches"] += 1
                return True
        return False


def _attempt_builder(ctx: DomainContext, ask: Scoped, seed: int, attempt: int, cfg: SynthConfig,
                     family_mix: dict[str, float] | None,
                     tier_mix: dict[str, float] | None) -> tuple[TaskBuilder, str]:
    """The builder of ``attempt`` and its family: the task agents' (``direct``) or a procedural family's."""
    from scaleenv.synth.tasks.families import FAMILIES, pick_family
    from scaleenv.synth.tasks.tiers import draw_tier

    task_ask = ask.for_task(f"{ctx.spec.name}/{attempt:05d}")
    builder: TaskBuilder
    family = DEFAULT_FAMILY
    if family_mix is None:
        builder = LLMTaskBuilder(ctx, task_ask, seed, attempt, cfg)
    else:
        rng = random.Random(f"family:{seed}:{ctx.spec.name}:{attempt}")
        family = pick_family(ctx, rng, family_mix)
        if family == DEFAULT_FAMILY:
            builder = LLMTaskBuilder(ctx, task_ask, seed, attempt, cfg)
        else:
            lo, hi = cfg.chain_length
            builder = FAMILIES[family](ctx, seed, attempt, ChainConfig(min_length=lo, max_length=hi,
                                                                       min_tools=cfg.min_task_tools))
        builder.tier = draw_tier(rng, tier_mix, builder.tiers)
    if isinstance(builder, LLMTaskBuilder):
        def sibling(a: int) -> LLMTaskBuilder | None:
            b, _ = _attempt_builder(ctx, ask, seed, a, cfg, family_mix, tier_mix)
            return b if isinstance(b, LLMTaskBuilder) else None

        builder.siblings = sibling
    return builder, family


def generate_llm_task(ctx: DomainContext, ask: Scoped, seed: int, attempt: int, cfg: SynthConfig,
                      family_mix: dict[str, float] | None = None, tier_mix: dict[str, float] | None = None) -> Task:
    """One LLM-built, verified task for ``attempt`` or TaskRejected (token use is charged to the task).

    With a ``family_mix`` the family is drawn per attempt as the procedural back end draws it: the
    ``direct`` family is written by the task agents, the others (whose logic is procedural over the
    spec: computed, description, bulk, ...) by their procedural builders on the LLM-made domain,
    where the domain can host them (``verification.synthesis`` says which). The chains of an aligned
    window of ``cfg.chain_batch`` direct attempts come from one request (see
    :meth:`LLMTaskBuilder.write_chain_batched`)."""
    builder, family = _attempt_builder(ctx, ask, seed, attempt, cfg, family_mix, tier_mix)
    task = builder.run()
    if family != DEFAULT_FAMILY:
        task.verification.backend = "llm"
        task.verification.synthesis = {"family": family, "builder": "procedural"}
    return task
