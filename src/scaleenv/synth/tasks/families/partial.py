"""The ``partial`` family: several requests, some allowed and one that a rule of the domain's policy
forbids. The right outcome: the allowed changes made, the forbidden one not, and the user told why
(see :mod:`~scaleenv.synth.tasks.families.refusal`)."""

from __future__ import annotations

from scaleenv.formats.domain import ToolSpec
from scaleenv.synth.tasks.families.refusal import RefusalBuilder
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.tools.policy import broken_rules
from scaleenv.world.world import World

TRIES = 4
"""Candidate allowed goals tried per task."""


class PartialBuilder(RefusalBuilder):
    """One refused request and one or two allowed changes on the same records."""

    family = "partial"
    level_weights = {"hard": 1.0}

    def allowed_goals(self, scratch: World, level: str, refused: ToolSpec) -> None:
        want = self.rng.randint(1, 2)
        added = 0
        for _ in range(TRIES):
            if added >= want or len(self.chain) >= self.config.max_length - 1:
                break
            snap = scratch.snapshot()
            marks = (len(self.chain), len(self.goals), len(self.effects))
            if not self.add_more_goal(scratch):
                break
            goal = self.goals[-1]
            before = World.from_snapshot(self.spec, snap)
            try:
                bad = goal.tool.name == refused.name or bool(broken_rules(before, self.spec, goal.tool, goal.args))
            finally:
                before.close()
            if bad:  # the same kind of request, or one the policy forbids too: not an allowed one
                scratch.restore(snap)
                del self.chain[marks[0]:], self.goals[marks[1]:], self.effects[marks[2]:]
                continue
            added += 1
        if not added:
            raise TaskRejected(Reason.NO_ALLOWED_GOAL)


__all__ = ["PartialBuilder"]
