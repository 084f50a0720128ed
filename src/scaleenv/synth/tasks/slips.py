"""Slips of the user: at the hard and expert tiers, some users give the id of a look-alike record
("cancel reservation RES-0153") where they mean another (RES-0154), and put it right once the agent
names the wrong one back ("Sorry, my mistake: I meant RES-0154, not RES-0153."), as people do.

The policy's confirmation rule is what catches it: an agent that tells the user which record it is
about to change, and waits for a yes, hears the correction before any harm; one that acts on the id
as given changes the look-alike, which the distractor-swap gate already proves scores 0. Only the
conversational user slips: the solo request (``task.instruction``) states the right id.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from scaleenv.formats.task import Slip, Task
from scaleenv.utils.record_ids import RECORD_ID, names

SLIP_SHARE = {"hard": 0.4, "expert": 1.0}
"""The share of tasks per tier, among those with a request naming a record that has look-alikes, whose user slips."""

def slip_options(task: Task) -> list[Slip]:
    """Every slip ``task``'s user could make: a request (a change, or a change the policy refuses)
    naming, once in all the goals, a record that has look-alikes in the world (the task's distractors
    with the same id prefix), given as the id of one that nothing in the task names."""
    profile = task.user_profile
    if not profile.objectives or len(profile.objectives) != len(profile.goals):
        return []
    lookalikes: dict[str, list[str]] = {}
    for ids in task.verification.distractors.values():
        for other in ids:
            if isinstance(other, str) and RECORD_ID.fullmatch(other):
                lookalikes.setdefault(other.rsplit("-", 1)[0], []).append(other)
    mentioned = json.dumps([profile.model_dump(mode="json"), [c.model_dump(mode="json") for c in task.gold_chain],
                            [c.model_dump(mode="json") for c in task.forbidden],
                            [f.model_dump(mode="json") for f in task.answer_facts]])
    hidden = {str(profile.known[w]) for w in profile.withheld if w in profile.known}
    out = []
    for i, (goal, objective) in enumerate(zip(profile.goals, profile.objectives, strict=True)):
        if objective.kind == "read":
            continue
        for meant in sorted(set(RECORD_ID.findall(goal))):
            if meant in hidden or sum(names(g, meant) for g in profile.goals) != 1:
                continue
            out += [Slip(goal=i, said=said, meant=meant) for said in sorted(set(lookalikes.get(meant.rsplit("-", 1)[0], [])))
                    if said != meant and not names(mentioned, said)]
    return out


def draw_slip(task: Task, rng: random.Random, prefer: Callable[[Slip], bool] | None = None) -> Slip | None:
    """A slip for ``task``'s user, for the tier's share of tasks that can have one (drawn from ``rng``,
    which nothing else draws from); None otherwise. With ``prefer``, only the options it accepts are
    drawn from, where there are any."""
    share = SLIP_SHARE.get(task.difficulty.tier or "", 0.0)
    options = slip_options(task)
    if prefer is not None:
        options = [o for o in options if prefer(o)] or options
    return rng.choice(options) if options and rng.random() < share else None
