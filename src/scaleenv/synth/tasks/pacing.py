"""How the user paces its requests: at the hard and expert tiers, a user with several requests may
say them one at a time (the next once the agent has dealt with the ones before), as people do on a
support line; the agent must keep going after the first is done and must not end the chat early."""

from __future__ import annotations

import random

from scaleenv.formats.task import Task

GRADUAL_SHARE = {"hard": 0.5, "expert": 1.0}
"""The share of tasks per tier, among those with two requests or more, whose user reveals them gradually."""


def with_gradual_requests(task: Task, rng: random.Random) -> None:
    """Mark ``task``'s user as one that says its requests one at a time, for the tier's share of tasks
    with two requests or more (drawn from ``rng``, which nothing else draws from). Never a task whose
    changes must be made in an order (``Task.ordered``): told one request at a time, an agent may have
    made the one that must come last before it hears of the other."""
    share = GRADUAL_SHARE.get(task.difficulty.tier or "", 0.0)
    if len(task.user_profile.goals) >= 2 and rng.random() < share and not task.ordered:
        task.user_profile.gradual = True
