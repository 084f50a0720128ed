"""Bridges to the stacks people train and evaluate with.

Each adapter is one module holding top-level classes over the environment core
(:class:`scaleenv.env.core.ToolEnv`, through :class:`~scaleenv.integrations.session.Session`); a
module that needs a framework imports it at its top, and nothing imports the module until you ask
for that adapter, so ``import scaleenv.integrations`` needs no optional extra:

    session      the framework-free core: a task's episode seen through tools only (the user as a
                 ``send_message_to_user`` tool), built from a dataset row or a task id
    hermes       framework-free: hermes-format tool calls from raw text, verl's ``compute_score``
    export       ``scaleenv export``: verl / TRL / SkyRL / verifiers parquet, JSONL, tau2  [export]
    mcp_server   ``scaleenv serve``: the official ``mcp`` SDK, stdio or streamable HTTP   [mcp]
    trl          ``environment_factory`` classes, one per task tool set (plain Python)    [trl]
    verl         an agent loop registered as ``scaleenv_agent``                          [verl]
    skyrl        a SkyRL-gym ``BaseTextEnv``                                              [skyrl]
    openenv      an OpenEnv ``Environment``                                               [openenv]
    verifiers    a verifiers v1 taskset                                                   [verifiers]
    tau2         tau2-bench task JSON, replay, and results in tau2's shape

Adding an adapter is one module here (classes over ``Session``/``ToolEnv``, calls through
``call()``/``reject()`` so every adapter gives the same tools, validation and error text) plus its
test file ``tests/test_integrations_<name>.py``.
"""

from scaleenv.integrations.session import (
    EVALUATE_TOOL,
    USER_TOOL,
    Session,
    TaskSource,
    session_from_row,
    task_source,
)

__all__ = ["EVALUATE_TOOL", "USER_TOOL", "Session", "TaskSource", "session_from_row", "task_source"]
