"""One error tree by boundary and one mapping to exit codes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.env.agents import AgentError
from scaleenv.env.core import EnvError
from scaleenv.errors import (
    InputError,
    ProviderError,
    Rejection,
    SandboxError,
    ScaleEnvError,
    SpecError,
    ToolCallError,
    ToolError,
    UniverseError,
    exit_code,
)
from scaleenv.llm.base import LLMError
from scaleenv.synth.tasks.generate import TaskRejected
from scaleenv.tools.chain import ChainError


@pytest.mark.parametrize(("error", "boundary", "code"), [
    (SpecError([("tables", "missing")]), InputError, 2),
    (UniverseError("x"), InputError, 2),
    (EnvError("x"), InputError, 2),
    (ToolError("not_found", "x"), ToolCallError, 1),
    (ChainError(2, "x"), ToolCallError, 1),
    (LLMError("x"), ProviderError, 3),
    (AgentError("x"), ProviderError, 3),
    (TaskRejected("duplicate"), Rejection, 1),
    (SandboxError("x"), SandboxError, 1),
    (ScaleEnvError("x"), ScaleEnvError, 2),
    (ValueError("x"), Exception, 1),
])
def test_each_error_has_a_boundary_and_an_exit_code(error, boundary, code):
    assert isinstance(error, boundary)
    assert exit_code(error) == code


def test_rejections_keep_their_reason():
    e = TaskRejected("gate_noop_not_0", "noop scored 1")
    assert e.reason == "gate_noop_not_0" and "noop scored 1" in str(e)


def test_cli_maps_a_bad_universe_to_exit_2_in_one_line(tmp_path):
    res = CliRunner().invoke(app, ["inspect", str(tmp_path / "missing")])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and res.output.startswith("error:")
