"""The ``partial`` family: several requests, some allowed and one that a rule of the domain's policy
forbids. The right outcome: the allowed changes made, the forbidden one not, and the user told why
(see :mod:`~scaleenv.synth.tasks.families.refusal`)."""

from __future__ import annotations

from typing import Any

from scaleenv.errors import ToolError
from scaleenv.formats.domain import ToolSpec
from scaleenv.synth.tasks.families.refusal import RefusalBuilder
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.validity import call_effect, clashes, ended_while_edited
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
                bad = bad or self.contradicts_refused(before, snap, refused, self.effects[-1] if
                                                      len(self.effects) > marks[2] else {})
            finally:
                before.close()
            # the same kind of request, one the policy forbids too, or another move for the cell the
            # refused one would change ("resume my subscription ... cancel it"): not an allowed one
            if bad:
                scratch.restore(snap)
                del self.chain[marks[0]:], self.goals[marks[1]:], self.effects[marks[2]:]
                continue
            added += 1
        if not added:
            raise TaskRejected(Reason.NO_ALLOWED_GOAL)

    def contradicts_refused(self, before: World, snap: bytes, refused: ToolSpec, changed: dict[Any, Any]) -> bool:
        """Whether the refused call, made on the state before the allowed goal, would change a cell the
        allowed goal changes (the two are alternatives for one record, not two requests)."""
        if not changed:
            return False
        try:
            cells = call_effect(self.spec, before, snap, refused, self.refused_args)
        except ToolError:
            return False
        finally:
            before.restore(snap)
        return any(clashes(a, b) for a in changed for b in cells) or ended_while_edited(cells, changed) is not None


__all__ = ["PartialBuilder"]
