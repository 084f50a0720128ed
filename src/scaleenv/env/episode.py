"""An episode owns one private world. Agent mistakes come back as tool errors and never raise."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import AnswerFact
from scaleenv.reward.match import DEFAULT_THRESHOLD, Matcher, fuzzy_similarity
from scaleenv.reward.state import Reward, compute_reward, with_rules_kept
from scaleenv.tools.output import error_output
from scaleenv.tools.policy import broken_rules
from scaleenv.tools.runtime import ToolResult, execute_tool
from scaleenv.world.world import HeldSnapshot, World, snapshot_keys


@dataclass
class ErrorStats:
    calls: int = 0
    errors: int = 0
    by_code: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "errors": self.errors, "by_code": dict(sorted(self.by_code.items()))}


def watched_in(value: Any, watched: frozenset[str]) -> set[str]:
    """The strings of ``watched`` that ``value`` (a call's arguments, its output: JSON) holds."""
    found: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if v in watched:
                found.add(v)
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
    return found


class Episode:
    """A private world for one agent.

    ``initial`` is the snapshot every ``reset()`` returns to. ``expected`` is the verified final
    world (may be shared read-only between episodes of the same task). ``gold_keys`` are the rows
    the gold chain touched; together with the rows the agent touched and the rows in the expected
    world's change log (the gold chain's writes, when it was executed on the initial snapshot) they
    bound what ``evaluate()`` has to compare. ``held`` (the task's :class:`HeldSnapshot` of ``initial``)
    keeps the initial state's row digests registered for as long as the episode lives.
    """

    def __init__(
        self,
        spec: DomainSpec,
        initial: bytes,
        expected: World | None = None,
        *,
        answer_facts: Iterable[AnswerFact] = (),
        gold_keys: Mapping[str, Iterable[Any]] | None = None,
        tools: Iterable[str] | None = None,
        matcher: Matcher = fuzzy_similarity,
        threshold: float = DEFAULT_THRESHOLD,
        held: HeldSnapshot | None = None,
    ):
        self.spec = spec
        self._initial = initial
        self._held = held  # keeps the initial snapshot's digests registered while the episode lives
        self.expected = expected
        self.answer_facts = list(answer_facts)
        self._watched = frozenset(i for f in self.answer_facts for i in f.seen)
        """The record ids some answer fact needs the agent to have been shown."""
        self.shown: set[str] = set()
        """The watched ids that a successful call showed the agent (in its arguments or output)."""
        self.gold_keys = {t: set(ks) for t, ks in (gold_keys or {}).items()}
        allowed = set(tools) if tools is not None else None
        self._tools = {t.name: t for t in spec.tools if allowed is None or t.name in allowed}
        self._schemas: list[dict[str, Any]] | None = None  # built on first request: an oracle never asks
        self.matcher = matcher
        self.threshold = threshold
        self._ruled = frozenset(t for t in self._tools if spec.policy is not None and spec.policy.checks(t))
        """The write tools a rule of the policy covers (checked at the moment of each call)."""
        self.world = World.from_snapshot(spec, initial)
        self.stats = ErrorStats()
        self.said: list[str] = []
        self.broken: list[str] = []
        """``tool: rule`` for each successful write that broke a rule of the policy when it was made (the
        tool let it through). Checked at the moment of the call, so two changes made in the wrong order
        (the exception that allowed the first ended by the second, made first) count though the final
        state is the same."""
        self._initial_world: World | None = None

    def reset(self) -> None:
        """Return to the initial state (deserialize; no re-parsing) and clear statistics."""
        self.world.restore(self._initial)
        self.stats = ErrorStats()
        self.said = []
        self.shown = set()
        self.broken = []

    @property
    def tool_names(self) -> list[str]:
        return list(self._tools)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function schemas."""
        if self._schemas is None:
            self._schemas = [t.openai_schema() for t in self._tools.values()]
        return self._schemas

    def call_tool(self, name: Any, args: Any = None) -> ToolResult:
        """Run a tool call from the agent. Never raises: failures are error results, counted in ``stats``."""
        self.stats.calls += 1
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            shown = str(name)[:64]
            result = ToolResult(False, error_output("unknown_tool", f"no tool named {shown!r}"), error="unknown_tool",
                                message=f"no tool named {shown!r}")
        else:
            try:
                rules = broken_rules(self.world, self.spec, tool, args) if tool.name in self._ruled else []
                result = execute_tool(self.world, tool, args)
            except Exception as e:  # noqa: BLE001 - an agent's call must never raise out of the episode
                msg = f"{tool.name} failed: {type(e).__name__}"
                result = ToolResult(False, error_output("internal_error", msg), error="internal_error", message=msg)
                rules = []
            if result.ok:
                self.broken += [f"{tool.name}: {r.name}" for r in rules]
        if not result.ok:
            self.stats.errors += 1
            self.stats.by_code[result.error or "error"] += 1
        elif self._watched and len(self.shown) < len(self._watched):
            self.shown.update(watched_in((args, result.value), self._watched))
        return result

    def say(self, text: str) -> None:
        """Record a message from the agent to the user (answer facts are checked against these)."""
        if isinstance(text, str):
            self.said.append(text)

    def state_hash(self) -> str:
        return self.world.state_hash()

    def snapshot(self) -> bytes:
        return self.world.snapshot()

    def evaluate(self, said: str | None = None) -> Reward:
        """Score the current world against the expected one (and the answer facts)."""
        if self.expected is None:
            raise ValueError("this episode has no expected world to evaluate against")
        keys: dict[str, set[Any]] = {t: set(k) for t, k in self.gold_keys.items()}
        for touched in (self.expected.touched(), self.world.touched()):
            for t, ks in touched.items():
                keys.setdefault(t, set()).update(ks)
        text: str | list[str] = list(self.said) if said is None else said
        reward = compute_reward(
            self.world,
            self.expected,
            answer_facts=self.answer_facts,
            said=text,
            keys=keys,
            matcher=self.matcher,
            threshold=self.threshold,
            initial=snapshot_keys(self.spec, self._initial) or self.initial_world(),
            shown=self.shown,
            before=self.initial_world,
        )
        return with_rules_kept(reward, self.broken) if self._ruled else reward

    def initial_world(self) -> World:
        """The initial state, read-only (built once: it tells the reward which rows were created)."""
        if self._initial_world is None:
            self._initial_world = World.from_snapshot(self.spec, self._initial)
        return self._initial_world

    def park(self) -> None:
        """While the episode waits for reuse: its connections go to the next worlds of the schema;
        :meth:`reset` (which every reuse starts with) takes one again."""
        self.world.park()
        if self._initial_world is not None:
            self._initial_world.close()
            self._initial_world = None

    def close(self) -> None:
        self.world.close()
        if self._initial_world is not None:
            self._initial_world.close()
