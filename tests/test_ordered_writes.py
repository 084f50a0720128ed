"""Rules checked at the moment of each write (``Episode.broken``, the ``policy_rules_kept`` component) and
the writes that must be made in order (``Task.ordered``, the waived family's order trap): issue 15, play
round 21 (a ticket refunded after its postponed fixture was restored broke the rule and still scored 1)."""

from __future__ import annotations

import contextlib
import random
from functools import cache

import pytest

from scaleenv.env.cache import build_worlds, make_episode
from scaleenv.formats.task import Call, Task
from scaleenv.reward.state import RULES_KEPT
from scaleenv.synth.tasks.families import generate_task
from scaleenv.synth.tasks.gates import run_gates
from scaleenv.synth.tasks.generate import ChainConfig, TaskBuilder, TaskRejected
from scaleenv.synth.tasks.pacing import with_gradual_requests
from scaleenv.tools.chain import resolve_args
from scaleenv.tools.runtime import run_tool
from synth_helpers import context


@cache
def domain_tasks(domain: str, family: str, n: int, ordered_only: bool = False) -> tuple[Task, ...]:
    """The first ``n`` hard tasks of ``family`` for the catalog ``domain`` (with ordered writes, if asked)
    from seed 0."""
    ctx = context(domain)
    out, attempt = [], 0
    while len(out) < n and attempt < 60 * n:
        with contextlib.suppress(TaskRejected):
            task = generate_task(ctx, 0, attempt, ChainConfig(family_mix={family: 1.0}, tier_mix={"hard": 1.0}))
            if task.ordered or not ordered_only:
                out.append(task)
        attempt += 1
    return tuple(out)


def football_tasks(family: str, n: int, ordered_only: bool = False) -> tuple[Task, ...]:
    return domain_tasks("football", family, n, ordered_only)


def trap_tasks() -> tuple[Task, ...]:
    return football_tasks("waived", 3, ordered_only=True)


def play(task: Task, order: list[int]):
    """The gold chain's calls made in ``order`` on a fresh episode (arguments resolved from the gold
    outputs), and its reward."""
    ctx = context("football")
    ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
    gold = ep.initial_world()
    outputs: list = []
    scratch = type(gold).from_snapshot(ctx.spec, gold.snapshot())
    args_by_step = []
    for i, call in enumerate(task.gold_chain):
        args = resolve_args(call, outputs, i)
        args_by_step.append(args)
        outputs.append(run_tool(scratch, ctx.spec.tool(call.tool), args))
    scratch.close()
    for i in order:
        assert ep.call_tool(task.gold_chain[i].tool, args_by_step[i]).ok
    return ep, ep.evaluate()


def test_the_waived_family_sets_an_order_trap_where_a_change_ends_the_exception():
    tasks = trap_tasks()
    assert len(tasks) == 3
    for task in tasks:
        (i, j), = task.ordered
        assert i in task.waived
        assert "refund" in task.gold_chain[i].tool
        assert "fixture" in task.gold_chain[j].tool
        # the user asks for the change that ends the exception first
        asked = task.user_profile.goals
        assert any("refund" in g for g in asked)
        first = next(k for k, g in enumerate(asked) if "refund" in g)
        assert first > 0 and "ixture" in " ".join(asked[:first])
        assert not task.user_profile.gradual  # told one at a time, the agent could not order them


def test_a_rule_broken_at_the_moment_of_a_write_scores_0_though_the_final_state_matches():
    task = trap_tasks()[0]
    (i, j), = task.ordered
    n = len(task.gold_chain)
    ep, reward = play(task, list(range(n)))
    assert reward.success and reward.components[RULES_KEPT] == 1.0 and ep.broken == []
    swapped = [k for k in range(n) if k != j]
    swapped.insert(swapped.index(i), j)  # the fixture changed first, then the ticket refunded
    ep2, reward2 = play(task, swapped)
    assert ep2.world.state_hash() == ep.world.state_hash()  # the same final state ...
    assert not reward2.success and reward2.score == 0.0  # ... but the refund broke the rule when it was made
    assert reward2.components[RULES_KEPT] == 0.0
    assert ep2.broken == [f"{task.gold_chain[i].tool}: no_refunds_of_expensive_tickets"]
    assert any("no_refunds_of_expensive_tickets" in d for d in reward2.diff)


def test_reset_forgets_broken_rules():
    task = trap_tasks()[0]
    (i, j), = task.ordered
    order = [j, *[k for k in range(len(task.gold_chain)) if k != j]]
    ep, reward = play(task, order)
    assert ep.broken
    ep.reset()
    assert ep.broken == []


def test_a_task_whose_writes_must_be_ordered_is_never_told_one_request_at_a_time():
    task = trap_tasks()[0].model_copy(deep=True)
    task.difficulty.tier = "expert"  # every expert task with two requests would be gradual
    task.user_profile.gradual = False
    with_gradual_requests(task, random.Random(0))
    assert not task.user_profile.gradual
    task.ordered = []
    with_gradual_requests(task, random.Random(0))
    assert task.user_profile.gradual


def test_a_change_a_ruled_write_needs_must_come_first():
    """library: a renewal is forbidden with more than 6 dollars of fines; paying 7 of PAT-0029's 12.50
    first allows it. The build records (pay, renew) as ordered, and the renewal first breaks the rule."""
    ctx = context("library_services")
    builder = TaskBuilder(ctx, 0, 0, ChainConfig())
    pay = Call(tool="pay_fine", args={"patron_id": "PAT-0029", "amount": 7.0, "method": "cash"})
    renew = Call(tool="extend_loan", args={"loan_id": "LON-0013", "patron_id": "PAT-0029"})
    builder.chain = [pay, renew]
    builder.check_policy(ctx.base)
    assert builder.ordered == [(0, 1)] and builder.waived == []
    builder.chain = [renew, pay]
    with pytest.raises(TaskRejected, match="breaks_policy"):
        builder.check_policy(ctx.base)


def test_independent_writes_are_not_ordered():
    """A payment on another patron's account changes nothing for the renewal: only the pair that
    depends on each other is recorded."""
    ctx = context("library_services")
    builder = TaskBuilder(ctx, 0, 0, ChainConfig())
    builder.chain = [Call(tool="pay_fine", args={"patron_id": "PAT-0005", "amount": 7.0, "method": "cash"}),
                     Call(tool="pay_fine", args={"patron_id": "PAT-0029", "amount": 7.0, "method": "card"}),
                     Call(tool="extend_loan", args={"loan_id": "LON-0013", "patron_id": "PAT-0029"})]
    builder.check_policy(ctx.base)
    assert builder.ordered == [(1, 2)]


def enabled_tasks() -> tuple[Task, ...]:
    return football_tasks("enabled", 2)


def test_the_enabled_family_asks_for_the_forbidden_looking_change_first():
    """football: "cancel ticket TKT-0084 (over 100 dollars) ... then postpone its fixture": the refund is
    allowed only once the fixture is postponed, so the gold chain postpones first."""
    tasks = enabled_tasks()
    assert len(tasks) == 2
    for task in tasks:
        assert task.family == "enabled" and task.forbidden == []  # (football: the postponement also makes the refund a waived step)
        (first, then), = task.ordered
        assert "fixture" in task.gold_chain[first].tool and "ticket" in task.gold_chain[then].tool
        goals = task.user_profile.goals
        ticket = next(i for i, g in enumerate(goals) if "ticket" in g.lower())
        fixture = next(i for i, g in enumerate(goals) if "fixture" in g.lower() and i != ticket)
        assert ticket < fixture  # said the other way round
        assert task.verification.gates["reordered"] == 0.0 and task.verification.gates["gold"] == 1.0
        assert not task.user_profile.pushback and not task.user_profile.gradual


def test_the_order_gate_fails_where_the_order_does_not_matter():
    """The gate can fail: a task whose recorded pair is two steps that do not depend on each other
    scores 1 made the other way round."""
    task = enabled_tasks()[0]
    ctx = context("football")
    ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
    assert run_gates(ep, task).scores["reordered"] == 0.0
    reads = [i for i, c in enumerate(task.gold_chain) if ctx.spec.tool(c.tool).kind == "read"]
    loose = task.model_copy(update={"ordered": [(reads[0], reads[1])]})
    result = run_gates(ep, loose, detail=True)
    assert result.scores["reordered"] == 1.0 and "reordered_not_0" in result.failures()


def test_a_business_step_on_the_same_record_enables_a_change():
    """smart home: "unlock LCK-... remotely ... I just put fresh batteries in it; log it": a lock below 50
    percent cannot be unlocked remotely, so the battery change is logged first."""
    task, = domain_tasks("smart_home", "enabled", 1)
    (first, then), = task.ordered
    assert task.gold_chain[first].tool in ("log_battery_change", "record_new_batteries")
    assert task.gold_chain[then].tool.endswith("_lock")  # unlock_lock / open_door_lock ...
    # one argument each: the lock's id, found the same way
    assert list(task.gold_chain[first].args.values()) == list(task.gold_chain[then].args.values())
    assert task.verification.gates["reordered"] == 0.0 and task.verification.gates["gold"] == 1.0


def test_a_rule_over_a_records_children_is_checked_by_listing_them():
    """job seeking: "an application with an interview still scheduled cannot be withdrawn". The gold chain
    lists the application's interviews to see the rule, and the enabling step is on a child (cancel the
    interview, then withdraw)."""
    ctx = context("job_seeking")
    task, = domain_tasks("job_seeking", "enabled", 1)
    lister = next(c for c in task.gold_chain if c.purpose == "check the rule no_withdrawal_with_interview_scheduled")
    assert lister.tool == "list_interviews_by_application"
    (first, then), = task.ordered
    enabler, withdraw = task.gold_chain[first], task.gold_chain[then]
    assert ctx.spec.tool(enabler.tool).meta["entity"] == "interviews"
    assert ctx.spec.tool(withdraw.tool).meta["entity"] == "applications"
    assert task.verification.gates["reordered"] == 0.0 and task.verification.gates["gold"] == 1.0
    ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
    interview = ep.world.row("interviews", resolve_args(enabler, [], 0).get("interview_id"))
    assert interview is not None and interview["status"] == "scheduled"


def test_lifting_steps_are_business_steps_on_other_cells():
    """Two moves of one status (take the offer, then withdraw) lift nothing; cancelling the interview that
    the rule reads does."""
    from scaleenv.synth.tasks.families.enabled import lifting_tools
    from scaleenv.synth.tasks.families.refusal import policy_rules

    ctx = context("job_seeking")
    lifting = {rule.name: lifting_tools(ctx, rule) for rule, _ in policy_rules(ctx)}
    assert lifting["no_withdrawal_after_offer"] == []
    assert any(name.endswith("_interview") for name in lifting["no_withdrawal_with_interview_scheduled"])


def test_a_step_on_the_targets_parent_is_an_enabling_option():
    """library: renewing a loan is forbidden with more than 6 dollars of fines; paying the fines is a step
    on the loan's patron (not one of the task's records), offered with the patron's id."""
    from scaleenv.synth.tasks.families.enabled import EnabledBuilder

    ctx = context("library_services")
    seen: list[tuple[str, dict, list]] = []
    for attempt in range(40):
        builder = EnabledBuilder(ctx, 0, attempt, ChainConfig(tier_mix={"hard": 1.0}))
        builder.tier = "hard"

        def capture(scratch, tool, args, builder=builder):
            lifting = {"pay_fine", "settle_fines"}
            seen.append((tool.name, scratch.row("loans", args.get("loan_id")),
                         builder.linked_options(scratch, tool, args, lifting)))
            return False

        builder.add_enabler = capture
        with contextlib.suppress(TaskRejected):
            builder.run()
        if any(name in ("renew_loan", "extend_loan") for name, _, _ in seen):
            break
    name, loan, options = next(s for s in seen if s[0] in ("renew_loan", "extend_loan"))
    assert loan is not None and [(t.name, a) for t, a in options] == [(options[0][0].name, {"patron_id": loan["patron_id"]})]
    assert options[0][0].name in ("pay_fine", "settle_fines")


def test_an_application_has_one_interview_scheduled_and_a_later_one_today_is_not_yet_held():
    """job seeking: the next round is set once the last has taken place (the seeder and the scheduling tool
    keep it), and an interview set for later today cannot be completed yet (the tool's clock check reads
    the time, as the world's invariant does, not only the day)."""
    from scaleenv.errors import ToolError
    from scaleenv.world.world import World

    ctx = context("job_seeking")
    world = World.from_snapshot(ctx.spec, ctx.base)
    per_application = world.conn.execute(
        "SELECT application_id, COUNT(*) FROM interviews WHERE status = 'scheduled' GROUP BY application_id "
        "HAVING COUNT(*) > 1").fetchall()
    assert per_application == []
    app_id, = world.conn.execute(
        "SELECT application_id FROM interviews i JOIN applications a ON a.id = i.application_id "
        "WHERE i.status = 'scheduled' AND a.status = 'interviewing' ORDER BY 1 LIMIT 1").fetchone()
    schedule = next(t for t in ctx.spec.tools if any(e.startswith("INSERT INTO interviews") for e in t.effects))
    with pytest.raises(ToolError, match="already has an interview scheduled"):
        run_tool(world, schedule, {"application_id": app_id, "round": "final", "scheduled_at": "2026-09-01T10:00:00",
                                   "interviewer": "Ann Lee"})
    now = world.clock
    later_today = now[:10] + "T23:30:00"
    interview, = world.conn.execute("SELECT id FROM interviews WHERE application_id = ? AND status = 'scheduled'",
                                    (app_id,)).fetchone()
    world.conn.execute("UPDATE interviews SET scheduled_at = ? WHERE id = ?", (later_today, interview))
    complete = next(t for t in ctx.spec.tools if t.meta.get("entity") == "interviews" and t.meta.get("to") == "completed")
    with pytest.raises(ToolError, match="now or earlier"):
        run_tool(world, complete, {"interview_id": interview})
    world.conn.execute("UPDATE interviews SET scheduled_at = ? WHERE id = ?", (now[:10] + "T00:30:00", interview))
    assert run_tool(world, complete, {"interview_id": interview})["status"] == "completed"  # type: ignore[index]


def test_job_seeking_hosts_enabled_tasks_whose_enabling_step_is_itself_allowed():
    """A target that also broke a second rule (an offered application) stays forbidden once the first is
    lifted, and a cancellation the late-cancellation rule forbids lifts nothing: the enabler is one allowed
    change, and the task's gates all pass."""
    from scaleenv.tools.policy import broken_rules
    from scaleenv.world.patch import apply_patch
    from scaleenv.world.world import World

    ctx = context("job_seeking")
    tasks = domain_tasks("job_seeking", "enabled", 3)
    assert len(tasks) == 3
    for task in tasks:
        (first, then), = task.ordered
        world = World.from_snapshot(ctx.spec, ctx.base)
        apply_patch(world, task.initial_patch)
        outputs: list = []
        for i, call in enumerate(task.gold_chain):
            tool = ctx.spec.tool(call.tool)
            assert tool is not None
            args = resolve_args(call, outputs, i)
            if i in (first, then):
                assert broken_rules(world, ctx.spec, tool, args) == [], (task.id, call.tool)
            outputs.append(run_tool(world, tool, args))


def test_a_change_the_ending_needs_first_is_a_step_not_waste():
    """entertainment: "cancel my profile, then pay what's left in my wallet back to my card". With more than
    12 dollars in the wallet the cancellation is forbidden, so the refund comes first and is no waste; the
    same refund beside a cancellation that does not need it still is."""
    from scaleenv.synth.tasks.validity import wasted_requests

    ctx = context("entertainment_media_query")
    tasks = domain_tasks("entertainment_media_query", "enabled", 3)
    assert len(tasks) == 3
    for task in tasks:
        (first, then), = task.ordered
        refund, cancel = task.gold_chain[first], task.gold_chain[then]
        assert ctx.spec.tool(refund.tool).effects == ["UPDATE profiles SET wallet_balance = 0 WHERE id = :profile_id"]
        assert ctx.spec.tool(cancel.tool).meta.get("to") == "cancelled"
        assert not any(ctx.spec.tool(c.tool).meta.get("entity") == "rentals" for c in task.gold_chain
                       if c.purpose == "goal"), task.id  # nothing new is started for a profile about to close
        assert task.verification.gates["reordered"] == 0.0 and task.verification.gates["gold"] == 1.0
        initial = ctx.base if not task.initial_patch else None
        if initial is None:
            from scaleenv.world.patch import apply_patch
            from scaleenv.world.world import World

            world = World.from_snapshot(ctx.spec, ctx.base)
            apply_patch(world, task.initial_patch)
            initial = world.snapshot()
            world.close()
        assert wasted_requests(ctx.spec, initial, task.gold_chain, task.ordered) == []
        assert wasted_requests(ctx.spec, initial, task.gold_chain) != []


def test_fitness_members_pay_out_their_balance_before_the_membership_ends():
    ctx = context("fitness_club")
    task, = domain_tasks("fitness_club", "enabled", 1)
    (first, then), = task.ordered
    assert ctx.spec.tool(task.gold_chain[first].tool).effects == [
        "UPDATE members SET account_balance = 0 WHERE id = :member_id"]
    assert ctx.spec.tool(task.gold_chain[then].tool).meta.get("to") == "cancelled"
    assert "cancel the membership for my account" in task.instruction


def test_moving_a_visit_so_that_it_may_be_cancelled_is_still_a_waste():
    """The default build of round 27 made "cancel my visit ... Then, can you move it to 2026-07-23?" an
    enabled task: the reschedule lifts the late-cancellation rule, but only a balance settled to 0 is a step
    the ending needs; a new time for a visit then cancelled is a waste, ordered or not."""
    from scaleenv.formats.task import Call
    from scaleenv.synth.tasks.validity import wasted_requests
    from scaleenv.world.world import World

    ctx = context("healthcare_telemedicine")
    cancel = next(t for t in ctx.spec.tools if t.meta.get("entity") == "consultations" and t.meta.get("to") == "cancelled")
    move = next(t for t in ctx.spec.tools if t.kind == "write" and t.name != cancel.name
                and any(e.startswith("UPDATE consultations SET scheduled_at") for e in t.effects))
    world = World.from_snapshot(ctx.spec, ctx.base)
    visit, = world.conn.execute("SELECT id FROM consultations WHERE status = 'scheduled' ORDER BY scheduled_at DESC "
                                "LIMIT 1").fetchone()
    world.close()
    time_param = next(p.name for p in move.parameters if "time" in p.name or p.name.endswith("_at"))
    key_of = {t.name: next(p.name for p in t.parameters if p.name.endswith("_id")) for t in (move, cancel)}
    chain = [Call(tool=move.name, args={key_of[move.name]: visit, time_param: "2026-07-30T10:00:00"}, purpose="goal"),
             Call(tool=cancel.name, args={key_of[cancel.name]: visit}, purpose="goal")]
    assert wasted_requests(ctx.spec, ctx.base, chain, [(0, 1)]) != []


@pytest.mark.parametrize(("domain", "ruled_entity", "enabler_entity"), [
    ("second_hand_marketplace", "listings", "offers"),     # decline the pending offer, then take the ad down
    ("express_logistics", "couriers", "shipments"),        # confirm the parcel out for delivery, then clock out
    ("stock_trading", "accounts", "orders"),               # cancel the open order, then freeze the account
    ("project_management", "sprints", "tasks"),            # finish the task in review, then close the sprint
])
def test_rules_over_a_records_children_make_enabled_tasks_in_more_domains(domain, ruled_entity, enabler_entity):
    """Play round 31: the enabled tasks were the ones players called judgement, but only four domains had
    them. A rule over a record's children ("a listing with a pending offer cannot be withdrawn") is lifted
    by a step on the child the user asks for after the change it allows, and the gold chain lists the
    children to see the rule."""
    ctx = context(domain)
    task, = domain_tasks(domain, "enabled", 1)
    (first, then), = task.ordered
    enabler, ruled = task.gold_chain[first], task.gold_chain[then]
    assert ctx.spec.tool(enabler.tool).meta["entity"] == enabler_entity
    assert ctx.spec.tool(ruled.tool).meta["entity"] == ruled_entity
    assert any(c.purpose.startswith("check the rule no_") and ctx.spec.tool(c.tool).meta.get("family") == "list"
               for c in task.gold_chain)
    assert task.verification.gates["reordered"] == 0.0 and task.verification.gates["gold"] == 1.0


def test_the_seller_declines_an_offer_and_a_buyer_withdraws_their_own():
    """``by: listing_id`` on the decline: an offer on the user's listing is the user's to decline, though the
    offer names its buyer; withdrawing it stays the buyer's move."""
    ctx = context("second_hand_marketplace")
    task, = domain_tasks("second_hand_marketplace", "enabled", 1)
    (first, _), = task.ordered
    enabler = ctx.spec.tool(task.gold_chain[first].tool)
    assert enabler is not None and enabler.meta.get("by") == "listing_id" and enabler.meta.get("to") == "declined"
    offer_slot = next(p.name for p in enabler.parameters)
    assert all("{" + offer_slot + "}" in p for p in enabler.meta["phrasings"])  # the seed's own name for an offer
    withdraw = next(t for t in ctx.spec.tools if t.meta.get("entity") == "offers" and t.meta.get("to") == "withdrawn")
    assert "by" not in withdraw.meta


def test_a_refused_request_breaks_one_rule_only():
    """Play round 31 (job_seeking/00112): an application both at the offer stage and with an interview
    scheduled has two reasons to refuse, and the grader wanted one of them. Such a request is no task."""
    from scaleenv.formats.domain import PolicyRule
    from scaleenv.synth.tasks.families.refusal import RefusalBuilder, sole_broken_rule
    from scaleenv.synth.tasks.reasons import Reason
    from scaleenv.world.world import World

    ctx = context("job_seeking")
    world = World.from_snapshot(ctx.spec, ctx.base)
    withdraw = next(t for t in ctx.spec.tools if t.meta.get("entity") == "applications" and t.meta.get("to") == "withdrawn")
    app_id, = world.conn.execute("SELECT a.id FROM applications a JOIN interviews i ON i.application_id = a.id "
                                 "WHERE i.status = 'scheduled' AND a.status = 'interviewing' ORDER BY a.id LIMIT 1").fetchone()
    args = {withdraw.parameters[0].name: app_id}
    assert [r.name for r in sole_broken_rule(world, ctx.spec, withdraw, args)] == ["no_withdrawal_with_interview_scheduled"]
    world.conn.execute("UPDATE applications SET status = 'offered' WHERE id = ?", (app_id,))
    assert sole_broken_rule(world, ctx.spec, withdraw, args) == []
    builder = RefusalBuilder(ctx, 0, 0, ChainConfig())
    rule: PolicyRule = next(r for r in ctx.spec.policy.rules if r.name == "no_withdrawal_after_offer")
    with pytest.raises(TaskRejected) as rejected:
        builder.still_broken(rule, withdraw, args, world)
    assert rejected.value.reason == Reason.SEVERAL_RULES_BROKEN
