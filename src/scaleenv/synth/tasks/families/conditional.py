"""The ``conditional`` family: "if the balance of my account is at least 120, do A; otherwise do B".
The condition is on a number of the record the request acts on, which the agent must look up; the
threshold is drawn so that either branch is taken across tasks. A and B are two different changes of
the same record, each allowed from the task's initial world and each with its own effect, so doing the
other branch scores 0. The task's gold chain takes the branch the data says.
"""

from __future__ import annotations

import re
from typing import Any

from scaleenv.env.language import spoken
from scaleenv.errors import ToolError
from scaleenv.formats.domain import ToolSpec
from scaleenv.formats.task import Objective, Task
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.selection import measure_words, plural_measure
from scaleenv.synth.tasks.generate import LEVELS, ChainConfig, TaskBuilder, TaskRejected
from scaleenv.synth.tasks.instruction import CONNECTORS, EntityRef, Goal, build_user_side, human, is_person
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.validity import call_effect, exempt_columns
from scaleenv.tools.policy import broken_rules
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.world import World

ALTERNATIVES = 8
"""Candidate tools tried for the other branch."""



def _lower_first(s: str) -> str:
    first = s.split(" ", 1)[0]
    if first in ("I", "I'd", "I'm", "I've", "I'll") or first.isupper():
        return s
    return s[0].lower() + s[1:]


def _nice(v: float, integer: bool) -> float:
    """A round threshold near ``v``: two significant figures from 100 up, whole numbers from 20."""
    if v >= 100:
        digits = len(str(int(v))) - 2
        return float(round(v / 10 ** digits) * 10 ** digits)
    if v >= 20 or integer:
        return float(round(v))
    return round(v, 1)


_CAP = re.compile(r"quota|capacity|limit|allowance|allocation|budget|max|total|seats")
"""Columns that cap another number of their row (a mailbox's quota, a venue's capacity)."""

_PARTICLE = re.compile(r"\b(turn|switch|take|put|set|pull|hand|give|send|call|write|mark|shut|close) "
                       r"(off|on|down|up|back|out|in|over|away) it\b", re.IGNORECASE)


def names_of(ref: EntityRef) -> list[str]:
    """Patterns for the ways a branch's text may name ``ref``, longest first: its full description, its
    noun with its facts (and the record it is found under, parentheses left out), and a determiner with
    another noun before those facts where they are specific ("my ad LST-0073", "the lowball bid 221 at
    listing LST-0074")."""
    noun = human(ref.singular)
    own = ref.short()
    rests = {own.removeprefix(noun + " ") if own.lower().startswith(noun.lower() + " ") else own}
    if ref.within is not None:  # short() is "<own facts> at <the record it is found under>"
        under = ref.within.describe()
        facts = own.removesuffix(f" at {under}")
        rests |= {f"{facts} at {under}", f"{facts} at " + re.sub(r"\s*\([^()]*\)$", "", under)}
    names = {re.escape(ref.describe())} | {re.escape(f"{noun} {rest}") for rest in rests}
    names |= {rf"(?:my|the|our|your) (?:[a-z]+ ){{1,2}}?{re.escape(rest)}" for rest in rests
              if re.search(r"\d", rest) or len(rest) >= 12}
    # another noun alone before facts that name the record: "on bill status open at ...", "towards contract from 2026-05-06"
    names |= {rf"[a-z]+ {re.escape(rest)}" for rest in rests if " at " in rest or rest.startswith("from ")}
    return sorted(names, key=len, reverse=True)


def as_it(text: str, ref: EntityRef) -> str:
    """``text`` with ``ref`` named as "it" (the condition before it has just named the record): "If the
    amount of my invoice INV-0012 is at least 140, void it; otherwise, put a payment of 105 on it"."""
    for name in names_of(ref):
        # not where another record is found under it ("my offer 100 at listing LST-0073")
        text = re.sub(rf"(?<!\bat )(?:\b(?:my|the|our|your) )?\b{name}(?![\w-])", "it", text, flags=re.IGNORECASE)
    text = re.sub(r"\bthe ([a-z]+(?: [a-z]+)?) of it\b", r"its \1", text)  # "the notes of it" -> "its notes"
    text = re.sub(r", it(?=[;.]|$)", "", text)  # "release the venue we had on hold, it" (an appositive)
    return _PARTICLE.sub(r"\1 it \2", text)  # "turn off it" -> "turn it off"


def _body(sentences: list[str]) -> str:
    """The goals joined as :func:`~scaleenv.synth.tasks.instruction.build_user_side` joins them."""
    return " ".join((CONNECTORS[min(i, 3)] + _lower_first(s)) if i else s for i, s in enumerate(sentences))


class ConditionalBuilder(TaskBuilder):
    """One change whose form depends on a number of the record, stated as a condition."""

    family = "conditional"

    @classmethod
    def applies(cls, ctx: DomainContext) -> bool:
        return len(ctx.goal_tools) >= 2

    def __init__(self, ctx: DomainContext, seed: int, attempt: int, config: ChainConfig):
        super().__init__(ctx, seed, attempt, config)
        self.branches: tuple[Goal, Goal] | None = None  # (when the condition holds, otherwise)
        self.untaken_tool: str | None = None
        self.condition = ""
        self.condition_table = ""
        self.test: tuple[str, float, bool] | None = None
        """(column, threshold, whether the target's value reaches it)."""

    def pick_condition(self, table: str, row: dict[str, Any]) -> tuple[str, bool]:
        """A condition on a positive number of ``row`` ("the weight kg of ... is at least 12"), and
        whether it holds."""
        tbl = self.spec.table(table)
        assert tbl is not None
        exempt = exempt_columns(self.spec, table)
        cols = [c for c in tbl.columns if c.type in ("integer", "real") and not c.foreign_key and c.name not in exempt
                and isinstance(row.get(c.name), int | float) and not isinstance(row.get(c.name), bool)
                and row[c.name] >= 2]
        if not cols:
            raise TaskRejected(Reason.NO_CONDITION_COLUMN, table)
        col = cols[self.rng.randrange(len(cols))]
        x = float(row[col.name])
        holds = self.rng.random() < 0.5
        factor = self.rng.uniform(0.55, 0.9) if holds else self.rng.uniform(1.1, 1.6)
        t = _nice(x * factor, col.type == "integer")
        # no threshold beyond what the record allows: its column's maximum, or a cap the row holds beside it
        # (storage used "at least 1400" against a quota of 1024 MB would be settled before it was looked up)
        caps = [float(row[c.name]) for c in cols if c is not col and _CAP.search(c.name) and row[c.name] >= x]
        if (col.max is not None and t > col.max) or (caps and t > min(caps)):
            holds, t = True, _nice(x * self.rng.uniform(0.55, 0.9), col.type == "integer")
        if (x >= t) != holds or t < 2 or t == x:  # "at least 1" of a count would hold for any record
            raise TaskRejected(Reason.NO_CONDITION_COLUMN, table)
        self.test = (col.name, t, holds)
        measure = measure_words(col)  # "the weight of my pet", "my loyalty points are"
        verb = "are" if plural_measure(measure) else "is"
        return f"{{the}} {measure}{{of}} {verb} at least {spoken(int(t) if float(t).is_integer() else t)}", holds

    def alternative(self, scratch: World, primary: ToolSpec, args: dict[str, Any],
                    focus: tuple[str, str], effect: dict[Any, Any]) -> tuple[ToolSpec, dict[str, Any]]:
        """Another change of the same record, allowed now, with another effect and no literal argument
        named like one of the primary's (the user's facts would collide)."""
        literal = {k for k in args if k not in self.ctx.key_params(primary)}
        options = [t for t in self.ctx.goal_tools if t.name != primary.name and (f := self.ctx.focus(t)) is not None
                   and f[1] == focus[1]]
        self.rng.shuffle(options)
        # the same kind of change reads as one decision ("change the breed, else the weight"), so it goes first
        options.sort(key=lambda t: t.meta.get("family") != primary.meta.get("family"))
        sampler = ArgSampler(scratch, self.rng)
        target = args[focus[0]]
        for tool in options[:ALTERNATIVES]:
            f = self.ctx.focus(tool)
            assert f is not None
            alt = sampler.satisfying_args(tool, attempts=3, fixed={f[0]: target})
            alt = self.trim_args(tool, alt) if alt is not None else None
            if alt is None or self.exempt_input(tool, alt) or literal & {k for k in alt if k != f[0]}:
                continue
            if any(v in self.distractor_ids.get(t, ()) for k, v in alt.items()
                   for t in [self.ctx.key_params(tool).get(k)] if t):
                continue
            if broken_rules(scratch, self.spec, tool, alt):
                continue
            snap = scratch.snapshot()
            try:
                changed = call_effect(self.spec, scratch, snap, tool, alt)
            except ToolError:
                changed = {}
            scratch.restore(snap)
            if changed and changed != effect:
                return tool, alt
        raise TaskRejected(Reason.NO_ALTERNATIVE_BRANCH, primary.name)

    def sample_chain(self) -> tuple[bytes, str, int, int]:
        ctx, rng = self.ctx, self.rng
        level = rng.choice(["medium", "hard"])
        _, (d_lo, d_hi), withheld, _ = LEVELS[level]
        density = rng.randint(d_lo, d_hi)
        primary = self.pick_goal_tool(ctx.goal_tools)
        if primary is None:
            raise TaskRejected(Reason.NO_GOAL_TOOLS)
        focus = ctx.focus(primary)
        assert focus is not None
        args = ArgSampler(self.world, rng).satisfying_args(primary)
        if args is None:
            raise TaskRejected(Reason.NO_SATISFYING_ARGS, primary.name)
        args, clones = self.clone_goal_rows(primary, args, density)
        trimmed = self.trim_args(primary, args)
        if trimmed is None or self.exempt_input(primary, trimmed):
            raise TaskRejected(Reason.UNSTATED_ARGUMENT, primary.name)
        args = trimmed
        row = self.world.row(focus[1], args[focus[0]])
        assert row is not None
        condition, holds = self.pick_condition(focus[1], row)
        self.resolve_entities(clones)
        self.add_lookalikes()
        initial, scratch = self.run_seed_chain()
        snap = scratch.snapshot()
        try:
            effect = call_effect(self.spec, scratch, snap, primary, args)
        except ToolError as e:
            raise TaskRejected(Reason.GOAL_FAILED, f"{primary.name}: {e}") from None
        scratch.restore(snap)
        if not effect:
            raise TaskRejected(Reason.NOOP_SUBGOAL, primary.name)
        other_tool, other_args = self.alternative(scratch, primary, args, focus, effect)
        branch_a, branch_b = (primary, args), (other_tool, other_args)
        taken, other = (branch_a, branch_b) if holds else (branch_b, branch_a)
        self.add_write_goal(scratch, *taken)
        taken_goal = self.goals[-1]
        if taken_goal.args != taken[1]:
            raise TaskRejected(Reason.NOOP_SUBGOAL, taken[0].name)
        refs = {k: self.entities[t] for k, v in other[1].items()
                if (t := ctx.key_params(other[0]).get(k)) in self.entities and self.entities[t].row["id"] == v}
        other_goal = Goal(other[0], other[1], refs)
        self.goals.append(other_goal)
        self.branches = (taken_goal, other_goal) if holds else (other_goal, taken_goal)
        self.untaken_tool = other[0].name
        self.condition = condition  # {target} is filled once the user side knows who speaks
        self.condition_table = focus[1]
        while len(self.chain) < self.config.min_length:
            if not self.add_more_goal(scratch, read=True, confirm=True):
                raise TaskRejected(Reason.CHAIN_TOO_SHORT)
        if len(self.chain) > self.config.max_length:
            raise TaskRejected(Reason.CHAIN_TOO_LONG)
        return initial, level, density, withheld

    def required_tools(self) -> tuple[str, ...]:
        """The branch not taken is a choice the agent must be able to make: its tool is in the task
        (without it, the tool list alone tells which branch to take)."""
        return super().required_tools() + ((self.untaken_tool,) if self.untaken_tool else ())

    def user_side(self, root: EntityRef | None, withheld: int) -> tuple[str, dict[str, Any]]:
        """The two branches as one goal: "If the X of my Y is at least T, A; otherwise, B." """
        instruction, profile = build_user_side(self.spec, root, self.entities, self.goals, withheld, self.rng)
        assert self.branches is not None
        i = next(j for j, g in enumerate(self.goals) if g is self.branches[0])
        k = next(j for j, g in enumerate(self.goals) if g is self.branches[1])
        old = list(profile["goals"])
        when, otherwise = old[i].rstrip(".?!"), old[k].rstrip(".!")
        ref = self.entities[self.condition_table]
        if root is not None and ref is root and is_person(self.spec, root):  # the user's own record: "my balance"
            condition = self.condition.replace("{the}", "my").replace("{of}", "")
        else:
            condition = self.condition.replace("{the}", "the").replace("{of}", " of " + ref.describe())
        if not is_person(self.spec, ref):
            when, otherwise = as_it(when, ref), as_it(otherwise, ref)
        end = "" if otherwise.endswith("?") else "."  # "otherwise, could you book it for Friday?"
        sentence = f"If {condition}, {_lower_first(when)}; otherwise, {_lower_first(otherwise)}{end}"
        sentence = re.sub(r"\bmy my\b", "my", sentence)
        objectives = [Objective.model_validate(o) for o in profile["objectives"]]
        a, b = objectives[i], objectives[k]
        merged = Objective(kind="write", text=sentence, done_words=list(dict.fromkeys(a.done_words + b.done_words)),
                           subject=list(dict.fromkeys(a.subject + b.subject)))
        first, last = min(i, k), max(i, k)
        goals = [g for j, g in enumerate(old) if j != last]
        goals[first] = sentence
        objs = [o for j, o in enumerate(objectives) if j != last]
        objs[first] = merged
        head = f"{profile['persona']} {_body(old)}".strip()
        if not instruction.startswith(head):
            raise TaskRejected(Reason.INSTRUCTION_SHAPE)
        instruction = f"{profile['persona']} {_body(goals)}".strip() + instruction[len(head):]
        profile = {**profile, "goals": goals, "objectives": [o.model_dump(mode="json") for o in objs]}
        return instruction, profile

    def make_task(self, initial_hash: str, expected_hash: str, gold_keys: dict[str, list[Any]], tools: list[str],
                  level: str, density: int, withheld: int) -> Task:
        task = super().make_task(initial_hash, expected_hash, gold_keys, tools, level, density, withheld)
        task.difficulty.sub_goals = len(task.user_profile.goals)
        task.difficulty.tier = task.difficulty.level
        return task


__all__ = ["ConditionalBuilder"]
