"""Task families: one generator per kind of request, chosen per attempt from a mix.

Every family is a :class:`~scaleenv.synth.tasks.generate.TaskBuilder` subclass whose ``family`` names it
(recorded in each task it makes) and whose ``applies`` says whether a domain can host it. The
``direct`` family is the plain builder: look-ups and changes asked for directly.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from scaleenv.formats.task import DEFAULT_FAMILY, Task
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.families.bulk import BulkBuilder
from scaleenv.synth.tasks.families.computed import ComputedBuilder
from scaleenv.synth.tasks.families.conditional import ConditionalBuilder
from scaleenv.synth.tasks.families.description import DescriptionBuilder
from scaleenv.synth.tasks.families.enabled import EnabledBuilder
from scaleenv.synth.tasks.families.long import LongBuilder
from scaleenv.synth.tasks.families.partial import PartialBuilder
from scaleenv.synth.tasks.families.programmatic import ProgrammaticBuilder
from scaleenv.synth.tasks.families.refusal import RefusalBuilder
from scaleenv.synth.tasks.families.screened import ScreenedBuilder
from scaleenv.synth.tasks.families.waived import WaivedBuilder
from scaleenv.synth.tasks.generate import ChainConfig, TaskBuilder
from scaleenv.synth.tasks.tiers import draw_tier

FAMILIES: dict[str, type[TaskBuilder]] = {
    DEFAULT_FAMILY: TaskBuilder,
    RefusalBuilder.family: RefusalBuilder,
    PartialBuilder.family: PartialBuilder,
    ConditionalBuilder.family: ConditionalBuilder,
    ComputedBuilder.family: ComputedBuilder,
    DescriptionBuilder.family: DescriptionBuilder,
    BulkBuilder.family: BulkBuilder,
    ProgrammaticBuilder.family: ProgrammaticBuilder,
    LongBuilder.family: LongBuilder,
    ScreenedBuilder.family: ScreenedBuilder,
    WaivedBuilder.family: WaivedBuilder,
    EnabledBuilder.family: EnabledBuilder,
}
"""Family name -> its builder."""

DEFAULT_MIX: dict[str, float] = {
    DEFAULT_FAMILY: 0.1,
    RefusalBuilder.family: 0.08, PartialBuilder.family: 0.08, ConditionalBuilder.family: 0.1,  # policy decisions
    ScreenedBuilder.family: 0.08,  # a policy decision on each record of a computed set
    WaivedBuilder.family: 0.06,  # a rule's exception: the change the rule seems to forbid is allowed
    EnabledBuilder.family: 0.08,  # a change forbidden until another one asked for after it is made
    ComputedBuilder.family: 0.1, DescriptionBuilder.family: 0.07, BulkBuilder.family: 0.08,  # computed choices
    ProgrammaticBuilder.family: 0.06, LongBuilder.family: 0.3,  # long chains: the least often accepted
}
"""The default build's share of attempts per family (renormalised over the families a domain hosts)."""


def pick_family(ctx: DomainContext, rng: random.Random, mix: Mapping[str, float]) -> str:
    """A family drawn from ``mix``, among those that ``ctx``'s domain can host (``direct`` otherwise)."""
    names = [n for n in sorted(mix) if mix[n] > 0 and n in FAMILIES and FAMILIES[n].applies(ctx)]
    if not names:
        return DEFAULT_FAMILY
    return rng.choices(names, [mix[n] for n in names])[0]


def generate_task(ctx: DomainContext, seed: int, attempt: int, config: ChainConfig | None = None) -> Task:
    """Build one task for attempt number ``attempt`` or raise TaskRejected (deterministic): the family
    is drawn from the configured mix, then its builder runs."""
    config = config or ChainConfig()
    rng = random.Random(f"family:{seed}:{ctx.spec.name}:{attempt}")
    family = pick_family(ctx, rng, config.family_mix if config.family_mix is not None else DEFAULT_MIX)
    builder = FAMILIES[family](ctx, seed, attempt, config)
    builder.tier = draw_tier(rng, config.tier_mix, builder.tiers)  # the tier drives the family's knobs
    return builder.run()
