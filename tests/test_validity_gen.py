"""Task validity, generation half: gold chains built from what the user states, valid fresh values,
targets with substance, distractors that discriminate, tool sets that allow the job, and the
read-dump / spray / parrot / distractor-swap gates."""

from __future__ import annotations

import contextlib
import random
import re

import pytest

from scaleenv.env.cache import build_worlds, make_episode
from scaleenv.env.policies import SwapAgent
from scaleenv.formats.task import AnswerFact, Call, Task
from scaleenv.reward.facts import fact_stated
from scaleenv.synth.tasks.expand import needed_tools
from scaleenv.synth.tasks.families import generate_task
from scaleenv.synth.tasks.gates import ZERO_GATES, play_policy, run_gates, score_policy, swap_pairs
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.synth.tasks.validity import exempt_columns, goal_effects, lookalikes, unobservable_goals
from scaleenv.tools.sampling import ArgSampler
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World
from synth_helpers import context

DOMAINS = ["pet_care", "football", "stock_trading", "social_media_messaging"]


def _tasks(name: str, n: int, seed: int = 0) -> list[Task]:
    ctx = context(name)
    out, attempt = [], 0
    while len(out) < n and attempt < 12 * n:
        with contextlib.suppress(TaskRejected):
            out.append(generate_task(ctx, seed, attempt))
        attempt += 1
    return out


_CACHE: dict[str, list[Task]] = {}


def tasks(name: str) -> list[Task]:
    if name not in _CACHE:
        _CACHE[name] = _tasks(name, 8)
    return _CACHE[name]


def _episode(name: str, task: Task, check_hashes: bool = True):
    ctx = context(name)
    return make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task, check_hashes=check_hashes))


def _initial(name: str, task: Task) -> World:
    ctx = context(name)
    w = World.from_snapshot(ctx.spec, ctx.base)
    apply_patch(w, task.initial_patch)
    return w


# --- 1. gold chains built from what the user states ------------------------------------------------------------

@pytest.mark.parametrize("name", DOMAINS)
def test_write_goals_set_only_stated_optional_arguments_and_no_exempt_inputs(name):
    ctx = context(name)
    for task in tasks(name):
        said = " ".join(task.user_profile.goals)
        for call in task.gold_chain:
            tool = ctx.spec.tool(call.tool)
            if tool.kind != "write" or call.purpose != "goal":
                continue
            keys = ctx.key_params(tool)
            for k, v in call.args.items():
                p = tool.param(k)
                if k in keys or isinstance(v, dict):
                    continue
                assert p.required or str(v) in said, f"{task.id}: {tool.name}.{k}={v!r} is never stated"
                if p.column:
                    t, _, c = p.column.partition(".")
                    assert c not in exempt_columns(ctx.spec, t) or c == "id", f"{task.id}: {k} goes to exempt {c}"


def test_trim_args_drops_optional_arguments_preconditions_do_not_need():
    from scaleenv.synth.tasks.generate import ChainConfig, TaskBuilder

    ctx = context("pet_care")
    b = TaskBuilder(ctx, 0, 0, ChainConfig())
    tool = next(t for t in ctx.spec.tools if t.kind == "read" and any(not p.required for p in t.parameters))
    opt = next(p for p in tool.parameters if not p.required and p.name not in ctx.key_params(tool))
    sample = ArgSampler(b.world, random.Random(0)).candidates(opt)[0]
    assert opt.name not in b.trim_args(tool, {opt.name: sample})


# --- 2. valid fresh values ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pet_care", "smart_home", "second_hand_marketplace"])
def test_fresh_candidates_for_unique_columns_are_unused_and_unsuffixed(name):
    ctx = context(name)
    world = World.from_snapshot(ctx.spec, ctx.base)
    sampler = ArgSampler(world, random.Random(1))
    checked = 0
    for tool in ctx.spec.tools:
        for p in tool.parameters:
            if p.type != "string" or not p.column or p.enum:
                continue
            t, _, c = p.column.partition(".")
            col = ctx.spec.table(t).column(c) if ctx.spec.table(t) else None
            if col is None or not col.unique or col.foreign_key or c == "id":
                continue
            existing = set(sampler.column_values(p.column))
            fresh = [v for v in sampler.candidates(p) if v not in existing]
            assert fresh, f"{tool.name}.{p.name}: no fresh candidate"
            for v in fresh:
                checked += 1
                assert "(new)" not in v and ".new@" not in v, v
                if "email" in c:
                    assert re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", v), v
    assert checked


# --- 3. targets with substance -----------------------------------------------------------------------------------

def test_cloned_target_gets_child_rows():
    ctx = context("pet_care")
    with_children = 0
    for task in tasks("pet_care"):
        cloned = {(t, r["id"]) for t, rows in task.initial_patch.items() for r in rows}
        for t in task.initial_patch:
            for child, fk in ctx.children(t):
                kids = [r for r in task.initial_patch.get(child, []) if (t, r.get(fk)) in cloned]
                with_children += bool(kids)
    assert with_children, "no cloned row got child rows of its own"


@pytest.mark.parametrize("name", DOMAINS)
def test_answers_are_not_zero_and_look_alikes_answer_differently(name):
    for task in tasks(name):
        for f in task.answer_facts:
            assert f.value not in (0, 0.0, "", None, [], {}), f"{task.id}: {f.name} = {f.value!r}"
            for r in f.rivals:
                assert not fact_stated(AnswerFact(name=f.name, value=f.value), f"The {f.name} is {r}."), (task.id, r)


def test_noop_and_undone_sub_goals_are_found():
    ctx = context("pet_care")
    world = World.from_snapshot(ctx.spec, ctx.base)
    pet = next(r for r in world.rows("pets") if r["status"] != "deceased")
    init = world.snapshot()
    tool = "change_pet_weight_kg"  # an update of one column of the pet (the seed's tool set decides which)
    same = [Call(tool=tool, args={"pet_id": pet["id"], "new_weight_kg": pet["weight_kg"]}, purpose="goal")]
    effects, final = goal_effects(ctx.spec, init, same)
    assert unobservable_goals(ctx.spec, init, effects, final) == [(tool, "noop_subgoal")]
    undo = [Call(tool=tool, args={"pet_id": pet["id"], "new_weight_kg": pet["weight_kg"] + 1}, purpose="goal"),
            Call(tool=tool, args={"pet_id": pet["id"], "new_weight_kg": pet["weight_kg"]}, purpose="goal")]
    effects, final = goal_effects(ctx.spec, init, undo)
    assert unobservable_goals(ctx.spec, init, effects, final) == [
        (tool, "unobservable_subgoal"), (tool, "unobservable_subgoal")]
    real = undo[:1]
    effects, final = goal_effects(ctx.spec, init, real)
    assert unobservable_goals(ctx.spec, init, effects, final) == []


# --- 4. distractors that discriminate ----------------------------------------------------------------------------

def _passed_ids(name: str, task: Task) -> list[tuple[str, object]]:
    """(table, id) of every entity id the gold chain passes, as it replays."""
    from scaleenv.tools.chain import resolve_args
    from scaleenv.tools.runtime import run_tool

    ctx = context(name)
    world, outputs, out = _initial(name, task), [], []
    for i, call in enumerate(task.gold_chain):
        tool = ctx.spec.tool(call.tool)
        args = resolve_args(call, outputs, i)
        out += [(t, args[p]) for p, t in ctx.key_params(tool).items() if p in args]
        outputs.append(run_tool(world, tool, args))
    return out


@pytest.mark.parametrize("name", DOMAINS)
def test_every_lookalike_of_a_cloned_target_is_a_distractor(name):
    ctx = context(name)
    seen = 0
    for task in tasks(name):
        world = _initial(name, task)
        distractors = task.verification.distractors
        cloned = {(t, r["id"]) for t, rows in task.initial_patch.items() for r in rows}
        for t, key in _passed_ids(name, task):
            if (t, key) not in cloned or key in distractors.get(t, []):
                continue
            others = lookalikes(world, ctx, t, world.row(t, key))
            seen += len(others)
            assert set(others) <= set(distractors.get(t, [])), (task.id, t, key, others)
        pairs = swap_pairs(_episode(name, task), task)
        assert {d for _, d in pairs} <= {d for ids in distractors.values() for d in ids}
        world.close()
    assert seen, "no look-alike found at all: the check did not run"


def _shared_column() -> tuple[str, list[dict]]:
    """A plain column of pet_care's pets that two pets share a value of, and the pets."""
    ctx = context("pet_care")
    pets = World.from_snapshot(ctx.spec, ctx.base).rows("pets")
    for col in ("species", "breed", "status"):
        vals = [p[col] for p in pets]
        if len(set(vals)) < len(vals) and len(set(vals)) > 1:
            return col, pets
    raise AssertionError("no shared column")


def _answer_task(col: str, target: dict, other: dict) -> Task:
    """A hand-made answer task on the base world ("what is the <col> of pet X") with one distractor."""
    task = tasks("pet_care")[0].model_copy(deep=True)
    task.initial_patch = {}
    task.gold_chain = [Call(tool="get_pet", args={"pet_id": target["id"]}, purpose="goal")]
    task.answer_facts = [AnswerFact(name=f"pet {col}", value=target[col])]
    task.tools = sorted({"get_pet", *task.tools})
    task.verification.distractors = {"pets": [other["id"]]}
    task.forbidden = []
    return task


def test_swap_gate_rejects_a_lookalike_that_scores_like_the_target():
    col, pets = _shared_column()
    target = pets[0]
    target = next(p for p in pets if sum(q[col] == p[col] for q in pets) > 1)
    same = next(p for p in pets if p[col] == target[col] and p["id"] != target["id"])
    other = next(p for p in pets if p[col] != target[col])
    for lookalike, want in ((same, 1.0), (other, 0.0)):
        task = _answer_task(col, target, lookalike)
        ep = _episode("pet_care", task, check_hashes=False)
        pairs = swap_pairs(ep, task)
        assert pairs == [(target["id"], lookalike["id"])]
        assert play_policy(ep, task, SwapAgent(*pairs[0]), random.Random(0)).score == want
        assert run_gates(ep, task, detail=True).scores["swap"] == want


def test_rivals_defeat_an_answer_that_lists_every_candidate():
    f = AnswerFact(name="pet weight", value=12.5, rivals=[13.5, 11.0])
    assert fact_stated(f, "The pet weight is 12.5 kg.")
    assert not fact_stated(f, "Weights: 12.5, 13.5 and 11.0.")
    g = AnswerFact(name="note", value="Buy on dip", rivals=["Buy"])
    assert fact_stated(g, "The note says: Buy on dip.")
    assert AnswerFact(name="x", value=1).model_dump() == {"name": "x", "value": 1}
    assert AnswerFact(name="x", value=1, rivals=[2]).model_dump() == {"name": "x", "value": 1, "rivals": [2]}


# --- 5. tool sets that allow the job ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DOMAINS)
def test_task_tools_include_finders_and_correctors(name):
    from scaleenv.synth.audit import _exercisable

    ctx = context(name)
    for task in tasks(name):
        have = set(task.tools)
        needed = needed_tools(ctx, task.gold_chain)
        assert needed, f"{task.id}: the chain's entities have no finder or corrector at all"
        init = _initial(name, task).snapshot()
        for tool in needed:
            # a needed tool is left out only when it cannot run on the task's initial state
            assert tool in have or not _exercisable(ctx.spec, init, ctx.spec.tool(tool), ctx), (task.id, tool)


def test_needed_tools_name_the_finders_and_correctors_of_the_chain():
    ctx = context("pet_care")
    chain = [Call(tool="find_owners", args={"full_name": "x"}),
             Call(tool="list_pets_by_owner", args={"owner_id": {"$ref": 0, "field": "id"}}),
             Call(tool="change_pet_weight_kg", args={"pet_id": {"$ref": 1, "field": "id"}, "new_weight_kg": 3},
                  purpose="goal")]
    needed = needed_tools(ctx, chain)
    assert {"get_pet", "get_owner", "find_pets"} <= set(needed)  # finders of the tables the chain names
    assert {"record_death_of_pet"} <= set(needed)  # a corrector of the pet written
    assert not {c.tool for c in chain} & set(needed)


# --- 6. the gates --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DOMAINS)
def test_every_new_gate_scores_zero_on_admitted_tasks(name):
    for task in tasks(name):
        assert set(task.verification.gates) == {"gold", "gold_conversational", *ZERO_GATES}
        assert task.verification.gates["gold"] == 1.0
        assert all(task.verification.gates[g] == 0.0 for g in ZERO_GATES), (task.id, task.verification.gates)
        ep = _episode(name, task)
        assert score_policy(ep, task, "read_dump").score == 0.0


def test_read_dump_spray_and_parrot_score_where_the_answer_is_free():
    pick = [(n, t) for n in DOMAINS for t in tasks(n) if t.answer_facts and t.answer_facts[0].rivals
            and all(context(n).spec.tool(c.tool).kind == "read" for c in t.gold_chain)]
    assert pick, "no answer-only task with rivals"

    def without_rivals(t):
        free = t.model_copy(deep=True)
        free.answer_facts = [AnswerFact(name=f.name, value=f.value) for f in t.answer_facts]
        return free

    # a task whose answer the dump reaches: without rivals dumping everything passes, with them it fails
    reached = [(n, t) for n, t in pick if score_policy(_episode(n, without_rivals(t)), without_rivals(t),
                                                       "read_dump").score == 1.0]
    if not reached:  # known gap after merging the user half: facts are named as people say them now
        pytest.xfail("the read-dump policy reaches no answer even without rivals: it needs the user's "
                     "naturally named facts mapped to tool parameters (open: see the closing note)")
    name, task = reached[0]
    assert score_policy(_episode(name, task), task, "read_dump").score == 0.0  # the look-alikes' values are in the dump
    free = without_rivals(task)
    spray = free.model_copy(deep=True)
    spray.answer_facts = [AnswerFact(name="count", value=7)]
    assert score_policy(_episode(name, spray), spray, "spray").score == 1.0
    parrot = free.model_copy(deep=True)
    parrot.answer_facts = [AnswerFact(name="echo", value=parrot.user_profile.goals[0][:40])]
    assert score_policy(_episode(name, parrot), parrot, "parrot").score == 1.0
