"""The ``enabled`` family: the user asks for a change that a rule of the domain's policy forbids as things
stand, and, after it, for another change that lifts the rule's condition ("renew loan LON-0013 ... and I'd
like to pay 7.00 of my fines": with 12.50 due, more than 6 dollars forbids the renewal; with 5.50 it is
allowed). The right outcome: both changes, the one that lifts the condition first.

The rules are checked at the moment of each write, so the requests made in the order the user said them
break the rule (the order gate checks that this scores 0), and an agent that reads the rule once, before
anything is done, refuses a change that it could make (the changes it made instead fall short). The
task's ``ordered`` pair records the order.
"""

from __future__ import annotations

import re
from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import PolicyRule, ToolSpec
from scaleenv.formats.task import Call
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.refusal import RefusalBuilder, policy_rules, sole_broken_rule
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.validity import ENDING, call_effect, clashes
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.world import World

DRAWS = 3
"""Argument draws per candidate change that might lift the rule's condition."""

FURTHER = {"hard": 0, "expert": 1}
"""Further allowed changes asked for beside the two, per tier."""


_SET = re.compile(r"\bUPDATE\s+\"?(\w+)\"?\s+SET\s+(.*?)(?:\bWHERE\b|$)", re.IGNORECASE | re.DOTALL)


def _cells_set(tool: ToolSpec) -> set[tuple[str, str]]:
    """The (table, column) pairs ``tool``'s UPDATE effects set."""
    return {(table, column) for effect in tool.effects for table, assignments in _SET.findall(effect)
            for column in re.findall(r"\"?(\w+)\"?\s*=", assignments)}


def lifting_tools(ctx: DomainContext, rule: PolicyRule) -> list[str]:
    """The goal tools that are business steps (not a plain edit of a column) and whose effects set a
    column the rule's condition or exception reads, besides the cells the ruled change itself sets
    (two moves of one status are no step that lifts a rule): the changes that could lift it."""
    words = set(re.findall(r"\w+", f"{rule.forbid or ''} {rule.unless or ''}"))
    policy = ctx.spec.policy
    ruled = {cell for t in ctx.goal_tools if policy is not None and rule in policy.checks(t.name)
             for cell in _cells_set(t)}
    out = []
    for tool in ctx.goal_tools:
        if tool.kind != "write" or tool.name in rule.tools or tool.meta.get("family") == "update":
            continue
        lifts = {(table, column) for table, column in _cells_set(tool) if table in words and column in words}
        if lifts - ruled:
            out.append(tool.name)
    return sorted(set(out))


class EnabledBuilder(RefusalBuilder):
    """A change the policy forbids until another change asked for after it is made."""

    family = "enabled"
    tiers = ("hard", "expert")
    level_weights = {"hard": 0.7, "expert": 0.3}

    @classmethod
    def applies(cls, ctx: DomainContext) -> bool:
        return any(lifting_tools(ctx, rule) for rule, _ in policy_rules(ctx))

    def pick_level(self) -> str:
        return self.tier if self.tier in FURTHER else super().pick_level()

    def find_violation(self) -> tuple[PolicyRule, ToolSpec, dict[str, Any]]:
        """A call that breaks a rule some business step could lift (see :func:`lifting_tools`)."""
        options = [(r, t) for r, t in policy_rules(self.ctx) if lifting_tools(self.ctx, r)]
        return self.find_call(options, sole_broken_rule, Reason.NO_POLICY_VIOLATION)

    def sample_chain(self) -> tuple[bytes, str, int, int]:
        level = self.tier = self.pick_level()
        rule, tool, args, initial, scratch, density, withheld = self.start_on_rule(level, self.find_violation)
        self.still_broken(rule, tool, args, scratch)
        if not self.add_enabler(scratch, tool, args):
            raise TaskRejected(Reason.NO_ENABLING_CHANGE, rule.name)
        enabler = self.goals[-1]
        self.add_write_goal(scratch, tool, args)
        # the user asks for the forbidden-looking change first, and for what lifts the rule after it
        self.goals.insert(self.goals.index(enabler), self.goals.pop())
        for _ in range(FURTHER[level]):
            if len(self.chain) >= self.config.max_length or not self.add_more_goal(scratch):
                break
        self.fit_length(scratch)
        return initial, level, density, withheld

    def add_enabler(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> bool:
        """A change on the task's records after which ``tool(args)`` breaks no rule and still runs; made
        on ``scratch`` and added as a goal. False where no option's draws give one. A business step (a
        transition, an operation: postpone the fixture, pay the fines), never a plain edit of a column
        (setting an enrollment's progress to 25 so it can be paused reads as getting round the rule)."""
        sampler = ArgSampler(scratch, self.rng)
        lifting = {n for rule in self.spec.policy.checks(tool.name) for n in lifting_tools(self.ctx, rule)} \
            if self.spec.policy is not None else set()
        ends = bool(ENDING.match(str(tool.meta.get("to", ""))))
        for other, fixed in self.more_goal_options() + self.linked_options(scratch, tool, args, lifting):
            if other.name not in lifting or ends and any(e.lstrip().upper().startswith("INSERT") for e in other.effects):
                continue  # nothing new is started for a record about to end (a rental on a profile to close)
            for _ in range(DRAWS):
                drawn = sampler.satisfying_args(other, attempts=3, fixed=fixed)
                trimmed = self.trim_args(other, drawn) if drawn is not None else None
                if trimmed is None or self.exempt_input(other, trimmed) or self.breaks_a_rule(scratch, other, trimmed) \
                        or self.foreign_call(Call(tool=other.name, args=trimmed)) \
                        or not self.lifts(scratch, other, trimmed, tool, args):
                    continue  # the step is itself allowed, the user's to ask for, and lifts the rule
                pre = scratch.snapshot()
                changed = self.observable_effect(scratch, other, trimmed)
                if changed is None:
                    continue
                if self.overwrites(scratch, tool, args, changed):
                    scratch.restore(pre)
                    continue
                self.effects.append(changed)
                self.goal_call(other, trimmed)
                return True
        return False

    def linked_options(self, scratch: World, tool: ToolSpec, args: dict[str, Any], lifting: set[str]
                       ) -> list[tuple[ToolSpec, dict[str, Any]]]:
        """The lifting tools that act on a record linked to the target, each with its id: a child (an
        interview of the application to withdraw, for a rule over its scheduled interviews; in id order)
        or the parent a foreign key names (the patron of the loan to renew, for a rule over the patron's
        fines)."""
        focus = self.ctx.focus(tool)
        table = self.spec.table(focus[1]) if focus is not None else None
        if focus is None or table is None:
            return []
        target = scratch.row(focus[1], args[focus[0]]) or {}
        parents = {c.foreign_key.split(".")[0]: target.get(c.name) for c in table.columns if c.foreign_key}
        child_links = dict(self.ctx.children(focus[1]))
        out = []
        for other in self.ctx.goal_tools:
            near = self.ctx.focus(other) if other.name in lifting else None
            if near is None:
                continue
            # any key of the child naming the target counts (a parcel's courier, not only its sender)
            link_column = child_links.get(near[1])
            if link_column is not None:
                for child in sorted(r["id"] for r in scratch.rows(near[1]) if r.get(link_column) == args[focus[0]]):
                    out.append((other, {near[0]: child}))
            elif parents.get(near[1]) is not None and near[1] not in self.entities:
                out.append((other, {near[0]: parents[near[1]]}))
        return out

    def overwrites(self, scratch: World, tool: ToolSpec, args: dict[str, Any], changed: dict[Any, Any]) -> bool:
        """Whether ``tool(args)``, made on ``scratch``, changes a cell the change before it set ("keep the
        draft as a draft", then "discard it": two moves of one record's status, not a change that lifts
        a rule and one it allows)."""
        snap = scratch.snapshot()
        trial = World.from_snapshot(self.spec, snap)
        try:
            cells = call_effect(self.spec, trial, snap, tool, args)
        except ToolError:
            return True
        finally:
            trial.close()
        return any(clashes(a, b) for a in changed for b in cells)

    def lifts(self, scratch: World, other: ToolSpec, other_args: dict[str, Any], tool: ToolSpec,
              args: dict[str, Any]) -> bool:
        """Whether ``tool(args)``, made after ``other(other_args)``, runs and breaks no rule."""
        return self.rules_after(scratch.snapshot(), other, other_args, tool, args) == []

    def check_policy(self, initial: bytes) -> None:
        super().check_policy(initial)
        if not self.ordered:
            raise TaskRejected(Reason.NO_ENABLING_CHANGE, "the changes can be made in either order")


__all__ = ["EnabledBuilder"]
