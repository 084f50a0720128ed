"""The framework-free parts of the integrations: the tool-only session, tau2 tasks and results,
the TRL class codegen, verl's compute_score, and documented-interface fallbacks. No extras needed."""

from __future__ import annotations

import inspect
import json
import typing

import pytest
from typer.testing import CliRunner

from integrations_support import answer, careful, gold, hermes, reports_after, small_universe, tasks
from scaleenv.cli import app
from scaleenv.integrations.session import (
    USER_TOOL,
    IntegrationError,
    Session,
    session_from_row,
    task_source,
)

runner = CliRunner()


def test_session_gold_and_user_channel():
    u = small_universe()
    src = task_source(u)
    for task in tasks(u):
        s = Session(src, task)
        assert s.evaluate().score == 0.0
        assert s.opening == s.transcript[0]["content"]
        for name, args in careful(u, task):
            res = s.call(name, args)
            assert res.ok, res.output
        # a user who says its requests one at a time hears the report once per request
        for _ in range(reports_after(u, task)):
            reply = s.call(USER_TOOL, {"message": answer(task)})
        assert reply.ok and s.done and "ended the conversation" in reply.output
        assert s.evaluate().score == 1.0
        s.reset()
        assert s.evaluate().score == 0.0 and not s.done
        s.close()


def test_session_errors_never_raise():
    u = small_universe()
    task = tasks(u)[0]
    s = session_from_row({"task_id": task.id, "universe": str(u)})
    for name, args in [("nope", {}), (task.tools[0], {"zzz": 1}), (task.tools[0], "not a dict"),
                       (USER_TOOL, {"message": 3}), (USER_TOOL, {"message": "hi", "x": 1}), (None, None)]:
        res = s.call(name, args)
        assert not res.ok and json.loads(res.output)["error"]
    assert s.episode.stats.errors == 6
    with pytest.raises(IntegrationError, match="neither task_json nor task_id"):
        session_from_row({"universe": str(u)})
    with pytest.raises(IntegrationError, match="not a scaleenv task"):
        session_from_row({"task_json": "{}", "universe": str(u)})


def test_solo_mode_states_everything_up_front():
    u = small_universe()
    task = tasks(u)[0]
    s = session_from_row({"task_id": task.id, "universe": str(u)}, mode="solo")
    assert s.user is None and "[ask me]" not in s.opening
    for name, args in gold(u, task):
        s.call(name, args)
    assert "no one to answer" in s.call(USER_TOOL, {"message": answer(task)}).output
    assert s.evaluate().score == 1.0


def test_tau2_tasks_replay_to_gold(tmp_path):
    from scaleenv.integrations.tau2 import load_tau2_tasks, replay_tau2_task

    u = small_universe()
    for out in (tmp_path / "tasks.json", tmp_path / "tau2"):
        res = runner.invoke(app, ["export", str(u), "--format", "tau2", "--out", str(out)])
        assert res.exit_code == 0, res.output
        loaded = load_tau2_tasks(out)
        assert [t["id"] for t in loaded] == [t.id for t in tasks(u)]
        by_id = {t.id: t for t in tasks(u)}
        for t2 in loaded:
            task = by_id[t2["id"]]
            assert set(t2) >= {"id", "description", "user_scenario", "ticket", "initial_state", "evaluation_criteria"}
            crit = t2["evaluation_criteria"]
            assert crit["reward_basis"][0] == "DB"
            assert [a["name"] for a in crit["actions"]] == [c.tool for c in task.gold_chain]
            assert all("$ref" not in json.dumps(a["arguments"]) for a in crit["actions"])
            assert ("COMMUNICATE" in crit["reward_basis"]) == bool(task.answer_facts)
            instr = t2["user_scenario"]["instructions"]
            assert instr["domain"] == task.domain and instr["reason_for_call"]
            assert replay_tau2_task(t2, u).score == 1.0
            empty = {**t2, "evaluation_criteria": {**crit, "actions": [], "communicate_info": []}}
            assert replay_tau2_task(empty, u).score == 0.0
    d = tmp_path / "tau2" / tasks(u)[0].domain
    assert {p.name for p in d.iterdir()} == {"tasks.json", "split_tasks.json", "db.json", "policy.md", "tools.json"}
    db = json.loads((d / "db.json").read_text())
    assert all(isinstance(rows, dict) for rows in db.values())


def test_tau2_results_shape(tmp_path):
    from scaleenv.integrations.tau2 import tau2_results, write_tau2_results
    from scaleenv.run.rollout import RolloutConfig, run_rollout

    u = small_universe()
    res = run_rollout(RolloutConfig(universe=u, agent="oracle", user="scripted", out=tmp_path / "results.json"),
                      keep_records=True)
    out = tmp_path / "tau2_results.json"
    results = write_tau2_results(res["trajectories"], out, u, settings=res["settings"])
    assert json.loads(out.read_text())["info"]["num_trials"] == 1
    assert set(results) == {"timestamp", "info", "tasks", "simulations"}
    assert set(results["info"]) >= {"git_commit", "num_trials", "max_steps", "max_errors", "user_info", "agent_info",
                                    "environment_info", "seed"}
    assert len(results["simulations"]) == len(tasks(u)) == len(results["tasks"])
    for sim in results["simulations"]:
        assert set(sim) >= {"id", "task_id", "start_time", "end_time", "duration", "termination_reason",
                            "reward_info", "messages", "trial", "seed"}
        ri = sim["reward_info"]
        assert ri["reward"] == 1.0 and ri["db_check"] == {"db_match": True, "db_reward": 1.0}
        assert all(c["action_match"] for c in ri["action_checks"])
        assert all(c["met"] for c in ri["communicate_checks"])
        assert sim["termination_reason"] in ("user_stop", "agent_stop")
        roles = {m["role"] for m in sim["messages"]}
        assert roles <= {"assistant", "user", "tool"} and "tool" in roles
        calls = [c for m in sim["messages"] if m["role"] == "assistant" for c in m["tool_calls"] or []]
        assert calls and all(isinstance(c["arguments"], dict) for c in calls)
    noop = run_rollout(RolloutConfig(universe=u, agent="noop", user="scripted"), keep_records=True)
    sims = tau2_results(noop["records"], u)["simulations"]
    assert all(s["reward_info"]["reward"] == 0.0 for s in sims)


def test_trl_classes_have_typed_documented_methods():
    from scaleenv.integrations.trl import ScaleEnvTRLSpec, tool_names, tool_set_name

    u = small_universe()
    spec = ScaleEnvTRLSpec(u, domains=["pet_care"])
    dspec = task_source(u).spec("pet_care")
    assert set(spec.classes) == {tool_set_name(t) for t in spec.tasks}
    for task in spec.tasks:  # each task's class offers exactly the task's tools (its exercisable set)
        cls = spec.classes[tool_set_name(task)]
        assert set(tool_names(cls)) == set(task.tools) | {USER_TOOL}
    cls = spec.classes[tool_set_name(spec.tasks[0])]
    for tool in (dspec.tool(n) for n in spec.tasks[0].tools):
        fn = cls.__dict__[tool.name]  # a class attribute, as TRL requires
        sig = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        assert list(sig.parameters)[0] == "self" and hints["return"] is str
        assert "Args:" in fn.__doc__ or not tool.parameters
        for p in tool.parameters:
            assert f"{p.name}:" in fn.__doc__
            hint = hints[p.name]
            if p.enum:
                assert typing.get_origin(hint) is typing.Literal and list(typing.get_args(hint)) == p.enum
            if not p.required:
                assert sig.parameters[p.name].default is None


def test_trl_arguments_are_checked_by_scaleenv_with_the_rollout_error_text():
    """An argument the model invents reaches scaleenv (no Python TypeError) and gets the same error
    text as the same call in a rollout's ToolEnv."""
    from scaleenv.env.core import make
    from scaleenv.integrations.trl import ScaleEnvTRLSpec, tool_set_name

    u = small_universe()
    spec = ScaleEnvTRLSpec(u)
    task = spec.tasks[0]
    env = spec.classes[tool_set_name(task)]()
    env.reset(**spec.rows()[0])
    name = task.gold_chain[0].tool
    bad = {"couple_idOnly": 3}
    got = getattr(env, name)(**bad)
    with make(u, task.id) as direct:
        direct.reset()
        want = direct.call(name, bad).output
    assert json.loads(got)["error"] and got == want
    assert env.session.tool_errors == 1
    assert json.loads(env.send_message_to_user(text="hi"))["error"] == "invalid_arguments"


def test_trl_several_domains_in_one_dataset():
    from scaleenv.integrations.trl import ScaleEnvTRLSpec, tool_set_name

    u = small_universe()
    spec = ScaleEnvTRLSpec(u, tools=[t for t in tasks(u)[0].tools])  # narrowing to one domain's tools is fine
    assert len({t.domain for t in spec.tasks}) > 1
    factory = spec.environment_factory
    assert isinstance(factory, dict)
    for row, task in zip(spec.rows(), spec.tasks, strict=True):
        assert row["environment"] == tool_set_name(task) and row["environment"] in factory
        env = factory[row["environment"]]()
        env.reset(**row)
        assert env.session.task.id == task.id
    other = next(r for r in spec.rows() if r["environment"] != spec.rows()[0]["environment"])
    with pytest.raises(IntegrationError, match="route rows"):
        factory[spec.rows()[0]["environment"]]().reset(**other)


def test_verl_compute_score_documented_interface():
    """verl's reward-function contract (compute_score(data_source, solution_str, ground_truth,
    extra_info) -> dict with "score"), without verl installed."""
    from scaleenv.integrations.hermes import compute_score, parse_hermes_calls

    u = small_universe()
    for task in tasks(u):
        info = {"task_json": task.to_jsonl(), "universe": str(u)}
        good = compute_score(f"scaleenv/{task.domain}", hermes(gold(u, task), answer(task)), task.id, info)
        assert good["score"] == 1.0 and good["state_match"] == 1.0
        assert compute_score("x", hermes(gold(u, task)[:1]), task.id, info)["score"] == 0.0
        by_id = compute_score("x", hermes(gold(u, task), answer(task)), task.id, {"universe": str(u)})
        assert by_id["score"] == 1.0
    assert compute_score("x", "", "t", {"reward_components": {"score": 0.5, "state_match": 1.0}})["score"] == 0.5
    text, calls = parse_hermes_calls('hi <tool_call>{"name": "a", "arguments": {"b": 1}}</tool_call> <tool_call>x'
                                     '</tool_call>')
    assert calls[0] == ("a", {"b": 1}) and text.startswith("hi")
    assert calls[1][0] == "" and "not JSON" in str(calls[1][1])


def test_malformed_hermes_call_gets_the_rollout_error_text():
    """A hermes block whose arguments are not JSON: the same invalid_arguments tool error, counted
    in tool_errors, as the same call through ToolEnv.step in a rollout."""
    from scaleenv.env.core import make
    from scaleenv.integrations.hermes import parse_hermes_calls, run_call

    u = small_universe()
    task = tasks(u)[0]
    name = task.gold_chain[0].tool
    _, calls = parse_hermes_calls(f'<tool_call>{{"name": "{name}", "arguments": "{{oops"}}</tool_call>')
    session = session_from_row({"task_id": task.id, "universe": str(u)})
    got = run_call(session, *calls[0])
    with make(u, task.id, mode="solo") as env:
        env.reset()
        obs, *_ = env.step({"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": name, "arguments": "{oops"}}]})
    assert not got.ok and got.output == obs[0]["content"]
    assert json.loads(got.output)["error"] == "invalid_arguments"
    assert session.tool_errors == 1 and env.tool_errors == 1
    session.close()


def test_importing_scaleenv_and_integrations_loads_no_framework_or_adapter():
    import subprocess
    import sys

    code = ("import sys, scaleenv, scaleenv.integrations, scaleenv.integrations.export, scaleenv.cli; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('trl', 'verl', 'skyrl_gym', 'openenv', 'verifiers', "
            "'torch', 'transformers', 'mcp') or m in ('scaleenv.integrations.verl', 'scaleenv.integrations.skyrl', "
            "'scaleenv.integrations.openenv', 'scaleenv.integrations.verifiers', 'scaleenv.integrations.trl')]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_export_formats_are_a_table():
    from scaleenv.integrations.export import FORMATS, PARQUET_FORMATS

    assert set(FORMATS) == {"verl", "trl", "skyrl", "verifiers", "jsonl", "tau2"}
    assert PARQUET_FORMATS == ("verl", "trl", "skyrl", "verifiers")
    assert all((f.row is None) == (f.file == "tau2") for f in FORMATS.values())


def test_verl_config_yaml(tmp_path):
    from scaleenv.integrations.export import verl_configs

    paths = verl_configs(tmp_path)
    text = paths["agent_loop"].read_text()
    assert "name: scaleenv_agent" in text and "_target_: scaleenv.integrations.verl.ScaleEnvAgentLoop" in text


def test_adapters_import_lazily():
    """The framework-free modules import without extras; an adapter module imports its framework at
    its top, and without it says, in one line, what to install."""
    import importlib
    import importlib.util

    for mod in ("session", "export", "hermes", "tau2", "trl", "mcp_server"):
        importlib.import_module(f"scaleenv.integrations.{mod}")
    for mod, attr, pkg in (("skyrl", "ScaleEnvSkyRL", "skyrl_gym"), ("openenv", "ScaleEnvOpenEnv", "openenv"),
                           ("verifiers", "ScaleEnvTaskset", "verifiers"),
                           ("verl", "ScaleEnvAgentLoop", "verl")):
        if importlib.util.find_spec(pkg) is None:
            with pytest.raises(IntegrationError, match="pip install"):
                importlib.import_module(f"scaleenv.integrations.{mod}")
        else:
            assert isinstance(getattr(importlib.import_module(f"scaleenv.integrations.{mod}"), attr), type)
