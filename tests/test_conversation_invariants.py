"""The conversation's invariants, as properties over every task of a build (default and eval-only domains):

* the oracle scores 1 in every style of :mod:`scaleenv.env.styles` (the style gate), and listing every
  candidate value of an answer scores 0;
* the scripted user never ends the chat while the agent's last message asks it something, and ends on its
  own only once every goal was raised and reported;
* a report of one goal never marks another through a word they share.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scaleenv.env.cache import TaskWorldCache
from scaleenv.env.core import Mode, ToolEnv, run_sync
from scaleenv.env.judge import Progress, distinctive_keys, questions
from scaleenv.env.loop import run_episode
from scaleenv.env.policies import OracleAgent
from scaleenv.env.styles import GATE_STYLES, PLAIN, STYLES, say_report
from scaleenv.env.users import ScriptedUser
from scaleenv.env.voice import phrasings
from scaleenv.formats.task import REFUSAL_FACT
from scaleenv.formats.trajectory import STOP
from synth_helpers import built_cache

DOMAINS = ["telecom", "library_services", "stock_trading", "travel_agency"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> TaskWorldCache:
    return built_cache(tmp_path_factory.mktemp("invariants") / "universe", DOMAINS, 6, 606)


class _Watched(ScriptedUser):
    """A scripted user that keeps every (agent message, reply) and its progress when it ended."""

    def reset(self, ctx: Any) -> None:
        super().reset(ctx)
        self.heard: list[tuple[str, str]] = []
        self.ended_done: bool | None = None

    async def reply(self, agent_text: str) -> str:
        out = await super().reply(agent_text)
        self.heard.append((agent_text, out))
        if STOP in out and self.ended_done is None:
            self.ended_done = self.progress.finished() and self.progress.said == len(self.goals)
        return out


def _play(cache: TaskWorldCache, task: Any, agent: Any, user: ScriptedUser) -> float:
    ep = cache.episode(task)
    env = ToolEnv(task, ep, user=user, mode=Mode.CONVERSATIONAL, release=lambda _: None)
    try:
        return float(run_sync(run_episode(env, agent, seed=0)).reward["score"])
    finally:
        ep.close()


def test_the_oracle_scores_one_in_every_style_and_the_user_keeps_its_invariants(cache):
    tasks = [t for d in cache.universe.domains for t in cache.universe.tasks(d)]
    assert len(tasks) >= 20 and len(GATE_STYLES) >= 8
    finished = {line for line in phrasings()["finished"]}
    for task in tasks:
        for style in STYLES:
            user = _Watched()
            assert _play(cache, task, OracleAgent(style), user) == 1.0, (task.id, style)
            for agent_text, reply in user.heard:
                if STOP in reply and "I have to go now" not in reply:
                    assert not questions(agent_text), (task.id, style, agent_text, reply)
                if STOP in reply and any(line in reply for line in finished):
                    assert user.ended_done, (task.id, style, reply)


class _Hedger(OracleAgent):
    """The oracle, whose final report lists every candidate value of each answer (the value and its rivals)."""

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        out = await super().act(messages)
        task = self.ctx.task
        if out.get("content") == say_report(PLAIN, task):
            facts = [(f.name, ", ".join(str(v) for v in [*f.rivals, f.value]) if f.name != REFUSAL_FACT else f.value)
                     for f in task.answer_facts]
            out = {**out, "content": say_report(PLAIN, task, facts)}
        return out


def test_listing_every_candidate_value_scores_zero(cache):
    tasks = [t for d in cache.universe.domains for t in cache.universe.tasks(d)
             if any(f.rivals and f.name != REFUSAL_FACT for f in t.answer_facts)]
    assert tasks
    for task in tasks:
        assert _play(cache, task, _Hedger(), ScriptedUser()) == 0.0, task.id


def test_a_report_of_one_goal_never_marks_another(cache):
    checked = 0
    rng = random.Random(0)
    for d in cache.universe.domains:
        for task in cache.universe.tasks(d):
            objectives = task.user_profile.objectives
            keys = distinctive_keys(objectives)
            writes = [i for i, o in enumerate(objectives) if o.kind == "write"]
            if len(writes) < 2:
                continue
            for j in writes:
                if not keys[j]:
                    continue
                done = objectives[j].done_words[0] if objectives[j].done_words else "done"
                progress = Progress(objectives)
                progress.update(f"{rng.choice(keys[j])}: {done}.")
                assert [progress.done[i] for i in writes] == [i == j for i in writes], (task.id, j, keys)
                checked += 1
    assert checked >= 5
