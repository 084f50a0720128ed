"""A look-alike's value is a rival of an answer only when stating it is a sign of guessing: never when
the value is another figure the gold chain shows (the agent may state what it saw)."""

from __future__ import annotations

import contextlib

from scaleenv.reward.facts import fact_stated_in
from scaleenv.synth.tasks.families import generate_task
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.validity import same_answer
from scaleenv.tools.chain import resolve_args
from scaleenv.tools.runtime import run_tool
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World
from synth_helpers import context


def _scalars(value):
    if isinstance(value, dict):
        return [x for v in value.values() for x in _scalars(v)]
    if isinstance(value, list):
        return [x for v in value for x in _scalars(v)]
    return [] if value is None else [value]


def test_no_rival_is_another_figure_of_the_targets_own_answer():
    checked = 0
    for name in ("stock_trading", "retail", "pet_care", "football"):
        ctx = context(name)
        for attempt in range(40):
            with contextlib.suppress(TaskRejected):
                task = generate_task(ctx, 0, attempt)
                if not any(f.rivals for f in task.answer_facts):
                    continue
                world = World.from_snapshot(ctx.spec, ctx.base)
                apply_patch(world, task.initial_patch)
                outputs, own = [], []
                for i, call in enumerate(task.gold_chain):
                    out = run_tool(world, ctx.spec.tool(call.tool), resolve_args(call, outputs, i))
                    outputs.append(out)
                    own += _scalars(out)  # everything a correct agent sees on the gold path
                for f in task.answer_facts:
                    figures = [v for v in own if not same_answer(v, f.value)]
                    clash = [r for r in f.rivals if any(same_answer(r, v) for v in figures)]
                    assert not clash, (task.id, f.name, clash)
                    # stating the answer next to the target's other figures passes
                    text = f"The {f.name} is {f.value}. " + " ".join(str(v) for v in figures[:6])
                    checked += fact_stated_in(f, [text]) or 0
                world.close()
    assert checked > 0
