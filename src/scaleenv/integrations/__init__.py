"""Bridges to the stacks people train and evaluate with.

Every module here imports its framework lazily (inside functions or at first use), so importing
``scaleenv.integrations`` never needs an optional extra:

    session      the framework-free core: a task's episode seen through tools only (the user as a
                 ``send_message_to_user`` tool), built from a dataset row or a task id
    mcp_server   ``scaleenv serve``: the official ``mcp`` SDK, stdio or streamable HTTP   [mcp]
    export       ``scaleenv export``: verl / TRL / SkyRL / verifiers parquet, JSONL, tau2  [export]
    verl         an agent loop registered as ``scaleenv_agent`` and ``compute_score``      [verl]
    trl          ``environment_factory`` classes with one typed method per tool             [trl]
    skyrl        a SkyRL-gym ``BaseTextEnv``                                                 [skyrl]
    openenv      an OpenEnv ``Environment``                                                  [openenv]
    verifiers    a verifiers v1 taskset (and a legacy ``load_environment``)                  [verifiers]
    tau2         tau2-bench task JSON, replay, and results in tau2's shape
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
