"""Sub-goal rewards: a task's executable facts as named reward components, and the reward shapes.

Each task's sub-goals are read from what is already verified about it:

    write      one per row the gold chain changes (created, updated or removed): met when every
               checked cell of that row matches the expected world (created rows paired by content)
    answer     one per answer fact: met when the agent's last word on it states it (no rival)

and gates, which earn nothing and must hold for any credit: ``procedure`` components (the policy's
procedure, :mod:`scaleenv.reward.procedure`: identity verified before the first write, each write
confirmed; met vacuously when nothing was written, so they can never pay an empty episode) and
guards (``kind == "guard"``):

    forbidden_write:<table>[<key>]  a row the task does not expect to change was written (a
                                    look-alike, a stray update, an extra created row)
    rival_stated:<fact>             the agent's last word on an answer fact is a look-alike's value
    lookalike:<table>.<col>=<id>    a row the agent wrote refers to a look-alike (a distractor id
                                    the expected world does not use there)
    lookalike_call:<tool>(<id>)     a tool was called on a look-alike (even a read, even a call that
                                    failed): the user's facts and the finder's output tell the
                                    records apart, so naming the wrong one is acting on it
    unseen_id:<tool>(<id>)          a write call names a record id that neither the user nor any
                                    earlier tool output gave (a guessed or sampled id)
    answer_dump:<n> chars           a message too long to be an answer (every read output pasted,
                                    a grid of values), on tasks with answer facts
    pasted_output                   a message that pastes a tool's output verbatim, on tasks with
                                    answer facts
    policy_broken:<tool>: <rule>    a write broke a rule of the domain's policy when it was made
                                    (added by the environment, which sees the moment of each call)

An answer fact whose value the user already states (a known fact, a goal, the instruction) weighs
0: repeating it back is no work.

Shapes (``reward_shape``): ``binary`` (the task's own 0/1 score, the default), ``partial`` (the
weighted fraction of sub-goals met; 0 while any guard is broken) and ``dense`` (each step earns
the change of the potential ``partial - VIOLATION_PENALTY x broken guards`` since the step before,
less :data:`TOOL_ERROR_PENALTY` per failed tool call; the steps sum to the final partial reward
less those penalties, so an episode that ends without errors or broken guards sums to exactly its
partial reward, while a guard broken on the way, e.g. a balance debited then refunded, costs
only until it holds again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import AnswerFact, Task
from scaleenv.reward.facts import fact_stated_in, last_word, value_stated
from scaleenv.reward.state import Reward
from scaleenv.world.world import World

RewardShape = Literal["binary", "partial", "dense"]
REWARD_SHAPES: tuple[RewardShape, ...] = ("binary", "partial", "dense")
COUNTED_KINDS = ("write", "answer")
"""Component kinds that count toward the partial reward: observable effects and stated answers only."""
GATE_KINDS = ("guard", "procedure")
"""Component kinds that earn nothing and gate the partial reward: any one unmet makes it 0."""
TOOL_ERROR_PENALTY = 0.05
"""What the dense shape takes off for each failed tool call."""
VIOLATION_PENALTY = 0.1
"""What the dense shape takes off for each guard broken (given back when it holds again)."""


def parse_shape(shape: str) -> RewardShape:
    """A reward shape by name; ``ValueError`` (one line) on an unknown one."""
    for s in REWARD_SHAPES:
        if shape == s:
            return s
    raise ValueError(f"unknown reward shape {shape!r}; use {', '.join(REWARD_SHAPES)}")


@dataclass(frozen=True)
class RewardComponent:
    """One named sub-goal (``write``, ``answer``) or gate (``procedure``, ``guard``) and whether it holds."""

    name: str
    kind: str
    met: bool
    weight: float = 1.0
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "met": self.met, "weight": self.weight}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class SubgoalReport:
    """Every component of a task's reward as the episode stands."""

    components: list[RewardComponent]

    @property
    def counted(self) -> list[RewardComponent]:
        return [c for c in self.components if c.kind in COUNTED_KINDS]

    @property
    def violations(self) -> list[str]:
        """The names of the broken gates (guards, and procedure checks not met)."""
        return [c.name for c in self.components if c.kind in GATE_KINDS and not c.met]

    @property
    def partial(self) -> float:
        """The weighted fraction of sub-goals met; 0.0 while any guard is broken. Without any weight
        (no sub-goal, or only given facts): 1.0 when every sub-goal is met, else 0.0."""
        if self.violations:
            return 0.0
        counted = self.counted
        total = sum(c.weight for c in counted)
        if total <= 0:
            return 1.0 if counted and all(c.met for c in counted) else 0.0
        return sum(c.weight for c in counted if c.met) / total

    def met(self) -> dict[str, bool]:
        return {c.name: c.met for c in self.components}

    def to_json(self) -> dict[str, Any]:
        return {"partial": self.partial, "met": sum(c.met for c in self.counted), "total": len(self.counted),
                "violations": self.violations, "components": [c.to_json() for c in self.components]}


# ------------------------------------------------------------------------------------ hooks
ComponentHook = Callable[[Task, Mapping[str, Any]], list[RewardComponent]]
"""``hook(task, trajectory) -> components``: ``trajectory`` holds ``messages`` (the agent's view, in
order, tool results included) and ``transcript`` (what the agent and the user said)."""

_HOOKS: dict[str, ComponentHook] = {}


def register_component_hook(name: str, hook: ComponentHook) -> None:
    """Add (or replace) a named source of extra components, e.g. procedure checks of a policy."""
    _HOOKS[name] = hook


def unregister_component_hook(name: str) -> None:
    _HOOKS.pop(name, None)


def extra_components(task: Task, trajectory: Mapping[str, Any]) -> list[RewardComponent]:
    """The components every registered hook adds for this task and trajectory (hooks in name order)."""
    out: list[RewardComponent] = []
    for name in sorted(_HOOKS):
        out.extend(_HOOKS[name](task, trajectory))
    return out


# ------------------------------------------------------------------------------------ components
@dataclass(frozen=True)
class WriteGoal:
    """One row the gold chain changes: ``kind`` ``added``, ``changed`` or ``removed``."""

    table: str
    key: Any
    kind: str
    columns: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.table}[{self.key!r}]"


def _checked(spec: DomainSpec, table: str, col: str) -> bool:
    t = spec.table(table)
    if t is None:
        return True
    if col == t.primary_key:
        return False
    c = t.column(col)
    return c is None or c.match != "exempt"


def write_goals(spec: DomainSpec, initial: World, expected: World,
                keys: Mapping[str, Iterable[Any]] | None = None) -> list[WriteGoal]:
    """The rows the expected world changes against the initial one in a checked column (``keys``:
    the rows in scope, e.g. the gold chain's), in table and key order."""
    out = []
    for ch in initial.diff(expected, keys):
        if ch.kind == "changed":
            cols = tuple(sorted(c for c in ch.columns if _checked(spec, ch.table, c)))
            if cols:
                out.append(WriteGoal(ch.table, ch.key, "changed", cols))
        else:
            out.append(WriteGoal(ch.table, ch.key, ch.kind))
    return out


def _rival_stated(fact: AnswerFact, messages: Sequence[str]) -> bool:
    """Whether the agent's last word on the fact's attribute asserts a look-alike's value."""
    for text in reversed(messages):
        has_value, has_rival = last_word(fact, text)
        if has_value or has_rival:
            return has_rival
    return False


def user_texts(task: Task) -> list[str]:
    """What the user may say: its known facts' values, its goals and the instruction."""
    p = task.user_profile
    return [*(str(v) for v in p.known.values()), *p.goals, task.instruction]


def given_fact(fact: AnswerFact, texts: Iterable[str]) -> bool:
    """Whether the user already states the fact's value (in one of ``texts``: :func:`user_texts`)."""
    return any(value_stated(fact.value, t, fuzzy=False) for t in texts)


DUMP_MIN_CHARS = 1500
"""A message longer than this (or than 4x a plain answer, if longer) is no answer but a dump."""


def dump_limit(answer_facts: Iterable[AnswerFact]) -> int:
    """The answer-dump limit: :data:`DUMP_MIN_CHARS`, or 4x a plain answer (one sentence per fact)."""
    plain = 40 + sum(len(f"The {f.name} is {f.value}.") + 1 for f in answer_facts)
    return max(DUMP_MIN_CHARS, 4 * plain)


def state_components(reward: Reward, goals: Sequence[WriteGoal], answer_facts: Iterable[AnswerFact],
                     said: Sequence[str], *, user_said: Sequence[str] | None = None,
                     max_chars: int | None = None) -> list[RewardComponent]:
    """The write and answer sub-goals and the guards, from a computed (binary) reward. ``user_said``:
    what the user may say (:func:`user_texts`; an answer in it weighs 0); ``max_chars``: the
    answer-dump limit."""
    facts = list(answer_facts)
    goal_keys = {(g.table, g.key) for g in goals}
    bad = {(t, k) for t, k, _ in reward.mismatched}
    out = [RewardComponent(g.name, "write", (g.table, g.key) not in bad,
                           detail=",".join(g.columns)) for g in goals]
    forbidden = sorted({(t, k) for t, k, why in reward.mismatched if why == "extra" or (t, k) not in goal_keys},
                       key=lambda tk: (tk[0], str(tk[1])))
    for fact in facts:
        given = user_said is not None and given_fact(fact, user_said)
        out.append(RewardComponent(f"answer:{fact.name}", "answer",
                                   fact_stated_in(fact, said) and fact.name not in reward.unseen,
                                   weight=0.0 if given else 1.0, detail="given by the user" if given else ""))
    out += [RewardComponent(f"forbidden_write:{t}[{k!r}]", "guard", False) for t, k in forbidden]
    out += [RewardComponent(f"rival_stated:{f.name}", "guard", False) for f in facts
            if f.rivals and _rival_stated(f, said)]
    if facts and max_chars is not None:
        longest = max((len(m) for m in said), default=0)
        if longest > max_chars:
            out.append(RewardComponent(f"answer_dump:{longest} chars", "guard", False, detail=f"limit {max_chars}"))
    return out


def lookalikes(task: Task) -> dict[str, list[Any]]:
    """The task's look-alikes the guards watch: its distractors, less any id its gold chain passes as
    written (a record can be a look-alike of the user's own and, at once, the reviewer the user names: acting
    on it is the request, not a slip)."""
    used = {str(v) for c in task.gold_chain for v in c.args.values() if isinstance(v, str | int)
            and not isinstance(v, bool)}
    return {t: kept for t, ids in task.verification.distractors.items() if (kept := [d for d in ids if str(d) not in used])}


def lookalike_components(final: World, expected: World, distractors: Mapping[str, Sequence[Any]]
                         ) -> list[RewardComponent]:
    """A guard for each reference to a look-alike in a row the agent wrote: a foreign-key cell
    holding a distractor id that the expected world does not hold in that column of the rows the
    gold chain wrote (e.g. a created appointment for the look-alike pet)."""
    if not distractors:
        return []
    fks = [(t.name, c.name, c.foreign_key.partition(".")[0]) for t in final.spec.tables for c in t.columns
           if c.foreign_key and c.foreign_key.partition(".")[0] in distractors]
    if not fks:
        return []
    touched, gold = final.touched(), expected.touched()
    out = []
    for table, col, ref in fks:
        ids = {str(d) for d in distractors[ref]}
        allowed = {str(r.get(col)) for k in gold.get(table, ()) if (r := expected.row(table, k)) is not None}
        for key in sorted(touched.get(table, ()), key=str):
            row = final.row(table, key)
            v = None if row is None else row.get(col)
            if v is not None and str(v) in ids and str(v) not in allowed:
                out.append(RewardComponent(f"lookalike:{table}.{col}={v}", "guard", False, detail=f"{table}[{key!r}]"))
    return out


# ------------------------------------------------------------------------------------ shaping
class DenseTracker:
    """The dense shape's bookkeeping over one episode: the last potential (the partial reward), the
    guards already penalized, the tool errors already counted, and what is owed to the next step."""

    def __init__(self, error_penalty: float = TOOL_ERROR_PENALTY, violation_penalty: float = VIOLATION_PENALTY):
        self.error_penalty = error_penalty
        self.violation_penalty = violation_penalty
        self.reset()

    def reset(self) -> None:
        self.potential = 0.0
        self.errors = 0
        self.owed = 0.0
        self.total = 0.0
        self.penalties = 0.0
        """Tool-error penalties so far plus the violation penalty of the guards broken now."""

    def update(self, report: SubgoalReport, tool_errors: int) -> None:
        """Account the episode as it stands now (call after every tool call and message)."""
        new_errors = max(0, tool_errors - self.errors)
        broken = len(report.violations) * self.violation_penalty
        potential = report.partial - broken
        delta = potential - self.potential - new_errors * self.error_penalty
        self.errors += new_errors
        self.potential = potential
        self.penalties = self.errors * self.error_penalty + broken
        self.owed += delta
        self.total += delta

    def take(self) -> float:
        """What the current step earns (everything accounted since the previous step)."""
        owed, self.owed = self.owed, 0.0
        return owed


@dataclass
class ShapedReward(Reward):
    """A :class:`Reward` whose ``score`` follows a shape (``success`` stays the task's binary success);
    its JSON adds the shape and the sub-goal report."""

    shape: str = "binary"
    subgoals: SubgoalReport | None = None

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["shape"] = self.shape
        if self.subgoals is not None:
            out["subgoals"] = self.subgoals.to_json()
        return out


def shaped(reward: Reward, shape: RewardShape, report: SubgoalReport, tracker: DenseTracker | None = None
           ) -> ShapedReward:
    """``reward`` rescored by ``shape``: ``partial`` the report's partial reward, ``dense`` the
    episode's dense return so far (the tracker's total), ``binary`` unchanged."""
    if shape == "partial":
        score = report.partial
    elif shape == "dense":
        score = tracker.total if tracker is not None else report.partial
    else:
        score = reward.score
    components = {**reward.components, "partial": report.partial,
                  "subgoals_met": float(sum(c.met for c in report.counted)),
                  "subgoals": float(len(report.counted)), "violations": float(len(report.violations))}
    if tracker is not None:
        components["penalties"] = tracker.penalties
    return ShapedReward(score, reward.success, components, list(reward.diff), list(reward.mismatched),
                        shape=shape, subgoals=report)


def lookalike_calls(messages: Sequence[Mapping[str, Any]], tools: Iterable[str],
                    distractors: Mapping[str, Sequence[Any]]) -> list[RewardComponent]:
    """A guard for each call of one of ``tools`` (in the agent's messages) with a look-alike's id as
    an argument: acting on the wrong record, whether or not the tool let it through."""
    ids = {str(d) for ds in distractors.values() for d in ds}
    names = set(tools)
    if not ids or not names:
        return []
    seen: dict[str, None] = {}
    for _, _, name, args in _calls(messages):
        if name in names and isinstance(args, Mapping):
            for v in args.values():
                if isinstance(v, str | int) and not isinstance(v, bool) and str(v) in ids:
                    seen.setdefault(f"lookalike_call:{name}({v})")
    return [RewardComponent(n, "guard", False) for n in seen]


def _calls(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, str, Any]]:
    """``(message index, call id, name, parsed args)`` of every tool call in the messages."""
    out = []
    for i, m in enumerate(messages):
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        for tc in calls if isinstance(calls, list) else ():
            fn = tc.get("function") if isinstance(tc, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                continue
            raw = fn.get("arguments")
            try:
                args = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                args = None
            out.append((i, str(tc.get("id") or ""), fn["name"], args))
    return out


def unseen_ids(messages: Sequence[Mapping[str, Any]], id_params: Mapping[str, Iterable[str]]
               ) -> list[RewardComponent]:
    """A guard for each write call whose id argument (``id_params``: write tool -> its parameters that
    carry a record id) appears in no earlier user or tool message: an id the agent cannot have known."""
    out: dict[str, None] = {}
    for i, _, name, args in _calls(messages):
        params = set(id_params.get(name, ()))
        if not params or not isinstance(args, Mapping):
            continue
        before = [str(m.get("content") or "") for m in messages[:i] if m.get("role") in ("user", "tool")]
        for p in sorted(params):
            v = args.get(p)
            if isinstance(v, str) and v and not any(v in text for text in before):
                out.setdefault(f"unseen_id:{name}({v})")
    return [RewardComponent(n, "guard", False) for n in out]


PASTE_MIN_CHARS = 40
"""A tool output at least this long, found verbatim in a message to the user, was pasted."""


def pasted_outputs(messages: Sequence[Mapping[str, Any]], tools: Iterable[str], said: Sequence[str]
                   ) -> list[RewardComponent]:
    """A guard when a message to the user holds a domain tool's output (``tools``) verbatim."""
    names = set(tools)
    ids = {cid for _, cid, name, _ in _calls(messages) if name in names}
    outputs = [c for m in messages if m.get("role") == "tool" and m.get("tool_call_id") in ids
               and isinstance(c := m.get("content"), str) and len(c) >= PASTE_MIN_CHARS]
    if any(o in text for text in said for o in outputs):
        return [RewardComponent("pasted_output", "guard", False)]
    return []


__all__ = ["COUNTED_KINDS", "GATE_KINDS", "REWARD_SHAPES", "TOOL_ERROR_PENALTY", "VIOLATION_PENALTY", "ComponentHook",
           "DenseTracker", "RewardComponent", "RewardShape", "ShapedReward", "SubgoalReport", "WriteGoal",
           "dump_limit", "extra_components", "given_fact", "lookalike_calls", "lookalike_components", "lookalikes", "parse_shape", "pasted_outputs", "unseen_ids", "register_component_hook", "shaped", "state_components",
           "unregister_component_hook", "user_texts", "write_goals"]
