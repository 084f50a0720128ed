"""``scaleenv play``: a task lived through ToolEnv from stdin lines, with the reward and diff at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.env.core import make
from scaleenv.env.language import spoken
from scaleenv.env.voice import phrasings
from scaleenv.formats.task import REFUSAL_FACT
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.tools.chain import resolve_args
from scaleenv.universe import Universe

runner = CliRunner()


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("play") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=3)
    prepare_out(cfg)
    run_build(cfg)
    return out


def _gold_lines(universe: Path, task_id: str) -> list[str]:
    """The gold chain as ``call`` lines with concrete arguments (resolved on a scratch episode), each write
    after a confirmation question (the domain policy asks for an explicit yes)."""
    lines = []
    with make(universe, task_id, user=None, mode="solo") as env:
        env.reset()
        outputs: list[object] = []
        for i, call in enumerate(env.task.gold_chain):
            args = resolve_args(call, outputs, i)
            res = env.call(call.tool, args)
            outputs.append(res.value)
            if env.tool_kind(call.tool) == "write":
                lines.append(f"say Shall I go ahead with {call.tool} {json.dumps(args)}?")
            lines.append(f"call {call.tool} {json.dumps(args)}")
    return lines


def test_play_the_gold_chain_from_stdin_scores_one(universe):
    task = Universe(universe).tasks()[0]
    facts = " ".join(f"I cannot do that, it is against our policy: {f.value}." if f.name == REFUSAL_FACT
                     else f"The {f.name.replace('_', ' ')} is {spoken(f.value)}." for f in task.answer_facts)
    script = ["tools", f"tool {task.gold_chain[0].tool}", *_gold_lines(universe, task.id),
              f"say Your request has been completed. {facts}", "done"]
    res = runner.invoke(app, ["play", str(universe), "--task", task.id], input="\n".join(script) + "\n")
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith(f"Task {task.id}") and "user: Hi" in out
    assert "> call " + task.gold_chain[0].tool in out and '"id":' in out  # tool outputs printed as JSON
    assert "reward 1.0" in out and "gold chain:" in out
    assert any(p in out for p in phrasings()["finished"]) and "(the user ended the conversation)" in out


def test_play_without_acting_shows_the_diff_and_exits_one(universe):
    task = Universe(universe).tasks()[0]
    res = runner.invoke(app, ["play", str(universe), "--task", task.id, "--no-show-gold"],
                        input="say What is your email?\ncall no_such_tool {}\ncall get_owner {not json\nfrobnicate\n"
                              "done\n")
    assert res.exit_code == 1, res.output
    out = res.output
    assert "user: My email is" in out
    assert "unknown_tool" in out and "arguments are not JSON" in out and "unknown command 'frobnicate'" in out
    assert "reward 0.0" in out and "  - " in out and "gold chain:" not in out


def test_play_bad_input_is_one_line_exit_two(universe, tmp_path):
    res = runner.invoke(app, ["play", str(tmp_path / "missing"), "--task", "pet_care/00000"], input="done\n")
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "is not a directory" in res.output
    res = runner.invoke(app, ["play", str(universe), "--task", "pet_care/99999"], input="done\n")
    assert res.exit_code == 2 and res.output.startswith("error:") and res.output.count("\n") == 1
    res = runner.invoke(app, ["play", str(universe), "--task", "pet_care/00000", "--user", "nobody"], input="")
    assert res.exit_code == 2 and res.output.startswith("error:")


def test_play_help_lists_the_commands():
    res = runner.invoke(app, ["play", "--help"], terminal_width=200)
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    for cmd in ("tools", "tool NAME", "call NAME {JSON}", "say TEXT", "request", "done", "--task", "--user"):
        assert cmd in text


def test_input_that_ends_before_done_is_not_scored(universe):
    """Replaying a growing script must not reveal the reward or the expected outcome before ``done``."""
    task = Universe(universe).tasks()[0]
    res = runner.invoke(app, ["play", str(universe), "--task", task.id], input="tools\nsay What is your email?\n")
    assert res.exit_code == 4, res.output
    out = res.output
    assert "not scored" in out and "reward" not in out and "gold chain:" not in out and "  - " not in out
    for f in task.answer_facts:
        assert f"answer fact: {f.name}" not in out


def test_a_saved_episode_ended_by_done_is_the_agents_stop_and_a_message_may_hold_line_breaks(universe, tmp_path):
    """Players' reports (seed 27182): a saved episode ended by ``done`` said termination "error", and a
    multi-line ``say`` was cut at its first line break; ``\\n`` in a ``say`` is now a line break."""
    task = Universe(universe).tasks()[0]
    saved = tmp_path / "episode.json"
    res = runner.invoke(app, ["play", str(universe), "--task", task.id, "--no-show-gold", "--save", str(saved)],
                        input="say Hello.\\nCould you give me your e-mail?\ndone\n")
    assert res.exit_code == 1, res.output
    trajectory = json.loads(saved.read_text())
    assert trajectory["termination"] == "agent_stop"
    said = [m["content"] for m in trajectory["messages"] if m["role"] == "assistant" and m.get("content")]
    assert "Hello.\nCould you give me your e-mail?" in said
