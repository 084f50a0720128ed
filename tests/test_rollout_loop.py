"""The interaction loop, built-in agents and users, rollouts on serial and process executors,
resume after Ctrl-C, and the ``scaleenv rollout`` command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.env.agents import Agent
from scaleenv.env.cache import TaskWorldCache
from scaleenv.env.core import ToolEnv
from scaleenv.env.language import spoken
from scaleenv.env.loop import run_episode, solo_request
from scaleenv.env.policies import make_agent
from scaleenv.env.users import ScriptedUser, UserContext, make_user, turn_budget
from scaleenv.formats.trajectory import STOP
from scaleenv.run.rollout import RolloutConfig, RolloutError, RolloutInterrupted, run_rollout
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.universe import Universe

runner = CliRunner()


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rollout") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care", "wedding_planning"], tasks_per_domain=3)
    prepare_out(cfg)
    run_build(cfg)
    return out


@pytest.fixture(scope="module")
def loader(universe):
    u = Universe(universe)
    return u, TaskWorldCache(u)


def _task_with_withheld(u):
    for t in u.tasks():
        if t.user_profile.withheld:
            return t
    pytest.skip("no task with withheld facts in this universe")


class ScriptAgent(Agent):
    """Replays fixed assistant messages (then the stop marker)."""

    name = "script"

    def __init__(self, replies):
        self.replies = list(replies)

    def reset(self, ctx):
        super().reset(ctx)
        self.i = 0
        self.seen = []

    async def act(self, messages):
        self.seen.append([dict(m) for m in messages])
        if self.i >= len(self.replies):
            return {"role": "assistant", "content": STOP}
        reply = self.replies[self.i]
        self.i += 1
        if isinstance(reply, Exception):
            raise reply
        return reply(messages) if callable(reply) else reply


def _run(ep, task, agent, user=None, *, mode="conversational", max_turns=30, max_user_turns=10, seed=0, **kw):
    env = ToolEnv(task, ep, user=user, mode=mode, max_turns=max_turns, max_user_turns=max_user_turns, seed=seed,
                  release=lambda _: None)
    return asyncio.run(run_episode(env, agent, seed=seed, **kw))


# ------------------------------------------------------------------------------------------- loop


def test_oracle_conversational_trajectory_shape(loader):
    u, tl = loader
    task = u.tasks()[0]
    ep = tl.episode(task)
    traj = _run(ep, task, make_agent("oracle"), make_user("scripted"), seed=7, trial=2)
    assert traj.termination == "user_done"
    assert traj.reward["score"] == 1.0 and traj.reward["success"] is True
    assert set(traj.reward["components"]) >= {"state_match", "answer_facts"}
    msgs = traj.messages
    assert msgs[0]["role"] == "user" and STOP not in msgs[0]["content"]
    assert STOP in msgs[-1]["content"] and msgs[-1]["role"] == "user"
    # every tool call is answered by a tool message with its id, in order
    calls = [tc for m in msgs if m["role"] == "assistant" for tc in m.get("tool_calls") or []]
    answers = [m for m in msgs if m["role"] == "tool"]
    assert [c["id"] for c in calls] == [a["tool_call_id"] for a in answers]
    assert len(calls) == len(task.gold_chain) == traj.tool_calls
    assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for c in calls)
    assert traj.tools == ep.tool_schemas() and {t["function"]["name"] for t in traj.tools} == set(task.tools)
    # the policy's procedure: before the first write an identity question, before the writes confirmations
    # (one itemised question covers the writes in a row whose arguments are known already)
    said = [m for m in msgs if m["role"] == "assistant" and not m.get("tool_calls")]
    writes = [c for c in task.gold_chain if ep.spec.tool(c.tool).kind == "write"]
    confirms = [m for m in said if m["content"].startswith("Shall I go ahead")]
    assert (1 <= len(confirms) <= len(writes)) if writes else not confirms
    assert len(said) == 1 + (1 + len(confirms) if writes else 0)
    assert traj.steps == len(task.gold_chain) + len(said) and traj.user_turns == 1 + len(said)
    assert traj.id == f"{task.id}#2" and traj.seed == 7
    assert set(traj.timings) == {"agent_s", "user_s", "tools_s", "eval_s", "total_s"}
    assert traj.timings["total_s"] >= traj.timings["tools_s"] > 0


def test_noop_and_random_score_zero(loader):
    u, tl = loader
    for task in u.tasks():
        ep = tl.episode(task)
        noop = _run(ep, task, make_agent("noop"), make_user("scripted"))
        assert noop.termination == "agent_stop" and noop.reward["score"] == 0.0 and noop.tool_calls == 0
        rnd = _run(ep, task, make_agent("random"), make_user("scripted"), seed=3)
        assert rnd.reward["score"] == 0.0 and rnd.tool_calls == 12


def test_solo_mode_gives_the_whole_request_up_front(loader):
    u, tl = loader
    task = _task_with_withheld(u)
    traj = _run(tl.episode(task), task, make_agent("oracle"), None, mode="solo")
    assert traj.termination == "agent_stop" and traj.reward["score"] == 1.0 and traj.user is None
    first = traj.messages[0]["content"]
    assert first == solo_request(task)
    for fact in task.user_profile.withheld:
        assert str(task.user_profile.known[fact]) in first


def test_max_turns(loader):
    u, tl = loader
    task = u.tasks()[0]
    read = next(t for t in task.tools if t.startswith(("find_", "list_", "get_")))
    msg = {"role": "assistant", "content": None,
           "tool_calls": [{"id": "c", "type": "function", "function": {"name": read, "arguments": "{}"}}]}
    traj = _run(tl.episode(task), task, ScriptAgent([msg] * 10), make_user("scripted"), max_turns=4)
    assert traj.termination == "max_turns" and traj.steps == 4 and traj.tool_calls == 4
    assert traj.reward["score"] == 0.0


@pytest.mark.parametrize(
    "bad, needle",
    [
        ({"id": "x", "type": "function", "function": {"name": "f", "arguments": "{not json"}}, "not JSON"),
        ({"id": "x", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}, "not a JSON object"),
        ({"id": "x", "type": "function", "function": {"arguments": "{}"}}, "no function name"),
        ({"id": "x", "type": "function"}, "no function name"),
    ],
)
def test_malformed_tool_call_is_a_tool_error_the_policy_sees(loader, bad, needle):
    u, tl = loader
    task = u.tasks()[0]
    traj = _run(tl.episode(task), task, ScriptAgent([{"role": "assistant", "content": None, "tool_calls": [bad]}]),
                make_user("scripted"))
    assert traj.termination != "error" and traj.error is None  # a policy mistake, not an outage
    assert traj.tool_calls == 1 and traj.tool_errors == 1 and traj.reward["score"] == 0.0
    i = next(i for i, m in enumerate(traj.messages) if m.get("tool_calls") == [bad])  # the offending message
    reply = traj.messages[i + 1]
    assert reply["role"] == "tool" and reply["tool_call_id"] == "x"
    body = json.loads(reply["content"])
    assert body["error"] == "invalid_arguments" and needle in body["message"]


def test_malformed_call_next_to_good_ones_runs_the_good_ones(loader):
    u, tl = loader
    task = u.tasks()[0]
    read = next(t for t in task.tools if t.startswith(("find_", "list_", "get_")))
    msg = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": read, "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": read, "arguments": "{oops"}}]}
    traj = _run(tl.episode(task), task, ScriptAgent([msg]), make_user("scripted"))
    tools = [m for m in traj.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools[:2]] == ["a", "b"]
    assert "error" not in json.loads(tools[0]["content"]) or json.loads(tools[0]["content"])["error"] != \
        "invalid_arguments"
    assert json.loads(tools[1]["content"])["error"] == "invalid_arguments"
    assert traj.tool_calls == 2 and traj.termination != "error"


def test_agent_mistakes_are_tool_errors_not_episode_errors(loader):
    u, tl = loader
    task = u.tasks()[0]
    msg = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "no_such_tool", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": task.tools[0], "arguments": '{"bogus": 1}'}}]}
    traj = _run(tl.episode(task), task, ScriptAgent([msg]), make_user("scripted"))
    assert traj.termination == "agent_stop" and traj.tool_calls == 2 and traj.tool_errors == 2
    outs = [json.loads(m["content"]) for m in traj.messages if m["role"] == "tool"]
    assert outs[0]["error"] == "unknown_tool" and "error" in outs[1]


def test_agent_exception_ends_with_error(loader):
    u, tl = loader
    task = u.tasks()[0]
    traj = _run(tl.episode(task), task, ScriptAgent([RuntimeError("boom")]), make_user("scripted"))
    assert traj.termination == "error" and "boom" in traj.error


# ------------------------------------------------------------------------------------ scripted user


def test_scripted_user_reveals_withheld_facts_only_when_asked(loader):
    u, tl = loader
    task = _task_with_withheld(u)
    known, withheld = task.user_profile.known, task.user_profile.withheld
    user = ScriptedUser(patience=5, varied=False)
    user.reset(UserContext(task=task, rng=None, max_turns=10, spec=u.spec(task.domain)))
    opening = asyncio.run(user.opening())
    for fact in withheld:
        assert not any(str(known[fact]) == tok for tok in opening.replace(",", " ").replace(")", " ").split())
    assert "[ask me]" in opening or not any(str(known[f]) in " ".join(task.user_profile.goals) for f in withheld)
    chatter = asyncio.run(user.reply("I am looking into it now."))
    assert STOP not in chatter and all(str(known[f]) not in chatter for f in withheld)
    fact = withheld[0]
    answer = asyncio.run(user.reply(f"Could you tell me the {fact}?"))
    assert f" {spoken(known[fact])}." in answer
    assert asyncio.run(user.reply("What is your favourite colour?")) == "I don't know that, sorry."


def test_scripted_user_stops_when_told_done_or_out_of_turns(loader):
    """The user ends when the agent reports its request done (its own judgement, not the reward's),
    when its turns run out, or when its patience does."""
    u, _ = loader
    task = next(t for t in u.tasks() if not t.forbidden and not t.user_profile.pushback
                and all(o.kind != "refusal" for o in t.user_profile.objectives))  # a report of every change (nothing refused)
    user = ScriptedUser(patience=10, varied=False)
    user.reset(UserContext(task=task, rng=None, max_turns=3))
    asyncio.run(user.opening())
    assert STOP not in asyncio.run(user.reply("Working on it."))
    report = "Your request has been completed.\n" + "\n".join(f"The {f.name} is 0." for f in task.answer_facts)
    assert STOP in asyncio.run(user.reply(report))
    # its turns: max_turns plus one per change the task makes (the opening is the first)
    ctx = UserContext(task=task, rng=None, max_turns=3)
    assert turn_budget(ctx) == 3 + len(task.gold_chain)  # no spec: every call counts as a change
    user = ScriptedUser(patience=100, varied=False)
    user.reset(ctx)
    asyncio.run(user.opening())
    replies = [asyncio.run(user.reply("Working on it.")) for _ in range(turn_budget(ctx))]
    assert [STOP in r for r in replies] == [False] * (turn_budget(ctx) - 1) + [True]
    impatient = ScriptedUser(patience=1, varied=False)
    impatient.reset(UserContext(task=task, rng=None, max_turns=10))
    asyncio.run(impatient.opening())
    assert [STOP in asyncio.run(impatient.reply("Hmm.")) for _ in range(2)] == [False, True]


def test_scripted_user_answers_an_asking_agent_end_to_end(loader):
    """An agent that asks for every withheld fact gets each value back in a user message."""
    u, tl = loader
    task = _task_with_withheld(u)
    asks = [{"role": "assistant", "content": f"Could you give me the {f}?"} for f in task.user_profile.withheld]
    traj = _run(tl.episode(task), task, ScriptAgent(asks), make_user("scripted"))
    replies = [m["content"] for m in traj.messages if m["role"] == "user"][1:]
    for f, r in zip(task.user_profile.withheld, replies, strict=False):
        assert str(task.user_profile.known[f]) in r
    assert traj.termination == "agent_stop"


# ------------------------------------------------------------------------------------------ rollout


def _cfg(universe, tmp_path, **kw) -> RolloutConfig:
    kw.setdefault("out", tmp_path / "results.json")
    return RolloutConfig(universe=universe, **kw)


def _comparable(records):
    return sorted(({k: r[k] for k in ("id", "seed", "termination", "reward", "messages", "tools", "steps")}
                   for r in records), key=lambda r: r["id"])


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_oracle_one_noop_zero_on_every_executor(universe, tmp_path, executor):
    oracle = run_rollout(_cfg(universe, tmp_path / "o", agent="oracle", executor=executor, workers=2))
    assert oracle["avg_at_k"] == {"1": 1.0} and oracle["pass_hat_k"] == {"1": 1.0}
    assert [d["avg_at_k"]["1"] for d in oracle["per_domain"]] == [1.0, 1.0]
    assert oracle["num_episodes"] == 6 and oracle["status"] == "complete" and oracle["errors"] == 0
    noop = run_rollout(_cfg(universe, tmp_path / "n", agent="noop", executor=executor, workers=2, trials=2))
    assert noop["avg_at_k"] == {"1": 0.0, "2": 0.0} and noop["pass_at_k"]["2"] == 0.0
    assert noop["num_episodes"] == 12


def test_process_executor_matches_serial(universe, tmp_path):
    runs = {}
    for ex in ("serial", "process"):
        res = run_rollout(_cfg(universe, tmp_path / ex, agent="random", trials=2, executor=ex, seed=5),
                          keep_records=True)
        runs[ex] = res
    assert _comparable(runs["serial"]["records"]) == _comparable(runs["process"]["records"])
    assert runs["serial"]["simulations"] == [
        {**s, "duration": runs["serial"]["simulations"][i]["duration"]}
        for i, s in enumerate(runs["process"]["simulations"])]
    other = run_rollout(_cfg(universe, tmp_path / "seed6", agent="random", trials=2, seed=6), keep_records=True)
    assert _comparable(other["records"]) != _comparable(runs["serial"]["records"])  # the seed matters


def test_results_json_shape(universe, tmp_path):
    cfg = _cfg(universe, tmp_path, agent="oracle", trials=2, mode="solo")
    res = run_rollout(cfg)
    on_disk = json.loads(cfg.out.read_text())
    assert on_disk["avg_at_k"] == res["avg_at_k"] == {"1": 1.0, "2": 1.0}
    for key in ("avg_at_k", "pass_at_k", "pass_hat_k", "per_domain", "settings", "info", "tasks", "simulations"):
        assert key in on_disk
    assert on_disk["settings"]["agent"] == "oracle" and on_disk["settings"]["trials"] == 2
    assert on_disk["settings"]["mode"] == "solo" and on_disk["settings"]["user"] is None
    assert on_disk["info"]["num_trials"] == 2 and on_disk["info"]["agent_info"]["implementation"] == "oracle"
    sim = on_disk["simulations"][0]
    assert set(sim) >= {"id", "task_id", "trial", "termination_reason", "reward_info", "duration"}
    assert sim["termination_reason"] == "agent_stop" and sim["reward_info"]["reward"] == 1.0
    lines = Path(on_disk["trajectories"]).read_text().splitlines()
    assert len(lines) == 12
    rec = json.loads(lines[0])
    assert set(rec) >= {"messages", "tools", "termination", "reward", "timings", "run"}
    assert rec["tools"] and rec["tools"][0]["type"] == "function"


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_ctrl_c_keeps_finished_episodes_and_resume_skips_them(universe, tmp_path, executor):
    cfg = _cfg(universe, tmp_path, agent="random", trials=3, executor=executor, workers=2)
    seen = []

    def stop_after_four(summary):
        seen.append(summary["id"])
        if len(seen) == 4:
            raise KeyboardInterrupt

    with pytest.raises(RolloutInterrupted) as exc:
        run_rollout(cfg, on_episode=stop_after_four)
    assert exc.value.results["status"] == "interrupted" and exc.value.results["num_episodes"] == 4
    traj = cfg.trajectories_path()
    assert len(traj.read_text().splitlines()) == 4
    assert json.loads(cfg.out.read_text())["status"] == "interrupted"
    with traj.open("a") as f:
        f.write('{"id": "torn')  # a crash mid-write leaves a torn last line
    with pytest.raises(RolloutError, match="--resume"):
        run_rollout(cfg)  # neither --resume nor --force
    done_later = []
    resumed = run_rollout(RolloutConfig(**{**cfg.__dict__, "resume": True}), keep_records=True,
                          on_episode=lambda s: done_later.append(s["id"]))
    assert resumed["status"] == "complete" and resumed["num_episodes"] == 18
    assert not set(done_later) & set(seen) and len(done_later) == 14
    assert len(traj.read_text().splitlines()) == 18
    fresh = run_rollout(_cfg(universe, tmp_path / "fresh", agent="random", trials=3), keep_records=True)
    assert _comparable(fresh["records"]) == _comparable(resumed["records"])
    assert fresh["pass_at_k"] == resumed["pass_at_k"]
    with pytest.raises(RolloutError, match="different settings"):
        run_rollout(RolloutConfig(**{**cfg.__dict__, "resume": True, "agent": "noop"}))


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_rollout_writes_results_and_table(universe, tmp_path):
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["rollout", str(universe), "--agent", "oracle", "--trials", "2", "--out", str(out),
                              "--executor", "process", "--workers", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "pet_care" in res.output and "Pass^2" in res.output and "total" in res.output
    data = json.loads(out.read_text())
    assert data["avg_at_k"] == {"1": 1.0, "2": 1.0} and data["settings"]["executor"] == "process"
    res = runner.invoke(app, ["rollout", str(universe), "--agent", "noop", "--out", str(tmp_path / "n.json"),
                              "--json", "--domain", "pet_care", "--num-tasks", "2"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["avg_at_k"] == {"1": 0.0} and summary["num_episodes"] == 2
    assert [d["domain"] for d in summary["per_domain"]] == ["pet_care"]
    res = runner.invoke(app, ["rollout", str(universe), "--agent", "noop", "--out", str(tmp_path / "n.json"),
                              "--json", "--domain", "pet_care", "--num-tasks", "2", "--resume"])
    assert res.exit_code == 0 and json.loads(res.output)["timings"]["new_episodes"] == 0


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--agent", "gpt"], "unknown agent"),
        (["--user", "robot"], "unknown user"),
        (["--executor", "gpu"], "unknown --executor"),
        (["--mode", "duet"], "unknown --mode"),
        (["--trials", "0"], "--trials must be at least 1"),
        (["--domain", "airline"], "unknown domain"),
        (["--task", "pet_care/99999"], "no task"),
        (["--resume", "--force"], "not both"),
        (["--agent", "openai:gpt-x", "--api-key-env", "SCALEENV_TEST_NO_SUCH_KEY"], "SCALEENV_TEST_NO_SUCH_KEY"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(universe, tmp_path, args, needle):
    res = runner.invoke(app, ["rollout", str(universe), "--out", str(tmp_path / "r.json"), *args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], res.output
    assert "Traceback" not in res.output


def test_cli_missing_universe_and_existing_output(universe, tmp_path):
    res = runner.invoke(app, ["rollout", str(tmp_path / "nope"), "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "not a directory" in res.output
    res = runner.invoke(app, ["rollout", str(tmp_path), "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 2 and "universe.json" in res.output
    out = tmp_path / "r.json"
    assert runner.invoke(app, ["rollout", str(universe), "--out", str(out), "-q", "--num-tasks", "1"]).exit_code == 0
    res = runner.invoke(app, ["rollout", str(universe), "--out", str(out), "-q", "--num-tasks", "1"])
    assert res.exit_code == 2 and "--resume" in res.output and "--force" in res.output
    res = runner.invoke(app, ["rollout", str(universe), "--out", str(out), "-q", "--num-tasks", "1", "--force"])
    assert res.exit_code == 0, res.output
