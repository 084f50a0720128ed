"""The ``long`` family: a long horizon, 10-20 calls over several records ("for every checked-in
appointment of Rex: mark it completed, then add a bill of 40 to it; then ...").

A bulk request over 3-5 of the user's records, then one or two further writes on each of them
that depend on the earlier ones (a transition only the first write makes possible, a record added
to what the first write changed), then the other goals on the user's other records; attempts that
end below 10 calls are rejected.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scaleenv.formats.domain import ToolSpec
from scaleenv.synth.tasks.families.bulk import BulkBuilder
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.validity import shows
from scaleenv.tools.chain import run_chain
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.world import World

MIN_CALLS = 10
MAX_CALLS = 20
COUNTS = {"easy": (3, 4), "medium": (3, 4), "hard": (3, 5), "expert": (4, 5)}
STAGES = {"easy": 1, "medium": 1, "hard": 1, "expert": 2}
"""Further writes on every record, per tier (after the first)."""


class LongBuilder(BulkBuilder):
    """Several linked writes over every record a condition covers, and more goals after them."""

    family = "long"
    tiers = ("hard", "expert")
    counts = COUNTS

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.config = replace(self.config, max_length=max(self.config.max_length, MAX_CALLS))

    def add_write_goal(self, scratch: World, tool: ToolSpec, args: dict[str, Any]) -> None:
        super().add_write_goal(scratch, tool, args)
        for _ in range(STAGES.get(self.tier or "hard", 1)):
            if len(self.chain) + 1 + len(self.extra_targets) > MAX_CALLS or not self.add_stage(scratch):
                break

    def add_stage(self, scratch: World) -> bool:
        """One more write, on the primary target and then on every other one (each must change
        something that still shows and undo no earlier goal)."""
        assert self.sel is not None
        leaf = self.entities[self.sel.table]
        used = {c.tool for c in self.chain}
        options = [t for t in self.ctx.goal_tools if t.name not in used
                   and (self.ctx.focus(t) or ("", ""))[1] == self.sel.table]
        self.rng.shuffle(options)
        sampler = ArgSampler(scratch, self.rng)
        for tool in options[:6]:
            focus = self.ctx.focus(tool)
            assert focus is not None
            args = sampler.satisfying_args(tool, attempts=3, fixed={focus[0]: leaf.row["id"]})
            args = self.trim_args(tool, args) if args is not None else None
            if args is None or self.exempt_input(tool, args) or self.breaks_a_rule(scratch, tool, args):
                continue
            snap = scratch.snapshot()
            changed = self.observable_effect(scratch, tool, args)
            if changed is None:
                continue
            n_chain, n_goals, n_effects = len(self.chain), len(self.goals), len(self.effects)
            self.effects.append(changed)
            self.goal_call(tool, args)
            try:
                self.apply_to_rest(scratch, tool)
            except TaskRejected:
                del self.chain[n_chain:], self.goals[n_goals:], self.effects[n_effects:]
                scratch.restore(snap)
                continue
            if not all(shows(e, scratch, self.world) for e in self.effects):
                del self.chain[n_chain:], self.goals[n_goals:], self.effects[n_effects:]
                scratch.restore(snap)
                continue
            return True
        return False

    def sample_chain(self) -> tuple[bytes, str, int, int]:
        out = super().sample_chain()
        while len(self.chain) < MIN_CALLS:
            # further changes to, then questions about, the user's other records fill the horizon
            scratch = self.scratch_world()
            if not (self.add_more_goal(scratch) or self.add_more_goal(scratch, read=True)):
                raise TaskRejected(Reason.HORIZON_TOO_SHORT, f"{len(self.chain)} calls")
        return out

    def scratch_world(self) -> World:
        """The world after the chain so far (the base flow's scratch world is not kept)."""
        world = World.from_snapshot(self.spec, self.world.snapshot())
        run_chain(world, self.spec, self.chain)
        return world
