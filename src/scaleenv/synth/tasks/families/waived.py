"""The ``waived`` family: the user asks for a change that a rule of the domain's policy covers, but the
rule's exception allows ("a reservation cannot be cancelled less than 30 days before departure, unless
it has travel insurance": this one departs in a week and is insured). The right outcome: the change made.

An agent that reads the rule without its exception refuses, and the strict gate checks that this scores
0 (the gold chain without its waived step). The task's tools show the data the rule and its exception
read, so the agent must look before it decides; at the hard and expert tiers the request comes with one
or two further allowed changes on the same records.

Where the domain has one, the first further change is an order trap: a change that ends the exception
("and put the fixture back on the schedule" beside refunding a ticket of that postponed fixture). The user
asks for it first; made first, it makes the waived change break the rule, which the environment checks at
the moment of each write. The right outcome is both changes, the waived one first (``Task.ordered``).
"""

from __future__ import annotations

from typing import Any

from scaleenv.formats.domain import PolicyRule, ToolSpec
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.refusal import RefusalBuilder, policy_rules
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.tools.policy import waived_rules
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.world import World

FURTHER = {"medium": 0, "hard": 1, "expert": 2}
"""Further allowed changes asked for beside the waived one, per tier."""


def exception_rules(ctx: DomainContext) -> list[tuple[PolicyRule, ToolSpec]]:
    """(rule, tool) for every rule of the domain's policy with an exception, over one of its goal tools."""
    return [(r, t) for r, t in policy_rules(ctx) if r.unless]


class WaivedBuilder(RefusalBuilder):
    """One request that a rule covers and its exception allows (and, at higher tiers, further allowed ones)."""

    family = "waived"
    tiers = ("medium", "hard", "expert")
    level_weights = {"medium": 0.4, "hard": 0.45, "expert": 0.15}

    @classmethod
    def applies(cls, ctx: DomainContext) -> bool:
        return bool(exception_rules(ctx))

    def pick_level(self) -> str:
        return self.tier if self.tier in FURTHER else super().pick_level()

    def find_waiver(self) -> tuple[PolicyRule, ToolSpec, dict[str, Any]]:
        """A rule with an exception and a call of its tool (preconditions met) that the rule covers and the
        exception allows, in the base world."""
        return self.find_call(exception_rules(self.ctx), waived_rules, Reason.NO_WAIVED_CALL)

    def sample_chain(self) -> tuple[bytes, str, int, int]:
        level = self.tier = self.pick_level()
        rule, tool, args, initial, scratch, density, withheld = self.start_on_rule(level, self.find_waiver)
        if rule not in waived_rules(scratch, self.spec, tool, args):
            raise TaskRejected(Reason.NO_WAIVED_CALL, f"{rule.name} on the task's records")
        before = scratch.snapshot()
        self.add_write_goal(scratch, tool, args)
        further = FURTHER[level]
        if further and len(self.chain) < self.config.max_length and self.add_order_trap(scratch, before, tool, args):
            further -= 1
        for _ in range(further):
            if len(self.chain) >= self.config.max_length or not self.add_more_goal(scratch):
                break
        self.fit_length(scratch)
        return initial, level, density, withheld

    def add_order_trap(self, scratch: World, before: bytes, tool: ToolSpec, args: dict[str, Any]) -> bool:
        """A further change on the task's records that, made before the waived ``tool(args)`` (on
        ``before``, the world the waived change was made on), would make it break its rule; asked for
        first, made after it. False where none of the options is one."""
        waived_goal = self.goals[-1]
        sampler = ArgSampler(scratch, self.rng)
        for other, fixed in self.more_goal_options():
            if other.kind != "write":
                continue
            drawn = sampler.satisfying_args(other, attempts=3, fixed=fixed)
            trimmed = self.trim_args(other, drawn) if drawn is not None else None
            if trimmed is None or self.exempt_input(other, trimmed) or not self.ends_exception(before, other, trimmed,
                                                                                                tool, args):
                continue
            changed = self.observable_effect(scratch, other, trimmed)
            if changed is None:
                continue
            self.effects.append(changed)
            self.goal_call(other, trimmed)
            self.goals.insert(self.goals.index(waived_goal), self.goals.pop())
            return True
        return False

    def ends_exception(self, before: bytes, other: ToolSpec, other_args: dict[str, Any], tool: ToolSpec,
                       args: dict[str, Any]) -> bool:
        """Whether ``other(other_args)``, made first on ``before``, makes ``tool(args)`` break a rule (the
        call itself still runs: the wrong order is a broken rule, not a tool error)."""
        return bool(self.rules_after(before, other, other_args, tool, args))

    def check_policy(self, initial: bytes) -> None:
        super().check_policy(initial)
        if not self.waived:
            raise TaskRejected(Reason.NO_WAIVED_CALL, "no step of the gold chain is waived")


__all__ = ["WaivedBuilder", "exception_rules"]
