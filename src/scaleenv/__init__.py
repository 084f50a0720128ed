"""scaleenv: manufacture executable, verifiable tool-use worlds for training LLM agents with RL.

Imports are lazy so that ``import scaleenv`` stays fast; the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ScaleEnvError": "scaleenv.errors",
    "SpecError": "scaleenv.errors",
    "ToolError": "scaleenv.errors",
    "DomainSpec": "scaleenv.formats.domain",
    "ToolSpec": "scaleenv.formats.domain",
    "Table": "scaleenv.formats.domain",
    "Column": "scaleenv.formats.domain",
    "validate_spec": "scaleenv.validation.spec",
    "World": "scaleenv.world.world",
    "Episode": "scaleenv.env.episode",
    "Reward": "scaleenv.reward.state",
    "compute_reward": "scaleenv.reward.state",
    "AnswerFact": "scaleenv.formats.task",
    "execute_tool": "scaleenv.tools.runtime",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'scaleenv' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value
