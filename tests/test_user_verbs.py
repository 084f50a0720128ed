"""The scripted user says yes to the moves its task makes, whatever word it used for them (issue 42, case 6:
the oracle scored 0 where the user asked to "pause" and the tool says "freeze", "reject" and "deny", "archive"
and "file away"), and still no to a move no goal asks for."""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path
from typing import Any

import pytest

from scaleenv.env.core import make, run_sync
from scaleenv.env.loop import run_episode
from scaleenv.env.policies import OracleAgent
from scaleenv.env.styles import PLAIN
from scaleenv.env.users import _TALK_VERBS, ScriptedUser, UserContext, _stem
from scaleenv.formats.domain import DomainSpec, ToolSpec
from scaleenv.formats.task import Objective, Task
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.universe import Universe
from synth_helpers import context

YES = "Yes, please go ahead."
NO = "No, that is not what I asked for."


def _verb(tool: ToolSpec) -> str:
    return _stem(str(tool.meta["verb"]).split("_")[0])


def _words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z]+", text.lower())}


def _moves(spec: DomainSpec) -> list[ToolSpec]:
    return [t for t in spec.tools if t.kind == "write" and t.meta.get("family") == "transition"
            and t.meta.get("verb") and t.meta.get("to") and len(_verb(t)) >= 4 and _verb(t) not in _TALK_VERBS]


def _unsaid_move(spec: DomainSpec) -> tuple[ToolSpec, ToolSpec, str]:
    """A lifecycle move whose request (its blueprint phrasing) does not say its verb ("pause my enrollment" for
    ``freeze_registration``), another move of the same records that the request does not say either, and the
    request."""
    for tool in _moves(spec):
        goal = re.sub(r"\{[^}]*\}", "REC-0077", str(tool.meta["phrasings"][0]))
        if _verb(tool) in _words(goal):
            continue
        for other in _moves(spec):
            if other.meta["entity"] == tool.meta["entity"] and other.meta["to"] != tool.meta["to"] \
                    and _verb(other) not in _words(goal) and _verb(other) != _verb(tool):
                return tool, other, goal
    raise AssertionError("no move whose request does not say its verb")


def _task(goal: str, done_words: list[str], chain: list[str], domain: str) -> Task:
    return Task.model_validate({
        "id": f"{domain}/00000", "domain": domain, "instruction": "x", "initial_patch": {}, "tools": [],
        "gold_chain": [{"tool": name, "args": {}} for name in chain], "difficulty": {}, "verification": {},
        "user_profile": {"persona": "You are Jerry Ware.", "goals": [goal], "known": {"user email": "jerry@example.com"},
                         "identity": ["user email"],
                         "objectives": [Objective(kind="write", text=goal, done_words=done_words).model_dump()]},
    })


def _reply(task: Task, spec: DomainSpec, text: str) -> str:
    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=spec))
    asyncio.run(user.opening())
    return asyncio.run(user.reply(text))


def _proposal(tool: ToolSpec) -> str:
    """What the oracle asks before the call (the tool's own name for the move)."""
    args: dict[str, Any] = {p.name: "REC-0077" for p in tool.parameters[:1]}
    return f"Shall I go ahead with {PLAIN.item_text(tool.name, args)}?"


@pytest.fixture(scope="module")
def case() -> tuple[DomainSpec, ToolSpec, ToolSpec, str]:
    spec = context("online_learning").spec
    return (spec, *_unsaid_move(spec))


def test_the_move_of_the_tasks_own_change_is_asked_for_whatever_word_the_user_used(case):
    spec, tool, other, goal = case
    # done words that do not name the move's state: the task's own change is what the user wants
    task = _task(goal, [], [tool.name], spec.name)
    assert _reply(task, spec, _proposal(tool)).startswith(YES)
    assert _reply(task, spec, _proposal(other)).startswith(NO)  # a move no goal asks for


def test_a_move_to_the_state_the_goal_names_is_asked_for_on_either_branch(case):
    """An if-otherwise request names both branches' states among its done words; the gold chain holds only the
    branch that applies. A move to a state the goals name is asked for whichever branch the chain holds, so the
    user's yes or no does not tell the agent which branch holds."""
    spec, tool, other, goal = case
    done = [str(tool.meta["to"]).replace("_", " "), str(other.meta["to"]).replace("_", " ")]
    for chain in ([tool.name], [other.name], []):
        task = _task(goal, done, chain, spec.name)
        assert _reply(task, spec, _proposal(tool)).startswith(YES), chain
        assert _reply(task, spec, _proposal(other)).startswith(YES), chain


def test_a_move_no_goal_asks_for_still_gets_a_no(case):
    spec, tool, other, goal = case
    task = _task(goal, [str(tool.meta["to"]).replace("_", " ")], [tool.name], spec.name)
    reply = _reply(task, spec, _proposal(other))
    assert reply.startswith(NO) and goal in reply


@pytest.fixture(scope="module")
def universe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("user_verbs") / "universe"
    cfg = BuildConfig(out=out, domains=["online_learning"], tasks_per_domain=8, seed=0)
    prepare_out(cfg)
    run_build(cfg)
    return out


def test_the_oracle_scores_1_where_the_request_does_not_say_the_tools_verb(universe):
    """online_learning/00030 ("pause every active enrollment of mine", made by freeze_registration): the build's
    conversational gate turned it away while the user said no to "freeze registration"."""
    u = Universe(universe)
    unsaid = []
    for task in u.tasks():
        spec = u.spec(task.domain)
        said = set().union(*(_words(g) for g in task.user_profile.goals))
        moves = {_verb(t) for c in task.gold_chain if (t := spec.tool(c.tool)) is not None and t in _moves(spec)}
        if moves - said:
            unsaid.append(task)
    assert unsaid, "no task whose request does not say the verb of the move its gold chain makes"
    for task in unsaid:
        env = make(universe, task.id)
        try:
            traj = run_sync(run_episode(env, OracleAgent(), seed=0))
        finally:
            env.close()
        assert traj.reward["score"] == 1.0, task.id
        assert not any(NO in str(m.get("content") or "") for m in traj.messages if m["role"] == "user"), task.id
