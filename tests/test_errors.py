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


@pytest.mark.parametrize("error", [
    SpecError([("tables", "missing"), ("tools.x", "bad")]),
    ToolError("not_found", "no such row"),
    ChainError(2, "x"),
    TaskRejected("selection_not_unique", "two rows match"),
    Rejection("breaks_policy", "renewal window"),
    UniverseError("gone"),
])
def test_errors_survive_pickling_with_their_fields(error):
    import pickle

    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert vars(copy) == vars(error)


class _FailingWorker:
    def run_batch(self, batch):
        raise SpecError([("entities.reviews", "no seed row satisfies reviews.order_completed")])

    def close(self):
        pass


def test_an_error_raised_in_a_worker_process_reaches_the_parent_intact(monkeypatch):
    from scaleenv.parallel.process import START_METHOD_ENV, ProcessExecutor

    monkeypatch.setenv(START_METHOD_ENV, "fork")
    executor = ProcessExecutor(_FailingWorker, workers=1)
    try:
        with pytest.raises(SpecError) as caught:
            executor.run([["domain"]], sink=lambda item: None)
    finally:
        executor.close()
    assert caught.value.problems == [("entities.reviews", "no seed row satisfies reviews.order_completed")]
