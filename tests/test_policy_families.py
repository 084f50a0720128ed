"""Domain policies, the refusal / partial / conditional families, the procedure checks and the
policy-ignorant gate (issue 15, policy side)."""

from __future__ import annotations

import contextlib
import json
import random

import pytest

from scaleenv.env.cache import build_worlds, make_episode
from scaleenv.env.core import Mode, ToolEnv
from scaleenv.env.policies import NaiveAgent, OracleAgent, play
from scaleenv.env.prompts import system_prompt
from scaleenv.env.users import ScriptedUser
from scaleenv.formats.task import REFUSAL_FACT, Task
from scaleenv.reward.procedure import CONFIRMATION, IDENTITY, procedure_checks
from scaleenv.synth.procedural.blueprint import PAPER_TRAINING_DOMAINS, catalog
from scaleenv.synth.tasks.families import FAMILIES, generate_task
from scaleenv.synth.tasks.families.conditional import ConditionalBuilder
from scaleenv.synth.tasks.gates import ZERO_GATES, run_gates, score_policy
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.tools.chain import resolve_args, run_chain
from scaleenv.tools.policy import broken_rules
from scaleenv.world.world import World
from synth_helpers import context

DOMAINS = ["pet_care", "football", "stock_trading"]


def _family(name: str, family: str, n: int) -> list[Task]:
    ctx = context(name)
    out, attempt = [], 0
    while len(out) < n and attempt < 15 * n:
        with contextlib.suppress(TaskRejected):
            out.append(generate_task(ctx, 0, attempt, ChainConfig(family_mix={family: 1.0})))
        attempt += 1
    return out


def _episode(name: str, task: Task):
    ctx = context(name)
    return make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))


def _worlds(name: str, task: Task) -> tuple[World, World]:
    ep = _episode(name, task)
    initial = World.from_snapshot(ep.spec, ep.initial_world().snapshot())
    return initial, ep.expected


# --- the policy in the spec and the prompt ------------------------------------------------------------------------

@pytest.mark.parametrize("name", PAPER_TRAINING_DOMAINS)
def test_every_default_domain_has_a_policy_with_checkable_rules(name):
    ctx = context(name)
    policy = ctx.spec.policy
    assert policy is not None
    kinds = {r.kind for r in policy.rules}
    assert {"identity", "confirmation", "scope", "eligibility"} <= kinds
    checked = [r for r in policy.rules if r.forbid]
    assert checked, "no rule the generator can check"
    world = World.from_snapshot(ctx.spec, ctx.base)
    for rule in checked:
        assert rule.reason and rule.reason in rule.text
        assert rule.tools and all(ctx.spec.tool(t) is not None for t in rule.tools)
        tool = ctx.spec.tool(rule.tools[0])
        ids = [r[0] for r in world.conn.execute(f'SELECT id FROM "{ctx.focus(tool)[1]}" ORDER BY id LIMIT 40')]
        verdicts = {bool(broken_rules(world, ctx.spec, tool, {tool.parameters[0].name: i, **{
            p.name: 1 for p in tool.parameters[1:] if p.type in ("integer", "number")}})) for i in ids}
        assert verdicts, rule.name  # the predicate runs on the base world


@pytest.mark.parametrize("name", sorted(catalog()))
def test_no_rule_reason_states_another(name):
    """A refusal's reason has the other rules' reasons as rivals: none may state another (fuzzy matching
    of long phrases would let "above 80 percent" state "above 50 percent")."""
    from scaleenv.reward.facts import value_stated

    reasons = [r.reason for r in catalog()[name].policy if r.reason]
    assert len(set(reasons)) == len(reasons)
    for a in reasons:
        assert not [b for b in reasons if b != a and value_stated(a, b)], a


def test_the_policy_is_shown_to_the_agent_and_named_by_this_seeds_tools():
    spec = context("pet_care").spec
    task = _family("pet_care", "refusal", 1)[0]
    text = system_prompt(task, spec, "conversational", user_tool=False)
    for rule in spec.policy.rules:
        assert rule.text in text
    assert "no one to ask" in system_prompt(task, spec, "solo", user_tool=False)
    cancel = spec.policy.rule("no_late_appointment_cancellation")
    assert cancel.tools and spec.tool(cancel.tools[0]).meta.get("entity") == "appointments"


def test_a_blueprint_policy_naming_an_unknown_tool_is_refused():
    from scaleenv.synth.procedural.blueprint import Blueprint, blueprint_problems

    data = catalog()["pet_care"].model_dump(by_alias=True)
    data["policy"] = [{"name": "x", "kind": "eligibility", "text": "No x within 3 days.", "reason": "3 days",
                       "tools": ["appointments.teleport"], "forbid": "SELECT 1"}]
    problems = blueprint_problems(Blueprint.model_validate(data))
    assert any("teleport" in reason for _, reason in problems)


# --- the families ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DOMAINS)
def test_refusal_tasks_change_nothing_and_name_the_rule(name):
    tasks = _family(name, "refusal", 3)
    assert tasks
    assert any(f.rivals for t in tasks for f in t.answer_facts if f.name == REFUSAL_FACT)
    spec = context(name).spec
    for task in tasks:
        assert task.family == "refusal"
        assert task.verification.initial_hash == task.verification.expected_hash  # the right outcome: no write
        assert not task.verification.gold_keys
        fact = next(f for f in task.answer_facts if f.name == REFUSAL_FACT)
        rule = next(r for r in spec.policy.rules if r.reason == fact.value)
        # the other rules' reasons are rivals, but for one that a figure the gold chain shows would
        # state too ("more than 200 dollars" beside an invoice of 200): a correct agent may say it
        assert rule.reason not in (fact.rivals or [])
        assert set(fact.rivals or []) <= {r.reason for r in spec.policy.rules if r.reason}
        assert len(task.forbidden) == 1 and task.forbidden[0].tool in rule.tools
        assert any(o.kind == "refusal" for o in task.user_profile.objectives)
        # the refused call is allowed by the tool, forbidden by the rule
        initial, _ = _worlds(name, task)
        outputs = []
        for i, call in enumerate(task.gold_chain):
            outputs.append(json.loads(json.dumps(_run(initial, spec, call, outputs, i), default=str)))
        args = resolve_args(task.forbidden[0], outputs, len(outputs))
        assert rule in broken_rules(initial, spec, spec.tool(task.forbidden[0].tool), args)
        ep = _episode(name, task)
        gates = run_gates(ep, task)
        assert gates.passed and gates.scores["naive"] == 0.0
        assert task.verification.gates == {"gold": 1.0, "gold_conversational": 1.0, **{g: 0.0 for g in ZERO_GATES}}


def _run(world: World, spec, call, outputs, i):
    from scaleenv.tools.runtime import run_tool

    return run_tool(world, spec.tool(call.tool), resolve_args(call, outputs, i))


@pytest.mark.parametrize("name", DOMAINS)
def test_partial_tasks_do_the_allowed_changes_and_not_the_forbidden_one(name):
    tasks = _family(name, "partial", 3)
    assert tasks
    spec = context(name).spec
    for task in tasks:
        assert task.family == "partial"
        writes = [c for c in task.gold_chain if spec.tool(c.tool).kind == "write"]
        assert writes and task.forbidden
        assert task.forbidden[0].tool not in {c.tool for c in writes}
        assert task.verification.initial_hash != task.verification.expected_hash
        kinds = [o.kind for o in task.user_profile.objectives]
        assert "refusal" in kinds and "write" in kinds
        ep = _episode(name, task)
        assert score_policy(ep, task, "oracle").score == 1.0
        assert score_policy(ep, task, "naive").score == 0.0  # the literal request breaks the policy


def test_the_naive_policy_scores_one_without_the_forbidden_call():
    """The gate is not vacuous: the naive agent is the oracle plus the forbidden calls."""
    task = _family("pet_care", "refusal", 1)[0]
    ep = _episode("pet_care", task)
    env = ToolEnv(task, ep, mode=Mode.SOLO, max_turns=40, release=lambda _: None)
    assert play(env, NaiveAgent(), random.Random(0)).score == 0.0
    plain = task.model_copy(update={"forbidden": []})
    env = ToolEnv(plain, ep, mode=Mode.SOLO, max_turns=40, release=lambda _: None)
    assert play(env, NaiveAgent(), random.Random(0)).score == 1.0


def test_conditional_tasks_take_the_branch_the_data_says_and_both_branches_occur():
    ctx = context("stock_trading")
    seen = set()
    for attempt in range(60):
        b = ConditionalBuilder(ctx, 0, attempt, ChainConfig())
        try:
            task = b.run()
        except TaskRejected:
            continue
        col, threshold, holds = b.test
        when, otherwise = b.branches
        taken = when if holds else otherwise
        skipped = otherwise if holds else when
        tools = [c.tool for c in task.gold_chain if c.purpose == "goal"]
        assert taken.tool.name in tools and skipped.tool.name not in tools
        target = next(iter(taken.refs.values())).row
        assert (target[col] >= threshold) == holds
        goal = next(g for g in task.user_profile.goals if g.startswith("If "))
        assert "is at least" in goal and "; otherwise, " in goal
        # the other branch instead of the taken one scores 0
        ep = _episode("stock_trading", task)
        i = max(j for j, c in enumerate(task.gold_chain) if c.tool == taken.tool.name)
        refs = {k: v for k, v in task.gold_chain[i].args.items() if isinstance(v, dict)}
        wrong = task.gold_chain[:i] + [task.gold_chain[i].model_copy(update={"tool": skipped.tool.name, "args": {
            **{k: v for k, v in skipped.args.items() if k not in skipped.refs}, **{k: next(iter(refs.values()))
                                                                                 for k in skipped.refs}}})]
        wrong_task = task.model_copy(update={"gold_chain": wrong + task.gold_chain[i + 1:]})
        assert score_policy(ep, wrong_task, "oracle").score == 0.0
        seen.add(holds)
        if seen == {True, False}:
            break
    assert seen == {True, False}


@pytest.fixture(scope="module")
def universe(tmp_path_factory):
    from scaleenv.synth.build import BuildConfig, prepare_out, run_build

    u = tmp_path_factory.mktemp("families") / "u"
    cfg = BuildConfig(out=u, domains=["pet_care"], tasks_per_domain=12)
    prepare_out(cfg)
    run_build(cfg)
    return u


def test_family_tasks_pass_the_audit_and_the_check(universe):
    from scaleenv.report.counts import check_universe
    from scaleenv.synth.audit import audit_universe

    u = universe
    families = {json.loads(line).get("family", "direct") for line in (u / "tasks" / "pet_care.jsonl").read_text().splitlines()}
    assert {"refusal", "partial"} <= families
    report = audit_universe(u)
    assert report.defects == 0, report.examples
    gates = check_universe(u)
    assert gates["naive_zero"] == gates["tasks"] == 12 and not gates["failures"]


def test_the_exports_carry_the_policy(universe, tmp_path):
    from typer.testing import CliRunner

    from scaleenv.cli import app

    res = CliRunner().invoke(app, ["export", str(universe), "--format", "tau2", "--out", str(tmp_path / "t")])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "t" / "pet_care" / "policy.md").read_text()
    assert "cannot be cancelled less than 14 days" in text and "explicit yes" in text
    res = CliRunner().invoke(app, ["export", str(universe), "--format", "jsonl", "--out", str(tmp_path / "r.jsonl")])
    assert res.exit_code == 0, res.output
    row = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert "less than 14 days" in json.dumps(row)


# --- procedure checks -------------------------------------------------------------------------------------------------

def _call(i: int, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _ok(i: int) -> dict:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps({"id": "X"})}


def _procedure_case():
    spec = context("pet_care").spec
    task = next(t for t in _family("pet_care", "partial", 2) if t.user_profile.identity)
    write = next(c for c in task.gold_chain if spec.tool(c.tool).kind == "write")
    name = task.user_profile.known[task.user_profile.identity[0]]
    search = next(t.name for t in spec.tools if t.kind == "read")
    return spec, task, write.tool, name, search


def test_procedure_checks_read_identity_and_confirmation_from_the_conversation():
    spec, task, write, name, search = _procedure_case()
    opening = {"role": "user", "content": f"Hi, I am {name}."}
    ask = {"role": "assistant", "content": f"Shall I go ahead and {write.replace('_', ' ')}?"}
    yes = {"role": "user", "content": "Yes, please go ahead."}
    no = {"role": "user", "content": "No, wait."}
    careful = [opening, _call(0, search, {"full_name": name}), _ok(0), ask, yes, _call(1, write, {}), _ok(1)]
    assert procedure_checks(task, spec, careful) == [(IDENTITY, True), (CONFIRMATION, True)]
    hasty = [opening, _call(1, write, {}), _ok(1), _call(0, search, {"full_name": name}), _ok(0)]
    assert procedure_checks(task, spec, hasty) == [(IDENTITY, False), (CONFIRMATION, False)]
    declined = [opening, _call(0, search, {"full_name": name}), _ok(0), ask, no, _call(1, write, {}), _ok(1)]
    assert dict(procedure_checks(task, spec, declined))[CONFIRMATION] is False
    told = [opening, {"role": "assistant", "content": "Who are you?"}, {"role": "user", "content": f"I am {name}."},
            ask, yes, _call(1, write, {}), _ok(1)]
    assert dict(procedure_checks(task, spec, told))[IDENTITY] is True
    # one yes covers the change it names: a second one with nothing of its own to name needs another yes
    nameless = [opening, _call(0, search, {"full_name": name}), _ok(0),
                {"role": "assistant", "content": "Shall I go ahead?"}, yes, _call(1, write, {}), _ok(1)]
    assert dict(procedure_checks(task, spec, nameless))[CONFIRMATION] is False
    twice = careful + [_call(2, write, {}), {"role": "tool", "tool_call_id": "c2", "content": "{}"}]
    assert dict(procedure_checks(task, spec, twice))[CONFIRMATION] is False
    twice = careful + [_call(2, write, {}), {"role": "tool", "tool_call_id": "c2", "content": "{}"}]
    assert dict(procedure_checks(task, spec, twice))[CONFIRMATION] is False
    # a failed write needs no yes; the tool channel's user tool counts as talking to the user
    failed = [opening, _call(1, write, {}), {"role": "tool", "tool_call_id": "c1",
                                             "content": json.dumps({"error": "x", "message": "y"})}]
    assert procedure_checks(task, spec, failed) == [(IDENTITY, True), (CONFIRMATION, True)]
    tool_channel = [opening, _call(0, search, {"full_name": name}), _ok(0),
                    _call(5, "send_message_to_user", {"message": f"Shall I {write.replace('_', ' ')}?"}),
                    {"role": "tool", "tool_call_id": "c5", "content": "Sure, go ahead."}, _call(1, write, {}), _ok(1)]
    assert procedure_checks(task, spec, tool_channel) == [(IDENTITY, True), (CONFIRMATION, True)]
    # play round 26: a go-ahead asked for without a question mark is still asked ("... (yes/no).")
    plain = {"role": "assistant", "content": f"I will {write.replace('_', ' ')}; please confirm that I may go ahead (yes/no)."}
    stated = [opening, _call(0, search, {"full_name": name}), _ok(0), plain, yes, _call(1, write, {}), _ok(1)]
    assert procedure_checks(task, spec, stated) == [(IDENTITY, True), (CONFIRMATION, True)]
    # a statement that asks nothing, answered by a "yes" the user volunteers, is no go-ahead
    told_only = {"role": "assistant", "content": "I will make the change now."}
    unasked = [opening, _call(0, search, {"full_name": name}), _ok(0), told_only, yes, _call(1, write, {}), _ok(1)]
    assert dict(procedure_checks(task, spec, unasked))[CONFIRMATION] is False


class _Hasty(OracleAgent):
    """The gold chain in conversational mode without asking anything."""

    def reset(self, ctx):
        super().reset(ctx)
        self._manners.before = lambda step, tool, args: None


@pytest.mark.parametrize("family", ["direct", "refusal", "partial", "conditional"])
def test_the_oracle_follows_the_procedure_in_conversation_and_a_hasty_one_scores_zero(family):
    from scaleenv.env.core import run_sync
    from scaleenv.env.loop import run_episode

    tasks = _family("pet_care", family, 3)
    assert tasks
    for task in tasks:
        ep = _episode("pet_care", task)
        env = ToolEnv(task, ep, user=ScriptedUser(), max_turns=40, release=lambda _: None)
        traj = run_sync(run_episode(env, OracleAgent()))
        assert traj.reward["score"] == 1.0, (task.id, traj.reward["diff"])
        has_write = bool(task.verification.gold_keys)
        if has_write:
            assert traj.reward["components"]["procedure_writes_confirmed"] == 1.0
        env = ToolEnv(task, ep, user=ScriptedUser(), max_turns=40, release=lambda _: None)
        hasty = run_sync(run_episode(env, _Hasty()))
        assert hasty.reward["score"] == (0.0 if has_write else 1.0), task.id


def test_solo_mode_applies_no_procedure():
    task = _family("pet_care", "partial", 1)[0]
    ep = _episode("pet_care", task)
    r = score_policy(ep, task, "oracle")
    assert r.score == 1.0 and not any(k.startswith("procedure_") for k in r.components)


# --- the simulated user ------------------------------------------------------------------------------------------------

def test_the_user_declines_a_confirmation_of_the_wrong_value_and_accepts_the_right_one():
    import asyncio

    from scaleenv.env.users import UserContext

    task = next(t for t in _family("pet_care", "direct", 8) + _family("pet_care", "conditional", 8)
                if any(isinstance(v, int | float) and not isinstance(v, bool) and not k.endswith(" id")
                       for k, v in t.user_profile.known.items() if k not in t.user_profile.withheld))
    fact, value = next((k, v) for k, v in task.user_profile.known.items()
                       if isinstance(v, int | float) and not isinstance(v, bool) and k not in task.user_profile.withheld)
    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=context("pet_care").spec))
    asyncio.run(user.opening())
    wrong = asyncio.run(user.reply(f"Shall I go ahead and set the {fact} to {value + 3}?"))
    assert wrong.startswith("No, that is not right") and str(value).rstrip("0").rstrip(".") in wrong
    right = asyncio.run(user.reply(f"Shall I go ahead and set the {fact} to {value}?"))
    assert right.startswith("Yes")


def test_every_family_is_registered_and_hosted_by_the_default_domains():
    assert {"direct", "refusal", "partial", "conditional"} <= set(FAMILIES)
    for name in DOMAINS:
        ctx = context(name)
        assert all(FAMILIES[f].applies(ctx) for f in ("refusal", "partial", "conditional"))


def test_chain_replays_unchanged_for_refusals():
    task = _family("football", "refusal", 1)[0]
    initial, expected = _worlds("football", task)
    run_chain(initial, context("football").spec, task.gold_chain)
    assert initial.state_hash() == expected.state_hash()


def test_a_refusal_looks_up_what_its_rule_reads_so_the_tools_can_show_it():
    """airline's late-cancellation rule reads the flight of a reservation: the gold chain fetches the flight,
    so the task's tools include a way to see the departure time."""
    tasks = _family("airline", "refusal", 6)
    spec = context("airline").spec
    late = [t for t in tasks if spec.policy.rule("no_late_cancellation").reason in
            [f.value for f in t.answer_facts]]
    assert late
    for task in late:
        checks = [c for c in task.gold_chain if c.purpose == "check the rule no_late_cancellation"]
        assert checks and checks[0].tool in task.tools
        assert spec.tool(checks[0].tool).returns.table == "flights"


def test_the_agent_is_told_todays_date():
    """Policy rules count days from today ("within 45 days"); no tool tells the date, the prompt does."""
    from scaleenv.env.prompts import system_prompt

    task = _family("pet_care", "direct", 1)[0]
    spec = context("pet_care").spec
    assert f"The current date and time is {spec.clock.replace('T', ' ')[:16]}." in system_prompt(task, spec)


def test_the_user_accepts_its_own_number_written_another_way():
    """"a tip of $0.00" confirms a tip of 0; "1,250.00" confirms 1250 (no decline over formatting)."""
    import asyncio

    from scaleenv.env.users import UserContext

    task = next(t for t in _family("pet_care", "direct", 8) + _family("pet_care", "conditional", 8)
                if any(isinstance(v, int | float) and not isinstance(v, bool) and not k.endswith(" id")
                       for k, v in t.user_profile.known.items() if k not in t.user_profile.withheld))
    fact, value = next((k, v) for k, v in task.user_profile.known.items()
                       if isinstance(v, int | float) and not isinstance(v, bool) and k not in task.user_profile.withheld)
    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=context("pet_care").spec))
    asyncio.run(user.opening())
    shown = f"{float(value):,.2f}"
    reply = asyncio.run(user.reply(f"Shall I go ahead and set the {fact} to {shown}?"))
    assert reply.startswith("Yes"), (shown, reply)
