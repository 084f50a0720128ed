"""Reward-integrity gates, run for every task before it is admitted and by ``scaleenv check``.

The gold chain must score 1, played solo and (``gold_conversational``) by the oracle talking to the
scripted user, where the domain's policy procedure (identity, a confirmation naming each change) is
checked too: a task the reference cannot pass in a conversation is never admitted. Every other policy
must score 0: doing nothing, a random policy, the
"call every write tool" hack, the read-dump (no writes, every read tool called, every output pasted
into the answer), the spray (a grid of numbers and the tool descriptions' words), the parrot (the
user's messages said back), the distractor swap (the gold chain acting on each look-alike of a
target instead of the target), the policy-ignorant gate ``naive`` (on tasks with forbidden calls: the
gold chain followed by them, as the literal request would have it), the strict gate ``strict`` (on
tasks with waived steps: the gold chain without them, the policy read without its exceptions), and the
order gate ``reordered`` (on tasks with writes that must be made in order, ``Task.ordered``: the gold
chain with the first such pair made the other way round, which ends in the same rows).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scaleenv.env.agents import Agent, AgentError
from scaleenv.env.core import Mode, ToolEnv
from scaleenv.env.episode import Episode
from scaleenv.env.policies import (
    RANDOM_CALLS,
    READ_DUMP_IDS,
    READ_DUMP_ROUNDS,
    OracleAgent,
    ReorderedAgent,
    SwapAgent,
    play,
    reference_policy,
)
from scaleenv.env.styles import drawn_style
from scaleenv.formats.task import Call, Task
from scaleenv.tools.chain import ChainError, literal_chain, resolve_args, run_chain
from scaleenv.world.world import World

GOLD_GATES = ("gold", "gold_conversational", "gold_styled")
"""The gates the reference must pass (score 1): solo, talking to the scripted user, and (``gold_styled``,
the style gate: ``scaleenv check``) talking to it in every other style of :mod:`scaleenv.env.styles`."""
ZERO_GATES = ("noop", "naive", "strict", "reordered", "parrot", "spray", "random", "hack", "read_dump", "swap")
RANDOM_DRAWS = 4
"""Independent draws of the random policy per task (each must score 0)."""
READ_DUMP_DRAWS = 2
DRAWS = {"random": RANDOM_DRAWS, "read_dump": READ_DUMP_DRAWS}
ROLLOUT_AGENT_STREAM = "agent:0"
"""The random stream `scaleenv rollout` gives an agent at its default seed (env.loop.run_episode): a
further draw of each sampling gate, so a default rollout of a reference policy scores what its gate did."""
"""The gates whose policy must score 0 (the gold chain must score 1), cheapest first: the build stops
at the first that scores."""

_POLICY = {"noop": "noop", "naive": "naive", "strict": "strict", "random": "random", "hack": "write_all", "read_dump": "read_dump", "spray": "spray",
           "parrot": "parrot"}


@dataclass
class GateResult:
    """Each gate's score (``swap``: the best score of any look-alike swap; 0.0 when there is none)."""

    scores: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> float:
        scores = self.__dict__.get("scores", {})
        if name in scores:
            return float(scores[name])
        raise AttributeError(name)

    @property
    def passed(self) -> bool:
        return not self.failures()

    def failures(self) -> list[str]:
        # at most 0 (a dense shape's penalties take hacks below 0); binary scores are never negative
        out = [f"{g}_not_1" for g in GOLD_GATES if g in self.scores and abs(self.scores[g] - 1.0) > 1e-9]
        if "gold" not in self.scores:
            out.insert(0, "gold_not_1")
        return out + [f"{g}_not_0" for g in ZERO_GATES if self.scores.get(g, 0.0) > 0.0]

    def to_json(self) -> dict[str, float]:
        return dict(self.scores)


def _max_turns(ep: Episode, task: Task) -> int:
    return len(ep.tool_names) + len(task.gold_chain) + RANDOM_CALLS + READ_DUMP_ROUNDS + 2


def play_policy(ep: Episode, task: Task, agent: Agent, rng: random.Random, reward_shape: str = "binary") -> Any:
    """An agent's reward on the task, played through the environment core (solo: the gates judge
    the world and what was said, not a conversation), in ``reward_shape``."""
    env = ToolEnv(task, ep, mode=Mode.SOLO, max_turns=_max_turns(ep, task), release=lambda _: None,
                  reward_shape=reward_shape)
    return play(env, agent, rng)


def converse(ep: Episode, task: Task, agent: Agent, seed: int = 0, reward_shape: str = "binary") -> float:
    """An agent's score on the task talking to the scripted user (conversational mode, the rollout's
    default limits, the policy's procedure checked), in ``reward_shape``: the conversational gold gate,
    and how a slip of the user's is checked to be one the agent can put right."""
    from scaleenv.env.core import run_sync
    from scaleenv.env.loop import run_episode
    from scaleenv.env.users import ScriptedUser

    env = ToolEnv(task, ep, user=ScriptedUser(), mode=Mode.CONVERSATIONAL, release=lambda _: None,
                  reward_shape=reward_shape)
    try:
        return float(run_sync(run_episode(env, agent, seed=seed)).reward["score"])
    finally:
        ep.reset()


def score_policy(ep: Episode, task: Task, policy: str, rng: random.Random | None = None,
                 reward_shape: str = "binary") -> Any:
    """One reference policy's reward on the task (see :mod:`scaleenv.env.policies`)."""
    return play_policy(ep, task, reference_policy(policy), rng or random.Random(f"gates:0:{task.id}"), reward_shape)


def swap_pairs(ep: Episode, task: Task) -> list[tuple[Any, Any]]:
    """(target id, look-alike id) for every distractor of the task whose target the goals depend on.

    The target of a distractor's table is the id of that table the gold chain passes (resolved from
    the outputs it gets) to a goal call, or to a call whose output a later call uses; a record the
    chain only looks up and never uses can be swapped for anything."""
    distractors = task.verification.distractors
    if not distractors:
        return []
    used = {v["$ref"] for c in task.gold_chain for v in c.args.values() if isinstance(v, dict) and "$ref" in v}
    ep.reset()
    outputs: list[Any] = []
    passed: list[Any] = []
    for i, call in enumerate(task.gold_chain):
        try:
            args = resolve_args(call, outputs, i)
        except ChainError:
            break
        if call.purpose == "goal" or i in used:
            passed += [v for v in args.values() if isinstance(v, str | int) and not isinstance(v, bool)]
        outputs.append(ep.call_tool(call.tool, args).value)
    ep.reset()
    pairs = []
    for table, ids in sorted(distractors.items()):
        lookalikes = set(ids)
        target = next((v for v in passed if v not in lookalikes and ep.world.row(table, v) is not None), None)
        if target is not None:
            pairs += [(target, d) for d in ids]
    return pairs


def reordered_calls(ep: Episode, task: Task) -> list[Call]:
    """The gold chain's calls, their arguments resolved as the gold chain gives them, with the later
    write of ``task.ordered``'s first pair moved to just before the earlier one."""
    first, later = task.ordered[0]
    scratch = World.from_snapshot(ep.spec, ep.initial_world().snapshot())
    try:
        outputs = run_chain(scratch, ep.spec, task.gold_chain)
    finally:
        scratch.close()
    calls = literal_chain(task.gold_chain, outputs)
    order = [i for i in range(len(calls)) if i != later]
    order.insert(order.index(first), later)
    return [calls[i] for i in order]


def run_gates(ep: Episode, task: Task, seed: int = 0, detail: bool = False, reward_shape: str = "binary",
              conversational: bool = True, styles: Sequence[str] | None = None) -> GateResult:
    """Score the gold chain and every policy that must score 0 (see the module docstring), in
    ``reward_shape`` (``partial``, ``dense``: the hacks must score at most 0); with ``conversational``,
    also the oracle talking to the scripted user (``gold_conversational``, run once the others pass, or
    always with ``detail``). With ``styles`` None (the build), that oracle speaks in the task's drawn style
    (:func:`~scaleenv.env.styles.drawn_style`: every style is played across a build at no extra cost);
    given ``styles``, it speaks plainly, and ``gold_styled`` is its lowest score in those styles (the style
    gate; ``details["styles_failed"]`` names the styles that did not score 1)."""
    shape = reward_shape
    rng = random.Random(f"gates:{seed}:{task.id}")
    scores: dict[str, float] = {}
    gold = score_policy(ep, task, "oracle", rng, shape)
    scores["gold"] = gold.score
    details: dict[str, Any] = {"gold_diff": gold.diff[:5]} if detail else {}
    for gate in ZERO_GATES:
        if gate == "swap":
            best = 0.0
            for target, other in swap_pairs(ep, task):
                r = play_policy(ep, task, SwapAgent(target, other), rng, shape)
                if r.score > best:
                    best = r.score
                    if detail:
                        details["swap_with"] = other
            scores["swap"] = best
        elif gate == "naive":
            # the policy-ignorant gate: the literal request (gold chain + its forbidden calls) must fail
            try:
                scores["naive"] = score_policy(ep, task, "naive", rng).score if task.forbidden else 0.0
            except AgentError:  # the literal request cannot even be carried out (a forbidden call broke a later step)
                scores["naive"] = 0.0
        elif gate == "strict":
            # the policy without its exceptions: the gold chain less its waived steps must fail
            try:
                scores["strict"] = score_policy(ep, task, "strict", rng).score if task.waived else 0.0
            except AgentError:
                scores["strict"] = 0.0
        elif gate == "reordered":
            # the right changes in the wrong order: a rule broken on the way must fail it
            try:
                scores["reordered"] = (play_policy(ep, task, ReorderedAgent(reordered_calls(ep, task)), rng).score
                                       if task.ordered else 0.0)
            except (AgentError, ChainError):
                scores["reordered"] = 0.0
        elif gate in ("random", "read_dump"):
            # several independent draws: a single-write task whose target the sampler can hit, or a read
            # that a dump of the first ids it meets happens to answer, must not pass because one seed
            # missed (the first draw keeps the shared stream; the last is the one `scaleenv rollout`
            # gives its agents by default)
            policy = _POLICY[gate]
            scores[gate] = score_policy(ep, task, policy, rng, shape).score
            draws = [random.Random(f"gates:{seed}:{task.id}:{gate}:{i}") for i in range(1, DRAWS[gate])]
            for extra in [*draws, random.Random(ROLLOUT_AGENT_STREAM)]:
                if scores[gate] > 0.0:
                    break
                scores[gate] = max(scores[gate], score_policy(ep, task, policy, extra, shape).score)
        else:
            scores[gate] = score_policy(ep, task, _POLICY[gate], rng, shape).score
        if scores[gate] > 0.0 and not detail:
            break  # rejected: the rest need not run
    else:
        if conversational:  # the dearest gate last: the oracle talking to the scripted user
            style = "plain" if styles is not None else drawn_style(task.id)
            scores["gold_conversational"] = converse(ep, task, OracleAgent(style), seed, shape)
            if styles:
                # how it is said is judged in the binary shape whatever the shape asked for (a style changes
                # nothing a shape weighs; the dense shape would only make it dearer)
                styled = {name: converse(ep, task, OracleAgent(name), seed) for name in styles}
                scores["gold_styled"] = min(styled.values())
                details["styles_failed"] = sorted(n for n, v in styled.items() if abs(v - 1.0) > 1e-9)
    ep.reset()
    return GateResult(scores, details)


__all__ = ["DRAWS", "GOLD_GATES", "RANDOM_DRAWS", "READ_DUMP_DRAWS", "ROLLOUT_AGENT_STREAM", "READ_DUMP_IDS", "ZERO_GATES", "GateResult", "converse",
           "play_policy", "reordered_calls", "run_gates", "score_policy", "swap_pairs"]
