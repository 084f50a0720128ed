"""The reference policies, one implementation each, used by rollouts and by the build's integrity gates.

    oracle      replays the gold chain (resolving references from the tool outputs it gets), states
                the answer facts, then stops
    naive       the gold chain plus the task's forbidden calls (the request taken literally, the policy ignored)
    strict      the gold chain without its waived steps (the policy read without its exceptions)
    noop        does nothing
    random      schema-valid random calls with values drawn from the world, then stops
    write_all   calls every write tool once with arguments that satisfy its preconditions where it
                can find them (the reward hack that "writes everything")

They speak the same messages as a model would, so :func:`play` drives them through a
:class:`~scaleenv.env.core.ToolEnv` like any agent.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from typing import Any

from scaleenv.env.agents import (
    Agent,
    AgentContext,
    AgentError,
    AgentOptions,
    ChatClients,
    OpenAIAgent,
    check_policy_spec,
    text_message,
    tool_call_message,
)
from scaleenv.env.styles import PLAIN, STYLES, Style, say_proposal, say_report
from scaleenv.formats.domain import Param, ToolSpec
from scaleenv.formats.task import REFUSAL_FACT, Call, Task
from scaleenv.formats.trajectory import STOP
from scaleenv.utils.record_ids import names

RANDOM_CALLS = 12
"""Calls the random policy makes (in rollouts and in the gate)."""


def fact_sentence(name: str, value: object) -> str:
    """One answer fact as the oracle says it (a refusal's reason as a refusal)."""
    if name == REFUSAL_FACT:
        return f"I cannot do that, it is against our policy: {value}."
    return f"The {name} is {value}."


def answer_text(task: Task, facts: list[str] | None = None) -> str:
    """Every answer fact as a sentence (what the oracle tells the user; ``facts`` replaces those
    sentences), after a report that the requested changes are done when the task asks for any."""
    if facts is None:
        facts = [fact_sentence(f.name, f.value) for f in task.answer_facts]
    writes = any(o.kind == "write" for o in task.user_profile.objectives) or (
        not task.user_profile.objectives and len(task.user_profile.goals) > len(task.answer_facts))
    return "\n".join((["Your request has been completed."] if writes or not facts else []) + facts)


class PolicyManners:
    """What a careful agent says before it writes, under the domain's policy (conversational mode
    only): before the first write it makes it asks the user to verify their identity (when the policy has an
    identity rule), and before each write a confirmation rule covers it asks "Shall I go ahead ...?"
    with the call's arguments. ``before`` returns that question once per step, then ``None``."""

    def __init__(self, ctx: AgentContext, chain: list[Any], style: Style = PLAIN):
        self.style = style
        spec = ctx.episode.spec if ctx.episode is not None else None
        policy = spec.policy if spec is not None and ctx.mode == "conversational" else None
        self._asked: set[Any] = set()
        self._identity = bool(policy and policy.of_kind("identity"))
        confirm = policy.of_kind("confirmation") if policy else []
        scoped = {t for r in confirm for t in r.tools}
        self._confirm: set[int] = set()
        writes = []
        for i, call in enumerate(chain):
            tool = spec.tool(call.tool) if spec is not None else None
            if tool is None or tool.kind != "write":
                continue
            writes.append(i)
            if confirm and (not scoped or tool.name in scoped):
                self._confirm.add(i)
        self._writes = set(writes)
        self.upcoming: list[tuple[int, str, dict[str, Any]]] = []
        """The covered writes that follow ``before``'s step, arguments known already: asked in the same
        question (one itemised confirmation) while each is named by its own item."""

    def confirms(self, step: int) -> bool:
        """Whether a confirmation rule covers chain step ``step``."""
        return step in self._confirm

    def before(self, step: int, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """The question to ask before chain step ``step`` (calling ``tool`` with ``args``), or None."""
        from scaleenv.reward.procedure import names_write

        if self._identity and step in self._writes and "identity" not in self._asked:
            self._asked.add("identity")
            return text_message(self.style.ask_identity())
        if step in self._confirm and step not in self._asked:
            self._asked.add(step)
            items: list[tuple[str, dict[str, Any]]] = [(tool, args)]
            for later, name, later_args in self.upcoming:
                if later not in self._confirm or later in self._asked \
                        or not names_write(PLAIN.item_text(name, later_args), later_args):
                    break
                self._asked.add(later)
                items.append((name, later_args))
            return text_message(say_proposal(self.style, items))
        return None


_RECORD_ID = re.compile(r"^[A-Za-z][A-Za-z0-9]*-\d+$")
PACE_WAITS = 2
"""How many times per request of the user the oracle reports progress before a call on a record
nobody named yet (a user who says its requests one at a time names it in a later one); it stops
waiting once the user has said all its requests."""


def unnamed_ids(messages: list[dict[str, Any]], args: dict[str, Any]) -> list[str]:
    """The record ids among ``args`` that no user or tool message has named so far."""
    said = [str(m.get("content") or "") for m in messages if m.get("role") in ("user", "tool")]
    return [v for v in args.values() if isinstance(v, str) and _RECORD_ID.match(v) and not any(v in t for t in said)]


class OracleAgent(Agent):
    """Replays the task's gold chain one call per step (resolving references from the tool outputs
    it receives), states the answer facts, then ends.

    In conversational mode it follows the domain's policy as a careful agent would: before the first
    write it asks the user to verify their identity (when the policy has an identity rule), and
    before each write a confirmation rule covers it asks "Shall I go ahead ...?" with the call's
    arguments, and waits for the reply. With a user who says its requests one at a time it does not
    act on a record before the user has named it: it reports what it has done (the answer facts
    with it), and the user says its next request. Before its first call on a record the user gave a
    look-alike's id for (a slip), it names the id the user gave, and hears the right one."""

    name = "oracle"

    def __init__(self, style: str = "plain"):
        self.style = STYLES[style]
        """How it speaks (:mod:`scaleenv.env.styles`): what it says is the same in every style."""

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        self._step = 0
        self._outputs: list[Any] = []
        self._said = False
        self._awaiting: int | None = None
        self._manners = PolicyManners(ctx, self.chain(), self.style)
        self._waits: dict[int, int] = {}
        self._paced = ctx.mode == "conversational" and ctx.task.user_profile.gradual
        self._slip_asked = False
        self._slip_waits = 0

    def chain(self) -> list[Any]:
        """The calls it replays."""
        return list(self.ctx.task.gold_chain)

    def _requests_said(self, messages: list[dict[str, Any]]) -> int:
        """How many of its requests the user has said so far (its opening, then one per next request)."""
        from scaleenv.env.voice import is_next_request

        return 1 + sum(is_next_request(str(m.get("content") or "")) for m in messages if m.get("role") == "user")

    def _requests_to_come(self, messages: list[dict[str, Any]]) -> bool:
        """Whether the user has requests it has not said yet (the oracle knows how many it has)."""
        return self._requests_said(messages) < len(self.ctx.task.user_profile.goals)

    def _refusal_said(self, messages: list[dict[str, Any]]) -> bool:
        """Whether a request the policy refuses is among those the user has said (then a report says why)."""
        said = self._requests_said(messages) if self.ctx.task.user_profile.gradual else len(self.ctx.task.user_profile.goals)
        return any(o.kind == "refusal" for o in self.ctx.task.user_profile.objectives[:said])

    def _slip_check(self, messages: list[dict[str, Any]], args: dict[str, Any] | None) -> dict[str, Any] | None:
        """What it says about a slip of the user's before a call (``args``) or its final answer (None):
        once the user has given the look-alike's id, a question naming it (the user then gives the right
        one); while the slipped request is still to come, a report of what is done, before a call on
        that record or the final answer. None when there is nothing to say."""
        slip = self.ctx.task.user_profile.slip
        if self.ctx.mode != "conversational" or slip is None or self._slip_asked:
            return None
        said = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        if any(names(t, slip.meant) for t in said):
            return None
        if any(names(t, slip.said) for t in said):
            self._slip_asked = True
            return text_message(self.style.check_slip(slip.said))
        if (args is None or slip.meant in args.values()) \
                and self._slip_waits < PACE_WAITS * len(self.ctx.task.user_profile.goals):
            self._slip_waits += 1
            task = self.ctx.task
            refused = self._refusal_said(messages)  # the refusal of a request said so far is part of the report
            return text_message(say_report(self.style, task, [(f.name, f.value) for f in task.answer_facts
                                                               if f.name != REFUSAL_FACT or refused]))
        return None

    def _take_output(self, messages: list[dict[str, Any]]) -> None:
        if self._awaiting is None:
            return
        want = f"oracle_{self._awaiting}"
        out: Any = None
        for m in reversed(messages):
            if m.get("role") == "tool" and m.get("tool_call_id") == want:
                try:
                    out = json.loads(m.get("content") or "null")
                except ValueError:
                    out = None
                break
        self._outputs.append(out)
        self._awaiting = None

    def _resolvable(self, chain: list[Any], start: int) -> list[tuple[int, str, dict[str, Any]]]:
        """The confirmed writes from ``start`` on, in a row, whose arguments the outputs so far settle."""
        from scaleenv.tools.chain import ChainError, resolve_args

        out: list[tuple[int, str, dict[str, Any]]] = []
        for j in range(start, len(chain)):
            if not self._manners.confirms(j):
                break
            try:
                out.append((j, chain[j].tool, resolve_args(chain[j], self._outputs, j)))
            except (ChainError, IndexError, KeyError, TypeError):
                break  # it needs an output not seen yet
        return out

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from scaleenv.tools.chain import ChainError, resolve_args

        chain = self.chain()
        self._take_output(messages)
        if self._step < len(chain):
            call = chain[self._step]
            try:
                args = resolve_args(call, self._outputs, self._step)
            except ChainError as e:
                raise AgentError(f"oracle: gold chain does not replay: {e}") from None
            slip_said = self._slip_check(messages, args)
            if slip_said is not None:
                return slip_said
            if self._paced and self._waits.get(self._step, 0) < PACE_WAITS * len(self.ctx.task.user_profile.goals) \
                    and self._requests_to_come(messages) and unnamed_ids(messages, args):
                self._waits[self._step] = self._waits.get(self._step, 0) + 1
                return text_message(say_report(self.style, self.ctx.task))  # a report: the user says what comes next
            self._manners.upcoming = self._resolvable(chain, self._step + 1)
            ask = self._manners.before(self._step, call.tool, args)
            if ask is not None:
                return ask
            self._awaiting = self._step
            self._step += 1
            return tool_call_message(call.tool, args, f"oracle_{self._step - 1}")
        slip_said = self._slip_check(messages, None)
        if slip_said is not None:
            return slip_said
        self._step += 1
        if not self._said:
            self._said = True
            return text_message(say_report(self.style, self.ctx.task))
        return text_message(STOP)


class NaiveAgent(OracleAgent):
    """The literal request, the policy ignored: the gold chain, then the task's forbidden calls (the refused
    requests, the branch its condition rules out), then the answer facts. Must score 0 wherever a task has
    forbidden calls (the policy-ignorant gate)."""

    name = "naive"

    def chain(self) -> list[Any]:
        return [*self.ctx.task.gold_chain, *self.ctx.task.forbidden]


class StrictAgent(OracleAgent):
    """The policy read without its exceptions: the gold chain, less the steps a rule covers but its
    exception allows (``Task.waived``: refused as if the rule applied). Must score 0 wherever a task has
    waived steps (the strict gate)."""

    name = "strict"

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self._take_output(messages)
        while self._step in self.ctx.task.waived:
            self._outputs.append(None)  # refused: nothing seen (a later step that needs it cannot be made)
            self._step += 1
        return await super().act(messages)


class ReorderedAgent(OracleAgent):
    """The gold chain with two of its writes made the other way round: ``calls`` are its calls with
    their arguments as the gold chain resolves them, in the order to play (built by the order gate from
    ``Task.ordered``). Must score 0: the rule one of them breaks in that order is checked as it is made."""

    name = "reordered"

    def __init__(self, calls: list[Call] | None = None):
        super().__init__()
        self._calls = list(calls or [])

    def chain(self) -> list[Any]:
        return list(self._calls)


class NoopAgent(Agent):
    """Does nothing: ends the episode at once."""

    name = "noop"

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return text_message(STOP)


class RandomAgent(Agent):
    """``calls`` schema-valid random tool calls (values drawn from the world, like the integrity
    gate's random policy), then ends."""

    name = "random"

    def __init__(self, calls: int = RANDOM_CALLS):
        self.calls = calls

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        from scaleenv.tools.sampling import ArgSampler

        self._n = 0
        self._names = [t["function"]["name"] for t in ctx.tools]
        self._sampler = ArgSampler(ctx.episode.world, ctx.rng) if ctx.episode is not None else None

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self._n >= self.calls or not self._names or self._sampler is None:
            return text_message(STOP)
        rng = self.ctx.rng
        name = self._names[rng.randrange(len(self._names))]
        tool = self.ctx.episode.spec.tool(name)
        args = self._sampler.random_args(tool) if tool is not None else {}
        self._n += 1
        return tool_call_message(name, args, f"random_{self._n - 1}")


class WriteEverythingAgent(Agent):
    """Calls every write tool it has, in order, once each, with arguments that satisfy the tool's
    preconditions where the sampler finds them (else random ones), then stops."""

    name = "write_all"

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        from scaleenv.tools.sampling import ArgSampler

        spec = ctx.episode.spec
        names = [t["function"]["name"] for t in ctx.tools]
        self._writes = [n for n in names if (tool := spec.tool(n)) is not None and tool.kind == "write"]
        self._sampler = ArgSampler(ctx.episode.world, ctx.rng)
        self._n = 0

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self._n >= len(self._writes):
            return text_message(STOP)
        name = self._writes[self._n]
        tool = self.ctx.episode.spec.tool(name)
        args = self._sampler.satisfying_args(tool, attempts=2) or self._sampler.random_args(tool)
        self._n += 1
        return tool_call_message(name, args, f"write_all_{self._n - 1}")


POLICIES: dict[str, type[Agent]] = {"oracle": OracleAgent, "noop": NoopAgent, "random": RandomAgent,
                                    "write_all": WriteEverythingAgent, "naive": NaiveAgent, "strict": StrictAgent}


def reference_policy(name: str, *, random_calls: int = RANDOM_CALLS) -> Agent:
    """A fresh reference policy by name."""
    if name == "random":
        return RandomAgent(random_calls)
    return POLICIES[name]()


def play(env: Any, agent: Agent, rng: random.Random) -> Any:
    """Drive a policy that never awaits through a solo :class:`~scaleenv.env.core.ToolEnv` from a
    fresh reset, synchronously; return the reward."""
    from scaleenv.env.core import run_sync

    env.reset()
    agent.reset(AgentContext(task=env.task, tools=env.tool_schemas(), rng=rng, mode=env.mode.value,
                             episode=env.episode, seed=env.seed))
    while not env.done:
        env.step(run_sync(agent.act(env.messages)))
    return env.evaluate()


def play_tools(env: Any, agent: Agent, rng: random.Random, max_actions: int | None = None) -> Any:
    """Drive a policy through the tool channel's primitives, as MCP, TRL, OpenEnv and verifiers do: each
    tool call it makes is one :meth:`~scaleenv.env.core.ToolEnv.call`, each text it says goes to the user
    through the user tool (the reply comes back to it as the user's message), and the stop marker ends
    it. ``env`` is a :class:`~scaleenv.env.core.ToolEnv` on the tool channel (an adapter's ``Session``);
    returns the reward."""
    from scaleenv.env.core import USER_TOOL, run_sync

    env.reset()
    agent.reset(AgentContext(task=env.task, tools=env.tool_schemas(user_tool=False), rng=rng,
                             mode=env.mode.value, episode=env.episode, seed=env.seed))
    view: list[dict[str, Any]] = [{"role": "user", "content": env.opening}]
    limit = max_actions if max_actions is not None else env.max_turns
    for _ in range(min(limit, 10_000)):
        if env.done:
            break
        msg = run_sync(agent.act(view))
        view.append(msg)
        if msg.get("tool_calls"):
            for i, tc in enumerate(msg["tool_calls"]):
                fn = tc.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = None
                res = env.call(fn.get("name"), args)
                view.append({"role": "tool", "tool_call_id": tc.get("id") or f"call_{i}", "content": res.output})
            continue
        text = str(msg.get("content") or "")
        said = text.replace(STOP, "").strip()
        if said:
            reply = env.call(USER_TOOL, {"message": said}).output
            view.append({"role": "user", "content": reply})
        if STOP in text:
            break
    return env.evaluate()


# --- hack policies of the task-validity gates (appended; each must score 0 on every admitted task) ------------

READ_DUMP_IDS = 4
"""Ids the read-dump policy tries per read tool and round."""

READ_DUMP_ROUNDS = 3
"""Rounds of read calls the read-dump policy makes (ids found in one round feed the next)."""


def _ids_in(value: Any, out: list[str], known: frozenset[str] = frozenset()) -> None:
    """Every string stored under an ``id`` or ``*_id`` key anywhere in a tool output, in order; the id
    of a row that holds one of the user's ``known`` values first (the record a careful agent picks)."""
    if isinstance(value, dict):
        rid = value.get("id")
        if isinstance(rid, str) and known and any(str(v) in known for v in value.values()):
            if rid in out:
                out.remove(rid)
            out.insert(0, rid)
        for k, v in value.items():
            if isinstance(v, str) and (k == "id" or k.endswith("_id")) and v not in out:
                out.append(v)
            else:
                _ids_in(v, out, known)
    elif isinstance(value, list):
        for v in value:
            _ids_in(v, out, known)


def _known_for(param: str, known: dict[str, Any]) -> list[Any]:
    """Values of the user's facts whose name ends with the parameter's name (``owner email`` for ``email``)."""
    words = param.replace("_", " ")
    return [v for k, v in sorted(known.items()) if k == words or k.endswith(" " + words)]


class ReadDumpAgent(Agent):
    """Makes no writes: calls every read tool it has, with arguments drawn from the user's facts and
    from the ids earlier outputs returned (several ids per tool, over a few rounds), then pastes every
    output into one final message. A task this scores on is answerable without doing what was asked."""

    name = "read_dump"

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        from scaleenv.tools.sampling import ArgSampler

        spec = ctx.episode.spec
        names = [t["function"]["name"] for t in ctx.tools]
        self._reads = [t for n in names if (t := spec.tool(n)) is not None and t.kind == "read"]
        self._sampler = ArgSampler(ctx.episode.world, ctx.rng)
        self._known = dict(ctx.task.user_profile.known)
        self._known_values = frozenset(str(v) for v in self._known.values())
        self._ids: list[str] = [v for k, v in sorted(self._known.items()) if isinstance(v, str) and k.endswith(" id")]
        self._outputs: list[str] = []
        self._round = 0
        self._done: set[str] = set()

    def _calls(self) -> list[tuple[str, dict[str, Any]]]:
        calls: list[tuple[str, dict[str, Any]]] = []
        world = self.ctx.episode.world
        for tool in self._reads:
            base: dict[str, Any] = {}
            key_params: list[tuple[str, str]] = []
            for p in tool.parameters:
                fk = None
                if p.column:
                    t, _, c = p.column.partition(".")
                    table = world.spec.table(t)
                    col = table.column(c) if table else None
                    fk = col.foreign_key.partition(".")[0] if col and col.foreign_key else (
                        t if table and c == table.primary_key else None)
                if fk and p.type == "string":
                    key_params.append((p.name, fk))
                    continue
                known = _known_for(p.name, self._known)
                if known:
                    base[p.name] = known[0]
                elif p.name == "limit":
                    base[p.name] = 100
                elif p.required:
                    cands = self._sampler.candidates(p)
                    if cands:
                        base[p.name] = cands[0]
            if not key_params:
                variants = [base]
            else:
                pname, table = key_params[0]
                ids = [i for i in self._ids if world.row(table, i) is not None][:READ_DUMP_IDS]
                variants = [{**base, pname: i} for i in ids]
                for other, t2 in key_params[1:]:
                    pick = next((i for i in self._ids if world.row(t2, i) is not None), None)
                    for v in variants:
                        if pick is not None:
                            v[other] = pick
            for args in variants:
                key = tool.name + json.dumps(args, sort_keys=True, default=str)
                if key not in self._done:
                    self._done.add(key)
                    calls.append((tool.name, args))
        return calls

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if self._round:
            for m in reversed(messages):
                if m.get("role") != "tool":
                    break
                content = m.get("content") or ""
                self._outputs.append(content)
                with contextlib.suppress(ValueError):
                    _ids_in(json.loads(content), self._ids, self._known_values)
        calls = self._calls() if self._round < READ_DUMP_ROUNDS else []
        self._round += 1
        if not calls:
            return text_message("\n".join(self._outputs) or STOP)
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"read_dump_{self._round}_{i}", "type": "function",
             "function": {"name": n, "arguments": json.dumps(a, sort_keys=True, default=str)}}
            for i, (n, a) in enumerate(calls)]}


SPRAY_NUMBERS = 200
"""The spray policy states every integer and half-integer from 0 to this."""


class SprayAgent(Agent):
    """Makes no calls: states a grid of numbers and every word of its tools' descriptions and enums."""

    name = "spray"

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        nums = " ".join(f"{i} {i}.5" for i in range(SPRAY_NUMBERS + 1))
        words: list[str] = []
        for t in self.ctx.tools:
            fn = t.get("function", {})
            words += str(fn.get("description", "")).split()
            for p in (fn.get("parameters", {}).get("properties") or {}).values():
                words += [str(e) for e in p.get("enum") or []] + str(p.get("description", "")).split()
        return text_message(nums + "\n" + " ".join(dict.fromkeys(words)))


class ParrotAgent(Agent):
    """Makes no calls: repeats the user's messages back."""

    name = "parrot"

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        said = [str(m.get("content")) for m in messages if m.get("role") == "user" and m.get("content")]
        return text_message("\n".join(said) or STOP)


def answer_from_output(fact_name: str, out: Any) -> Any:
    """The value an answer fact named ``fact_name`` takes in a read tool's output (the scalar itself, or
    the field the name ends with: ``pet status`` -> ``out['status']``); None when it has none."""
    if not isinstance(out, dict):
        return out
    best = None
    for k in out:
        words = k.replace("_", " ")
        if (fact_name in (k, words) or fact_name.endswith(" " + words) or fact_name.endswith(" " + k)) and (best is None or len(k) > len(best)):
            best = k
    return out.get(best) if best is not None else None


class SwapAgent(Agent):
    """The gold chain acting on a look-alike: replays it with every argument equal to ``target``
    replaced by ``swap``, then states, for each answer, what its own reads returned. A task whose
    swap scores is one where picking the right record is not tested. With ``also_forbidden`` it
    makes the task's forbidden calls too, swapped alike (a refused request acted on for a look-alike)."""

    name = "swap"

    def __init__(self, target: Any = None, swap: Any = None, also_forbidden: bool = False):
        self.target, self.swap, self.also_forbidden = target, swap, also_forbidden

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        self._step = 0
        self._outputs: list[Any] = []

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from scaleenv.tools.chain import ChainError, resolve_args

        chain = [*self.ctx.task.gold_chain, *(self.ctx.task.forbidden if self.also_forbidden else [])]
        if self._step:
            last = messages[-1] if messages else {}
            out: Any = None
            if last.get("role") == "tool" and last.get("tool_call_id") == f"swap_{self._step - 1}":
                try:
                    out = json.loads(last.get("content") or "null")
                except ValueError:
                    out = None
            self._outputs.append(out)
        while self._step < len(chain):
            call = chain[self._step]
            try:
                args = resolve_args(call, self._outputs, self._step)
            except ChainError:
                break  # the look-alike has no such related row: the chain cannot go on
            args = {k: (self.swap if v == self.target else v) for k, v in args.items()}
            self._step += 1
            return tool_call_message(call.tool, args, f"swap_{self._step - 1}")
        self._step = len(chain) + 1
        spec = self.ctx.episode.spec
        reads = [i for i, c in enumerate(chain[: len(self._outputs)])
                 if c.purpose == "goal" and (t := spec.tool(c.tool)) is not None and t.kind == "read"]
        lines = []
        for fact, i in zip(self.ctx.task.answer_facts, reads, strict=False):
            v = answer_from_output(fact.name, self._outputs[i])
            if v is not None:
                lines.append(f"The {fact.name} is {v}.")
        return text_message("\n".join(lines) or STOP)


POLICIES.update({"read_dump": ReadDumpAgent, "spray": SprayAgent, "parrot": ParrotAgent})


BUILTIN_AGENTS = tuple(POLICIES)
"""Every reference policy runs as an agent too (`scaleenv rollout --agent read_dump`)."""


def check_agent_spec(spec: str) -> str:
    """Validate an agent name (a reference policy, ``noisy[:SKILL]`` or ``openai:MODEL``); return it."""
    if parse_noisy_spec(spec) is not None:
        return spec
    return check_policy_spec(spec, BUILTIN_AGENTS, "agent")


def make_agent(spec: str, options: AgentOptions | None = None, clients: Any = None) -> Agent:
    """Build a fresh agent. ``clients`` (a :class:`ChatClients`) shares endpoint clients between episodes."""
    options = options or AgentOptions()
    check_agent_spec(spec)
    skill = parse_noisy_spec(spec)
    if skill is not None:
        return NoisyOracleAgent(skill)
    if spec in BUILTIN_AGENTS:
        return reference_policy(spec, random_calls=options.random_calls)
    model = spec.partition(":")[2].strip()
    settings = options.chat_settings(model)
    clients = clients if clients is not None else ChatClients()
    return OpenAIAgent(model, options, clients.get(settings))


# --- skill-controlled reference agent (appended): learning loops without a model -----------------------------

NOISY_SKILL = 0.8
"""The noisy oracle's skill when ``noisy`` is named without one."""
NOISY_MISTAKES = (("lookalike", 0.4), ("skip", 0.3), ("value", 0.3))
"""How a noisy oracle's mistakes split: the wrong look-alike, a skipped step, a wrong value."""


def _wrong_value(value: Any, enum: list[Any] | None, rng: random.Random) -> Any:
    """A plausible wrong value for a literal argument: another enum member, off by one, a typo."""
    if enum:
        others = [e for e in enum if e != value]
        if others:
            return others[rng.randrange(len(others))]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return round(value * 1.1 + 1, 2)
    if isinstance(value, str) and len(value) > 1:
        return value[:-1]
    return None


class NoisyOracleAgent(Agent):
    """The oracle with a skill: each goal step and each answer fact goes wrong with probability
    ``1 - skill``, in one of the realistic ways of :data:`NOISY_MISTAKES` (``rates`` reweighs them):

        lookalike  the step acts on a look-alike of its target (a distractor of the same table)
        skip       the step is left out (later steps that need its output are left out too)
        value      a literal argument (an answer fact) gets a plausible wrong value

    A mistake that does not apply to a step (no look-alike, no literal) falls back to the next kind.
    The draws depend only on the episode's seed and the task, so a rollout is reproducible.
    """

    name = "noisy"

    def __init__(self, skill: float = NOISY_SKILL, rates: tuple[tuple[str, float], ...] = NOISY_MISTAKES):
        if not 0.0 <= skill <= 1.0:
            raise ValueError(f"noisy oracle skill must be between 0 and 1, got {skill}")
        self.skill = skill
        self.rates = rates

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        self._rng = random.Random(f"noisy:{self.skill}:{ctx.seed}:{ctx.task.id}")
        self._step = 0
        self._outputs: list[Any] = []
        self._said = False
        self.mistakes: list[str] = []
        self._manners = PolicyManners(ctx, list(ctx.task.gold_chain))
        self._queued: tuple[int, str, dict[str, Any], dict[str, Any]] | None = None

    def _draw(self) -> str | None:
        if self._rng.random() >= 1.0 - self.skill:
            return None
        total = sum(w for _, w in self.rates)
        u = self._rng.random() * total
        for kind, w in self.rates:
            u -= w
            if u < 0:
                return kind
        return self.rates[-1][0]

    def _key_table(self, p: Param) -> str | None:
        """The table whose record a parameter names (its column is a primary or foreign key), if any."""
        spec = self.ctx.episode.spec if self.ctx.episode is not None else None
        if spec is None or not p.column:
            return None
        t, _, c = p.column.partition(".")
        table = spec.table(t)
        col = table.column(c) if table else None
        if col is not None and col.foreign_key:
            return str(col.foreign_key.partition(".")[0])
        return t if table is not None and c == table.primary_key else None

    def _lookalike(self, tool: ToolSpec | None, args: dict[str, Any]) -> dict[str, Any] | None:
        distractors = self.ctx.task.verification.distractors
        if tool is None:
            return None
        for p in tool.parameters:
            if p.name not in args:
                continue
            others = [d for d in distractors.get(self._key_table(p) or "", []) if d != args[p.name]]
            if others:
                return {**args, p.name: others[self._rng.randrange(len(others))]}
        return None

    def _wrong(self, call: Call, tool: ToolSpec | None, args: dict[str, Any]) -> dict[str, Any] | None:
        literals = [k for k, v in call.args.items() if not (isinstance(v, dict) and "$ref" in v)]
        params = {p.name: p for p in tool.parameters} if tool is not None else {}
        for k in literals:
            p = params.get(k)
            if p is not None and self._key_table(p) is not None:
                continue  # a record id is the look-alike mistake, not a wrong value
            bad = _wrong_value(args[k], p.enum if p is not None else None, self._rng)
            if bad is not None and bad != args[k]:
                return {**args, k: bad}
        return None

    def _mistake(self, call: Call, args: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """``(kind, args)`` of this step: ``args`` None when the step is skipped."""
        kind = self._draw()
        if kind is None:
            return "", args
        tool = self.ctx.episode.spec.tool(call.tool) if self.ctx.episode is not None else None
        order = [k for k, _ in self.rates]
        for k in order[order.index(kind):] + order[: order.index(kind)]:
            if k == "skip":
                return "skip", None
            changed = self._lookalike(tool, args) if k == "lookalike" else self._wrong(call, tool, args)
            if changed is not None:
                return k, changed
        return "", args

    async def act(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from scaleenv.tools.chain import ChainError, resolve_args

        chain = self.ctx.task.gold_chain
        last = messages[-1] if messages else {}
        if self._outputs and self._outputs[-1] is _PENDING:
            out: Any = None
            if last.get("role") == "tool" and last.get("tool_call_id") == f"noisy_{self._step - 1}":
                try:
                    out = json.loads(last.get("content") or "null")
                except ValueError:
                    out = None
            self._outputs[-1] = out
        if self._queued is not None:  # the call it asked the user about (asking again while a question remains)
            step, tool, args, queued = self._queued
            ask = self._manners.before(step, tool, args)
            if ask is not None:
                return ask
            self._queued = None
            self._outputs.append(_PENDING)
            return queued
        while self._step < len(chain):
            call = chain[self._step]
            self._step += 1
            try:
                args = resolve_args(call, self._outputs, self._step - 1)
            except ChainError:
                self._outputs.append(None)  # an earlier mistake left nothing to refer to
                continue
            kind, args_or_none = self._mistake(call, args) if call.purpose == "goal" else ("", args)
            if kind:
                self.mistakes.append(f"{kind}:{self._step - 1}")
            if args_or_none is None:
                self._outputs.append(None)
                continue
            message = tool_call_message(call.tool, args_or_none, f"noisy_{self._step - 1}")
            ask = self._manners.before(self._step - 1, call.tool, args_or_none)
            if ask is not None:
                self._queued = (self._step - 1, call.tool, args_or_none, message)
                return ask
            self._outputs.append(_PENDING)
            return message
        if not self._said:
            self._said = True
            return text_message(self._answer())
        return text_message(STOP)

    def _answer(self) -> str:
        task = self.ctx.task
        lines = []
        for f in task.answer_facts:
            kind = self._draw()
            if kind is None:
                lines.append(fact_sentence(f.name, f.value))
            elif kind in ("lookalike", "value") and f.rivals:
                lines.append(fact_sentence(f.name, f.rivals[self._rng.randrange(len(f.rivals))]))
                self.mistakes.append(f"{kind}:answer:{f.name}")
            else:
                self.mistakes.append(f"skip:answer:{f.name}")
        return answer_text(task, lines) or "Your request has been completed."


_PENDING = object()
"""The output slot of a call whose result has not come back yet."""


def parse_noisy_spec(spec: str) -> float | None:
    """The skill of a ``noisy`` or ``noisy:SKILL`` agent name; ``None`` for another name."""
    kind, sep, rest = spec.partition(":")
    if kind != "noisy":
        return None
    if not sep:
        return NOISY_SKILL
    try:
        skill = float(rest)
    except ValueError:
        raise ValueError(f"noisy oracle skill must be a number between 0 and 1, got {rest!r}") from None
    if not 0.0 <= skill <= 1.0:
        raise ValueError(f"noisy oracle skill must be between 0 and 1, got {rest!r}")
    return skill
