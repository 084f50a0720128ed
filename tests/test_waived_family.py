"""Rules with exceptions (``PolicyRule.unless``), the ``waived`` family and the strict gate (issue 15: tasks
that need judgement: the change a rule seems to forbid is allowed by its exception)."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from functools import cache

import pytest

from scaleenv.env.cache import build_worlds, make_episode
from scaleenv.env.policies import OracleAgent
from scaleenv.formats.domain import PolicyRule
from scaleenv.formats.task import Task
from scaleenv.synth.llm.policy import policy_problems
from scaleenv.synth.tasks.families import FAMILIES, generate_task
from scaleenv.synth.tasks.families.refusal import PUSHBACKS
from scaleenv.synth.tasks.families.waived import exception_rules
from scaleenv.synth.tasks.gates import play_policy, run_gates, score_policy
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.tools.chain import resolve_args
from scaleenv.tools.policy import broken_rules, waived_rules
from scaleenv.tools.runtime import run_tool
from scaleenv.validation.spec import spec_problems
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World
from synth_helpers import context, scripted_reply

DOMAINS = ("airline", "job_seeking", "healthcare_telemedicine")


@cache
def waived_tasks(domain: str, n: int = 2, family: str = "waived", tier: str | None = None,
                 attempts: int = 30) -> tuple[Task, ...]:
    ctx = context(domain)
    mix = {tier: 1.0} if tier else None
    out, attempt = [], 0
    while len(out) < n and attempt < attempts * n:
        with contextlib.suppress(TaskRejected):
            task = generate_task(ctx, 0, attempt, ChainConfig(family_mix={family: 1.0}, tier_mix=mix))
            if task.waived:
                out.append(task)
        attempt += 1
    return tuple(out)


def episode(domain: str, task: Task):
    ctx = context(domain)
    return make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))


def goal_args(domain: str, task: Task) -> dict[int, tuple[str, dict]]:
    """The gold chain's writes, their arguments resolved, by step, on the initial world (world left open)."""
    ctx = context(domain)
    world = World.from_snapshot(ctx.spec, ctx.base)
    apply_patch(world, task.initial_patch)
    outputs, out = [], {}
    try:
        for i, call in enumerate(task.gold_chain):
            tool = ctx.spec.tool(call.tool)
            args = resolve_args(call, outputs, i)
            if i in task.waived:  # judged on the world as it is when the step is made
                out[i] = (call.tool, args, [r.name for r in waived_rules(world, ctx.spec, tool, args)],
                          [r.name for r in broken_rules(world, ctx.spec, tool, args)])
            outputs.append(run_tool(world, tool, args))
    finally:
        world.close()
    return out


def test_a_rule_with_an_exception_forbids_only_what_the_exception_does_not_cover():
    """airline: a cancellation within 30 days is broken without insurance and waived with it."""
    ctx = context("airline")
    spec = ctx.spec
    rule = spec.policy.rule("no_late_cancellation")
    assert rule.unless and "unless it has travel insurance" in rule.text
    tool = next(t for t in spec.tools if t.name in rule.tools)
    world = World.from_snapshot(spec, ctx.base)
    try:
        soon = world.conn.execute(
            "SELECT r.id, r.insurance FROM reservations r JOIN flights f ON f.id = r.flight_id WHERE "
            "f.departs_at < datetime(?, '+30 days') ORDER BY r.id", (world.clock,)).fetchall()
        insured = [i for i, ins in soon if ins]
        bare = [i for i, ins in soon if not ins]
        assert insured and bare
        param = tool.parameters[0].name
        assert [p.name for p in tool.parameters if p.required] == [param, "reason"]

        def call(key: str) -> dict:
            return {param: key, "reason": "change of plans"}

        assert rule in waived_rules(world, spec, tool, call(insured[0]))
        assert rule not in broken_rules(world, spec, tool, call(insured[0]))
        assert rule in broken_rules(world, spec, tool, call(bare[0]))
        assert rule not in waived_rules(world, spec, tool, call(bare[0]))
    finally:
        world.close()


def test_the_predicate_reads_no_row_and_null_as_allowed_and_waived_as_allowed():
    conn = sqlite3.connect(":memory:")
    rule = PolicyRule(name="r", kind="eligibility", text="t", tools=["x"], forbid="SELECT :a > 1",
                      unless="SELECT :b")
    assert conn.execute(rule.predicate, {"a": 2, "b": 0}).fetchone()[0] == 1
    assert conn.execute(rule.predicate, {"a": 2, "b": 1}).fetchone()[0] == 0
    assert conn.execute(rule.predicate, {"a": 2, "b": None}).fetchone()[0] == 1  # NULL waives nothing
    assert conn.execute(rule.predicate, {"a": None, "b": 0}).fetchone()[0] == 0  # NULL forbids nothing
    plain = rule.model_copy(update={"unless": None})
    assert conn.execute(plain.predicate, {"a": 2}).fetchone()[0] == 1
    assert rule.model_copy(update={"forbid": None}).predicate is None


def test_a_bad_exception_is_a_spec_problem_and_an_llm_policy_problem():
    ctx = context("car_rental")
    spec = ctx.spec
    rules = [r.model_copy(update={"unless": "SELECT nope FROM rentals WHERE id = :id"}) if r.unless else r
             for r in spec.policy.rules]
    bad = spec.model_copy(update={"policy": spec.policy.model_copy(update={"rules": rules})})
    assert any(path.endswith(".unless") and "prepare" in why for path, why in spec_problems(bad))
    orphan = [r.model_copy(update={"forbid": None}) if r.unless else r for r in spec.policy.rules]
    bad = spec.model_copy(update={"policy": spec.policy.model_copy(update={"rules": orphan})})
    assert any(path.endswith(".unless") for path, _ in spec_problems(bad))
    assert not spec_problems(spec)
    reply = {"rules": [r.model_dump() for r in spec.policy.rules]}
    assert policy_problems(reply, spec, ctx.base) == []
    for r in reply["rules"]:
        if r["unless"]:
            r["unless"] = "SELECT :nonsense"
    assert any(".unless: unknown parameter" in p for p in policy_problems(reply, spec, ctx.base))


@pytest.mark.parametrize("domain", DOMAINS)
def test_waived_tasks_make_the_change_the_rule_seems_to_forbid(domain):
    """Each waived step is a write the rule covers and its exception allows; the gold chain scores 1, the
    strict agent (the rule read without its exception) and the naive one 0, and every gate passes."""
    tasks = waived_tasks(domain)
    assert len(tasks) == 2, domain
    ctx = context(domain)
    for task in tasks:
        assert task.family == "waived" and not task.forbidden
        steps = goal_args(domain, task)
        assert set(steps) == set(task.waived)
        for tool, _, waived, broken in steps.values():
            assert waived and not broken, (task.id, tool)
            assert ctx.spec.tool(tool).kind == "write"
        ep = episode(domain, task)
        assert run_gates(ep, task).passed
        assert score_policy(ep, task, "oracle").score == 1.0
        assert score_policy(ep, task, "strict").score == 0.0


def test_the_strict_gate_fails_where_skipping_the_waived_steps_still_wins():
    """The gate can fail: a task whose waived step is a look-up the answer does not need (so skipping it
    changes nothing) lets the strict agent score 1."""
    task = waived_tasks("airline")[0]
    reads = [i for i, c in enumerate(task.gold_chain) if c.purpose.startswith("check the rule")]
    assert reads, [c.purpose for c in task.gold_chain]
    fake = task.model_copy(update={"waived": reads})
    ep = episode("airline", task)
    gates = run_gates(ep, fake)
    assert gates.scores["strict"] == 1.0 and "strict_not_0" in gates.failures()


def test_the_family_applies_only_where_a_rule_has_an_exception():
    assert exception_rules(context("airline"))
    assert not exception_rules(context("pet_care"))
    assert not FAMILIES["waived"].applies(context("pet_care"))
    assert FAMILIES["waived"].applies(context("job_seeking"))


def test_hard_screened_tasks_mix_a_waived_record_with_a_forbidden_one():
    """healthcare: "cancel every scheduled consultation of mine" covers one within 14 days that is a chat
    (allowed by the exception) and one within 14 days that is not (refused): checking the rule alone fails."""
    tasks = waived_tasks("healthcare_telemedicine", 1, "screened", "hard", attempts=300)  # two in 400 attempts
    assert tasks
    for task in tasks:
        assert task.forbidden and task.waived
        ep = episode("healthcare_telemedicine", task)
        assert run_gates(ep, task).passed
        assert score_policy(ep, task, "strict").score == 0.0
        assert score_policy(ep, task, "naive").score == 0.0
        assert play_policy(ep, task, OracleAgent(), random.Random(0)).score == 1.0


def test_a_go_ahead_question_that_quotes_the_rule_gets_no_pushback():
    """Play round 21: "... cannot be terminated less than 3 years after activation, but it is suspended, so
    the exception applies. Shall I terminate it?" got "Could you not do it anyway, as a favour?"."""
    task = waived_tasks("job_seeking")[0]
    task = task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"pushback": PUSHBACKS[0]})})
    spec = context("job_seeking").spec
    ask = ("An interview cannot be cancelled less than 3 days before it is scheduled, but this one is a phone "
           "screen, so the exception applies. Shall I cancel INT-0063?")
    assert scripted_reply(task, spec, ask) != PUSHBACKS[0]
    ask = "INT-0063 is less than 3 days away, but it cannot be held against you: it is a phone screen. Shall I cancel INT-0063?"
    assert scripted_reply(task, spec, ask) != PUSHBACKS[0]
    assert scripted_reply(task, spec, "I cannot cancel INT-0061. Shall I cancel INT-0063?") == PUSHBACKS[0]
    assert scripted_reply(task, spec, "I cannot cancel that interview: it is less than 3 days away.") == PUSHBACKS[0]
    assert scripted_reply(task, spec, "I can't cancel it. Shall I reschedule it instead?") == PUSHBACKS[0]


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_user_who_wants_only_allowed_changes_never_presses(domain):
    """Play round 22: a waived task's user said "Really? Can't you make an exception just this once?"
    to a go-ahead question; with nothing refused, it has nothing to press on."""
    tasks = waived_tasks(domain, 3, tier="hard")
    assert tasks
    for task in tasks:
        assert not task.user_profile.pushback
