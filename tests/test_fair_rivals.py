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


def test_a_rival_reason_true_of_a_record_the_agent_sees_is_no_guess():
    """Play round 32 (second_hand_marketplace/00221): refusing to withdraw a listing with a pending offer,
    the agent truthfully added that the offer could not be declined either (at least 70 percent of the
    price). That rule forbids something about a record it was shown, so its reason is no rival; a rule
    true of nothing it saw stays one, and one rival always stays (reciting the policy still fails)."""
    from scaleenv.formats.task import REFUSAL_FACT
    from scaleenv.synth.tasks.true_rules import drop_true_rivals, reasons_true_of

    ctx = context("second_hand_marketplace")
    world = World.from_snapshot(ctx.spec, ctx.base)
    high, = world.conn.execute("SELECT o.id FROM offers o JOIN listings l ON l.id = o.listing_id "
                               "WHERE o.amount >= 0.7 * l.price ORDER BY o.id LIMIT 1").fetchone()
    low, = world.conn.execute("SELECT o.id FROM offers o JOIN listings l ON l.id = o.listing_id "
                              "WHERE o.amount < 0.7 * l.price AND o.status = 'pending' ORDER BY o.id LIMIT 1").fetchone()
    assert "70 percent" in reasons_true_of(world, ctx, [high, "not-an-id", 3.5])
    assert "70 percent" not in reasons_true_of(world, ctx, [low])
    fact = {"name": REFUSAL_FACT, "value": "pending offer", "rivals": ["reserved for a buyer", "70 percent"]}
    assert drop_true_rivals([dict(fact)], {"70 percent"})[0]["rivals"] == ["reserved for a buyer"]
    assert drop_true_rivals([dict(fact)], {"70 percent", "reserved for a buyer"})[0]["rivals"] == fact["rivals"]
    other = {"name": "price", "value": 5, "rivals": [7]}
    assert drop_true_rivals([dict(other)], {"7"})[0]["rivals"] == [7]


def test_built_refusals_drop_the_rival_that_holds_for_an_offer_the_agent_lists():
    """End to end: a built refusal of a withdrawal whose listing has an offer of 70 percent or more shows that
    offer, and its reason fact does not count "70 percent" as a rival; an agent's answer naming both scores."""
    from scaleenv.formats.task import REFUSAL_FACT
    from scaleenv.synth.tasks.generate import ChainConfig

    ctx = context("second_hand_marketplace")
    checked = 0
    for attempt in range(400):
        with contextlib.suppress(TaskRejected):
            task = generate_task(ctx, 0, attempt, ChainConfig(family_mix={"refusal": 1.0}))
            fact = next(f for f in task.answer_facts if f.name == REFUSAL_FACT)
            if fact.value != "pending offer":
                continue
            world = World.from_snapshot(ctx.spec, ctx.base)
            apply_patch(world, task.initial_patch)
            outputs: list = []
            for i, call in enumerate(task.gold_chain):
                outputs.append(run_tool(world, ctx.spec.tool(call.tool), resolve_args(call, outputs, i)))
            offers = [o for o in _scalars(outputs) if isinstance(o, str) and o.startswith("OFR")]
            high = world.conn.execute(
                f"SELECT COUNT(*) FROM offers o JOIN listings l ON l.id = o.listing_id WHERE o.amount >= 0.7 * l.price "
                f"AND o.id IN ({','.join('?' * len(offers))})", offers).fetchone()[0] if offers else 0
            assert ("70 percent" in fact.rivals) == (high == 0)
            if high:
                said = ["I cannot take the listing down: it has a pending offer. I cannot decline that offer for you "
                        "either, as it is at least 70 percent of the price."]
                assert fact_stated_in(fact, said)
                checked += 1
            if checked >= 2:
                break
    assert checked >= 1
