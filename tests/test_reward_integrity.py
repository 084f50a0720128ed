"""Reward integrity in every shape and on every channel (issue 42): on a whole small build, every hack
policy scores at most 0 under the binary, partial and dense shapes, talking to the scripted user on
the text channel and through the tool channel (the path of MCP, TRL, OpenEnv, verifiers), and the
oracle scores 1 in both modes; the procedure is checked from the episode's own record on every path."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from scaleenv.env.agents import Agent, AgentContext, text_message
from scaleenv.env.cache import TaskWorldCache
from scaleenv.env.core import USER_TOOL, Channel, Mode, ToolEnv, run_sync
from scaleenv.env.loop import run_episode
from scaleenv.env.policies import (
    NaiveAgent,
    OracleAgent,
    PolicyManners,
    SwapAgent,
    answer_text,
    play_tools,
    reference_policy,
)
from scaleenv.env.users import ScriptedUser
from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.session import Session, gold_calls
from scaleenv.reward.subgoals import REWARD_SHAPES
from scaleenv.synth.tasks.gates import swap_pairs
from scaleenv.world.world import World
from synth_helpers import built_cache

DOMAINS = ["pet_care", "stock_trading", "express_logistics", "social_media_messaging"]
HACKS = ("noop", "random", "write_all", "read_dump", "spray", "parrot")
IDENTITY_ASK = "Before I change anything, could you please verify your identity by giving me your details?"


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> TaskWorldCache:
    return built_cache(tmp_path_factory.mktemp("integrity") / "universe", DOMAINS, 4, 4242)


def _literal(cache: TaskWorldCache, task: Any) -> list[tuple[str, dict[str, Any]]]:
    """The gold chain as literal calls, from the outputs its verified replay recorded."""
    return gold_calls(task, cache.worlds(task).outputs)


def _writes(spec: Any, task: Any) -> bool:
    return any((t := spec.tool(c.tool)) is not None and t.kind == "write" for c in task.gold_chain)


def _rules(spec: Any) -> set[str]:
    return {r.kind for r in spec.policy.rules} if spec.policy is not None else set()


class ConsentHack(Agent):
    """Asks for the user's identity as a careful agent would, then a question that names no change
    (``question``), then makes every gold call in one message and states the answers."""

    name = "consent_hack"

    def __init__(self, question: str, calls: list[tuple[str, dict[str, Any]]]):
        self.question = question
        self.calls = calls

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        calls = self.calls
        ids = [v for _, a in calls for v in a.values() if isinstance(v, str) and v[-4:].isdigit() and "-" in v]
        script = [text_message(IDENTITY_ASK), text_message(self.question.replace("{id}", ids[0] if ids else "it")),
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": f"h{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                      for i, (n, a) in enumerate(calls)]},
                  text_message(answer_text(ctx.task) or "Done."), text_message(STOP)]
        self._script = iter(script)

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return next(self._script, text_message(STOP))


class HastyOracle(OracleAgent):
    """The gold chain with no identity question and no confirmation (the policy's procedure skipped)."""

    name = "hasty"

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        self._manners = PolicyManners(AgentContext(task=ctx.task, tools=ctx.tools, rng=ctx.rng, mode="solo",
                                                   episode=ctx.episode, seed=ctx.seed), self.chain())


CONSENT_HACKS = {"blind": "Shall I go ahead?", "anything_else": "Is there anything else I can help you with?",
                 "read": "Shall I look up {id} for you?"}


def _hacks(cache: TaskWorldCache, ep: Any, task: Any) -> list[tuple[str, Agent]]:
    """Every hack policy that applies to the task, by name."""
    out: list[tuple[str, Agent]] = [(h, reference_policy(h)) for h in HACKS]
    out += [(f"swap:{other}", SwapAgent(target, other)) for target, other in swap_pairs(ep, task)[:2]]
    if task.forbidden:
        out.append(("naive", NaiveAgent()))
    rules = _rules(ep.spec)
    if _writes(ep.spec, task) and "confirmation" in rules:
        out += [(f"consent:{k}", ConsentHack(q, _literal(cache, task))) for k, q in CONSENT_HACKS.items()]
    if _writes(ep.spec, task) and rules & {"identity", "confirmation"}:
        out.append(("hasty", HastyOracle()))
    return out


def _text(cache: TaskWorldCache, task: Any, agent: Agent, shape: str, mode: Mode = Mode.CONVERSATIONAL) -> float:
    ep = cache.acquire(task)
    user = ScriptedUser() if mode is Mode.CONVERSATIONAL else None
    env = ToolEnv(task, ep, user=user, mode=mode, release=lambda e: cache.release(task, e), reward_shape=shape)
    try:
        return float(run_sync(run_episode(env, agent)).reward["score"])
    finally:
        env.close()


def _tool(cache: TaskWorldCache, task: Any, agent: Agent, shape: str) -> float:
    s = Session(cache, task, reward_shape=shape)
    try:
        return float(play_tools(s, agent, random.Random(f"agent:{task.id}"),
                                max_actions=4 * len(task.gold_chain) + 40).score)
    finally:
        s.close()


@pytest.mark.slow
@pytest.mark.parametrize("shape", REWARD_SHAPES)
def test_every_hack_scores_zero_and_the_oracle_one_in_every_shape_on_both_channels(cache, shape):
    tasks = cache.tasks()
    assert len(tasks) >= 16
    scored: list[str] = []
    for task in tasks:
        assert _text(cache, task, OracleAgent(), shape) == pytest.approx(1.0), (task.id, "oracle text")
        assert _tool(cache, task, OracleAgent(), shape) == pytest.approx(1.0), (task.id, "oracle tool")
        assert _text(cache, task, OracleAgent(), shape, Mode.SOLO) == pytest.approx(1.0), (task.id, "oracle solo")
        ep = cache.acquire(task)
        try:
            hacks = _hacks(cache, ep, task)
        finally:
            cache.release(task, ep)
        for name, agent in hacks:
            for channel, play in (("text", _text), ("tool", _tool)):
                if play(cache, task, agent, shape) > 0.0:
                    scored.append(f"{task.id} {name} {channel}")
    assert scored == []


def test_the_hacks_cover_consent_and_procedure(cache):
    """The property test above is not vacuous: the build has write tasks under both procedure rules,
    each gets the consent hacks, and a look-alike swap."""
    kinds = set()
    for task in cache.tasks():
        ep = cache.acquire(task)
        try:
            kinds |= {n.split(":")[0] for n, _ in _hacks(cache, ep, task)}
        finally:
            cache.release(task, ep)
    assert {"consent", "hasty", "swap", "noop", "parrot", "read_dump"} <= kinds


def _procedure(s: ToolEnv) -> dict[str, float]:
    comps = s.evaluate().components
    return {k: v for k, v in comps.items() if k.startswith("procedure_")}


def _write_task(cache: TaskWorldCache) -> Any:
    return next(t for t in cache.tasks() if t.id.startswith("pet_care/") and _writes(cache.spec("pet_care"), t)
                and t.user_profile.identity and not t.user_profile.gradual and t.user_profile.slip is None)


@pytest.mark.parametrize("path", ["call", "say_and_message_user"])
def test_the_tool_channel_checks_identity_and_consent_on_each_adapter_path(cache, path):
    """MCP, TRL, OpenEnv and verifiers call ``Session.call`` (the user tool included); SkyRL and verl
    use ``say`` and ``message_user``. Either way the gold calls made without asking score 0, and made
    after the identity question and a confirmation naming each change score 1."""
    task = _write_task(cache)

    def talk(s: Session, text: str) -> str:
        if path == "call":
            return str(s.call(USER_TOOL, {"message": text}).output)
        return s.message_user(text)

    # without identity or consent
    s = Session(cache, task)
    calls = _literal(cache, task)
    for name, args in calls:
        s.call(name, args)
    talk(s, answer_text(task) or "Done.")
    assert s.evaluate().score == 0.0
    assert 0.0 in _procedure(s).values()
    s.close()
    # as the policy asks: identity first, then a yes to a proposal naming each change
    s = Session(cache, task)
    talk(s, IDENTITY_ASK)
    spec = cache.spec(task.domain)
    for name, args in calls:
        if spec.tool(name).kind == "write":
            shown = ", ".join(f"{k} {v}" for k, v in sorted(args.items()))
            assert "yes" in talk(s, f"Shall I go ahead with {name.replace('_', ' ')} ({shown})?").lower()
        s.call(name, args)
    talk(s, answer_text(task) or "Done.")
    assert _procedure(s) == {"procedure_identity_verified": 1.0, "procedure_writes_confirmed": 1.0}
    assert s.evaluate().score == 1.0
    s.close()


def test_the_log_records_calls_made_outside_step_in_order(cache):
    task = _write_task(cache)
    s = Session(cache, task)
    s.call("no_such_tool", {"x": 1})
    s.say("Looking into it.")
    s.call(USER_TOOL, {"message": "What is your e-mail?"})
    roles = [(m["role"], bool(m.get("tool_calls"))) for m in s.log]
    assert roles == [("user", False), ("assistant", True), ("tool", False), ("assistant", False),
                     ("assistant", False), ("user", False)]
    assert s.log[1]["tool_calls"][0]["function"]["name"] == "no_such_tool"
    assert s.log[4]["content"] == "What is your e-mail?"
    s.close()


def test_partial_and_dense_pay_nothing_for_an_untouched_conversation(cache):
    """Issue 42 case 1 and 3: before, ``with_procedure`` dropped the row mismatches, so every write
    sub-goal counted as met and the procedure (met vacuously) counted too."""
    for task in cache.tasks():
        for shape in ("partial", "dense"):
            assert _text(cache, task, reference_policy("noop"), shape) <= 0.0, (task.id, shape)
            s = Session(cache, task, reward_shape=shape)
            assert s.evaluate().score <= 0.0, (task.id, shape, "untouched session")
            s.close()


def test_channel_enum_is_the_tool_channel_for_sessions(cache):
    s = Session(cache, cache.tasks()[0])
    assert s.channel is Channel.TOOL
    s.close()


@pytest.mark.slow
def test_check_reports_the_conversational_oracle(cache):
    from scaleenv.report.counts import check_universe

    result = check_universe(cache.root)
    assert result["gold_conversational_pass"] == result["tasks"] == result["gold_pass"] == result["gold_styled_pass"] >= 16
    assert result["styles_failed"] == {}
    assert result["failures"] == []


def test_an_id_the_gold_chain_passes_as_written_is_no_lookalike(cache):
    """Seed 4242, knowledge_management/00225: USR-0009 was both a look-alike of the user and the reviewer
    the user named; the partial shape's look-alike guards fired on the gold write itself."""
    from scaleenv.formats.task import Call
    from scaleenv.reward.subgoals import lookalike_calls, lookalikes

    task = cache.tasks()[0]
    table = "members"
    named = task.model_copy(deep=True)
    named.verification.distractors = {table: ["USR-0009", "USR-0031"]}
    named.gold_chain = [*named.gold_chain, Call(tool="request_review", args={"reviewer_id": "USR-0009"})]
    assert lookalikes(named) == {table: ["USR-0031"]}
    msg = [{"role": "assistant", "tool_calls": [{"id": "a", "function": {
        "name": "request_review", "arguments": json.dumps({"reviewer_id": "USR-0009"})}}]}]
    assert lookalike_calls(msg, ["request_review"], lookalikes(named)) == []
    assert [c.name for c in lookalike_calls(msg, ["request_review"], named.verification.distractors)] == \
        ["lookalike_call:request_review(USR-0009)"]


@pytest.mark.parametrize("hack", sorted(CONSENT_HACKS))
def test_consent_without_content_covers_no_write(cache, hack):
    """Issue 42 case 4: a yes to a question that names no change ("Shall I go ahead?", "anything else?",
    or a look-up of the record) covered every write after it; now it covers none, on both channels."""
    tasks = [t for t in cache.tasks() if _writes(cache.spec(t.domain), t) and "confirmation" in
             _rules(cache.spec(t.domain))][:4]
    assert tasks
    for task in tasks:
        assert _text(cache, task, ConsentHack(CONSENT_HACKS[hack], _literal(cache, task)), "binary") == 0.0, task.id
        assert _tool(cache, task, ConsentHack(CONSENT_HACKS[hack], _literal(cache, task)), "binary") == 0.0, task.id
        assert _text(cache, task, OracleAgent(), "binary") == 1.0, task.id


def test_a_semantic_text_left_as_it_was_is_no_change_to_a_similar_one(cache):
    """Seed 4242, email_management/00092: the gold chain changes a signature from "Best regards, David" to
    "Best regards, Darius"; the two are similar enough for the semantic match, so doing nothing met that
    write (the partial shape paid the noop 0.125). A cell of a row that was there must be nearer the
    expected value than the value it had."""
    from scaleenv.reward.state import compute_reward

    spec = next(s for s in (cache.spec(d) for d in DOMAINS)
                if any(c.match == "semantic" and c.type == "text" for t in s.tables for c in t.columns))
    table, col = next((t, c) for t in spec.tables for c in t.columns if c.match == "semantic" and c.type == "text")
    task = next(t for t in cache.tasks() if t.domain == spec.name)
    ep = cache.acquire(task)
    try:
        before = ep.initial_world()
        row = next(r for r in before.rows(table.name) if isinstance(r.get(col.name), str) and len(r[col.name]) >= 12)
        key, old = row[table.primary_key], row[col.name]
        new = old[:-2] + ("xy" if not old.endswith("xy") else "zw")  # a near copy: over the threshold
        expected = World.from_snapshot(spec, before.snapshot())
        final = World.from_snapshot(spec, before.snapshot())
        q = f'UPDATE "{table.name}" SET "{col.name}" = ? WHERE "{table.primary_key}" = ?'
        expected.conn.execute(q, (new, key))
        keys = {table.name: [key]}
        untouched = compute_reward(final, expected, keys=keys, before=before)
        assert untouched.success is False and untouched.mismatched == [(table.name, key, "cells")]
        # without the values before, the old rule: the similar text passed for the change
        assert compute_reward(final, expected, keys=keys).success is True
        final.conn.execute(q, (new, key))
        assert compute_reward(final, expected, keys=keys, before=before).success is True
    finally:
        cache.release(task, ep)


def test_a_change_passing_only_ids_is_named_by_any_word_that_says_its_move(cache):
    """Play round 41 (seed 2718): "discard draft DRF-0042" for ``throw_away_draft`` and "postpone" for
    ``delay_match`` (the user's own words, the states the moves lead to) were not taken as naming the change;
    a look-up or another record's id still names none."""
    from scaleenv.reward.procedure import names_change

    found = 0
    for domain in DOMAINS:
        spec = cache.spec(domain)
        for tool in spec.tools:
            to = tool.meta.get("to")
            ids = [p.name for p in tool.parameters]
            if tool.kind != "write" or not isinstance(to, str) or len(ids) != 1 or to[:5] in tool.name:
                continue
            found += 1
            args = {ids[0]: "REC-0001"}
            assert names_change(f"Shall I make REC-0001 {to}?", tool.name, args, spec), (tool.name, to)
            assert names_change(f"It will be {to}. Shall I go ahead?", tool.name, args, spec)  # by the action alone
            assert not names_change("Shall I look up REC-0001 for you?", tool.name, args, spec)
            assert not names_change(f"Shall I make REC-0002 {to}?", tool.name, args, spec)
            assert not names_change("Shall I go ahead?", tool.name, args, spec)
    assert found


def test_a_change_is_named_by_its_new_values_not_by_the_ids_of_its_parents(cache):
    """Play round 41: "add a new contact to your account: name Diana Fletcher, email ..., group work" names
    ``create_contact(account_id=ACT-0017, ...)``; the account is the user's own, said as "your account"."""
    from scaleenv.reward.procedure import names_change

    args = {"account_id": "ACT-0017", "full_name": "Diana Fletcher", "email": "audrey.andrade@mail.example.com",
            "contact_group": "work"}
    said = ("Shall I add a new contact to your account: name Diana Fletcher, email "
            "audrey.andrade@mail.example.com, group work?")
    assert names_change(said, "create_contact", args)
    assert not names_change(said.replace("group work", "group family"), "create_contact", args)


def test_a_tool_named_only_by_nouns_of_the_domain_is_named_by_its_name(cache):
    """Seed 4242: ``request_review`` (tables ``review_requests``) had no word left that says its move, so
    "Shall I go ahead?" named it; its name's own words say it then."""
    from scaleenv.reward.procedure import _action_words, names_change

    spec = cache.spec("express_logistics")
    nouns = [t.name.rstrip("s") for t in spec.tables if "_" not in t.name][:2]
    tool = spec.tools[0].model_copy(update={"name": "_".join(nouns), "kind": "write", "meta": {}})
    spec = spec.model_copy(update={"tools": [tool, *spec.tools[1:]]})
    assert _action_words(spec, tool.name) == nouns
    args = {p.name: "REC-0001" for p in tool.parameters if p.type == "string"} or {"x_id": "REC-0001"}
    assert not names_change("Shall I go ahead?", tool.name, args, spec)
    assert not names_change("Is there anything else I can help you with?", tool.name, args, spec)
    assert names_change(f"Shall I {nouns[0]} {nouns[1]} REC-0001?", tool.name, args, spec)


def test_a_question_answered_with_facts_is_no_part_of_the_proposal(cache):
    """Seed 4242: "Before I change anything, could you please verify your identity?" answered with the user's
    details, then "Shall I go ahead?", named ``change_pet_owner`` by its "change". An answered question is
    no proposal; the listing before a question answered otherwise still is."""
    from scaleenv.reward.procedure import CONFIRMATION, procedure_checks

    spec = cache.spec("express_logistics")
    task = next(t for t in cache.tasks() if t.domain == "express_logistics")
    tool = next(t.name for t in spec.tools if t.kind == "write" and t.name.startswith("cancel_")
                and len(t.parameters) == 1)
    verb = tool.split("_")[0]

    def convo(*said: str) -> list[dict[str, Any]]:
        msgs: list[dict[str, Any]] = [{"role": "user", "content": "Hi."}]
        for i, text in enumerate(said):
            msgs.append({"role": "assistant" if i % 2 == 0 else "user", "content": text})
        msgs += [{"role": "assistant", "tool_calls": [{"id": "w", "function": {
            "name": tool, "arguments": json.dumps({spec.tool(tool).parameters[0].name: "REC-0001"})}}]},
            {"role": "tool", "tool_call_id": "w", "content": json.dumps({"id": "REC-0001"})}]
        return msgs

    ask = f"Before I {verb} anything, could you please verify your identity by giving me your details?"
    blind = convo(ask, "My e-mail is a@example.com.", "Shall I go ahead?", "Yes, please go ahead.")
    assert dict(procedure_checks(task, spec, blind))[CONFIRMATION] is False
    named = convo(ask, "My e-mail is a@example.com.", f"Shall I {verb} REC-0001?", "Yes, please go ahead.")
    assert dict(procedure_checks(task, spec, named))[CONFIRMATION] is True
    listed = convo(f"Here is the plan: {verb} REC-0001. Do you confirm (yes/no)?", "My e-mail is a@example.com.",
                   "Shall I go ahead with it?", "Yes, please go ahead.")
    assert dict(procedure_checks(task, spec, listed))[CONFIRMATION] is True
    # a move's verb in any inflection of its declared state ("lock" for a move to "locked"), never a longer
    # word that merely begins like it ("address" is no "add")
    from scaleenv.reward.procedure import _says_word

    assert _says_word({"lock"}, "locked") and _says_word({"cancellation"}, "cancel")
    assert not _says_word({"address"}, "add") and not _says_word({"settle"}, "set")
