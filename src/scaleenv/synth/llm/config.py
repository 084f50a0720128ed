"""Settings of the LLM synthesis pipeline (sizes, repair rounds, sandbox limits, the Phase 2 gate)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from scaleenv.tools.sandbox import SandboxLimits


@dataclass
class SynthConfig:
    # Phase 1
    min_tools: int = 25
    max_tools: int = 70
    target_tools: int = 50
    min_tables: int = 5
    max_tables: int = 20
    schema_rounds: int = 3  # database agent: validator feedback rounds
    # the code agent writes a tool's implementation and its tests in one request (the tool and its
    # tables said once); False asks the code and the test agents one after the other
    code_with_tests: bool = True
    debug_rounds: int = 3  # debug agent: repair rounds per tool before it is dropped
    sandbox: SandboxLimits = field(default_factory=SandboxLimits)
    dependency_batch: int = 60  # tool pairs judged per dependency-agent call
    max_dependency_pairs: int = 600
    # Phase 2
    chain_length: tuple[int, int] = (3, 8)
    # chains proposed per chain request: the attempts of an aligned window of this many share one
    # request (tools, tables, policy and rows said once); 1 asks for each attempt's chain alone
    chain_batch: int = 4
    state_rounds: int = 2  # state agent: repair rounds when the chain does not execute
    patch_budget: int = 3  # patch-agent calls per task during expansion
    min_task_tools: int = 20  # |H| >= 20
    expand_depth: int = 1  # graph layers of the breadth-first expansion K(C) around each chain
    tau: float = 0.5  # gate threshold
    best_of_k: int = 4  # solver candidates per gate decision
    solver_tools: int = 6  # unused tools shown to the solver (a sample drawn per task)
    max_chains: int = 3  # chains C_1..C_n per task at most
    # the gate model is asked only where the rubric's numbers leave the case open (they decide every
    # case of the rubric as written); True asks it at every decision, as the paper's gate does
    gate_llm: bool = False

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["chain_length"] = list(self.chain_length)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, strict: bool = False) -> SynthConfig:
        """Settings from a dict; with ``strict`` an unknown name raises ValueError."""
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if strict and unknown:
            raise ValueError(f"unknown synth setting(s) {unknown}; known: {sorted(cls.__dataclass_fields__)}")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if isinstance(known.get("sandbox"), dict):
            known["sandbox"] = SandboxLimits(**known["sandbox"])
        if "chain_length" in known:
            known["chain_length"] = tuple(known["chain_length"])
        return cls(**known)
