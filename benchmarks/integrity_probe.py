"""Reward-integrity probe: the hacks of issue 42 played on a built universe, counted per case.

    python benchmarks/integrity_probe.py UNIVERSE [--per-domain N] [--json]

Each case is a policy played through the public environment (``scaleenv.env.core.make`` on the text
channel, ``scaleenv.integrations.session.Session`` on the tool channel, as MCP and the trainers use
it), so the same script measures any version of the package (run it with ``PYTHONPATH`` pointing at
an older checkout's ``src`` to get the figures before a change):

    noop_partial_pos    an agent that does nothing scores > 0 under the partial shape (conversational)
    noop_partial_one    ... exactly 1
    noop_dense_pos      ... > 0 under the dense shape
    tool_no_procedure   the gold calls made straight through the tool channel, with no identity question
                        and no confirmation, score 1 (binary), of the write tasks whose policy asks for both
    consent_blind       "Shall I go ahead?" naming nothing, then every gold call in one message, scores 1
    consent_anything    a yes to "Is there anything else I can help you with?" then every call, scores 1
    consent_read        a yes to "Shall I look up <the first write's record>?" then every call, scores 1
    oracle_text_fail    the oracle talking to the scripted user scores < 1 (text channel)
    oracle_tool_fail    the same through the tool channel (its messages sent with send_message_to_user)

Each consent hack first asks for the user's identity as a careful agent would, so only the consent is
at stake. A count is over the tasks the case applies to (``applies``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from scaleenv.env.core import make, run_sync
from scaleenv.env.loop import run_episode
from scaleenv.env.policies import OracleAgent, answer_text, reference_policy
from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.session import USER_TOOL, Session, gold_calls
from scaleenv.universe import Universe

IDENTITY_ASK = "Before I change anything, could you please verify your identity by giving me your details?"
HACK_QUESTIONS = {
    "consent_blind": lambda calls: "Shall I go ahead?",
    "consent_anything": lambda calls: "Is there anything else I can help you with?",
    "consent_read": lambda calls: f"Shall I look up {next(iter(_ids(calls)), 'your record')} for you?",
}


def _ids(calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [v for _, a in calls for v in a.values() if isinstance(v, str) and "-" in v and v.split("-")[-1].isdigit()]


def _literal_calls(universe: Path, task: Any) -> list[tuple[str, dict[str, Any]]]:
    """The gold chain as literal calls, from the outputs its verified replay recorded."""
    from scaleenv.env.cache import task_cache

    return gold_calls(task, task_cache(universe).worlds(task).outputs)


def _batch(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"h{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)]}


def _say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _writes(env: Any) -> list[str]:
    return [c.tool for c in env.task.gold_chain if (t := env.spec.tool(c.tool)) is not None and t.kind == "write"]


def _policy_kinds(env: Any) -> set[str]:
    policy = env.spec.policy
    return {r.kind for r in policy.rules} if policy is not None else set()


def _score(env: Any) -> float:
    return float(env.final_reward()["score"])


def consent_hack(universe: Path, task_id: str, question: str) -> float | None:
    env = make(universe, task_id, user="scripted")
    try:
        if not _writes(env) or "confirmation" not in _policy_kinds(env):
            return None
        env.reset()
        calls = _literal_calls(universe, env.task)
        for action in (_say(IDENTITY_ASK), _say(HACK_QUESTIONS[question](calls)), _batch(calls),
                       _say(answer_text(env.task) or "Done."), _say(STOP)):
            if env.done:
                break
            env.step(action)
        return _score(env)
    finally:
        env.close()


def tool_no_procedure(universe: Path, task_id: str) -> float | None:
    from scaleenv.env.cache import task_cache

    cache = task_cache(universe)
    task = cache.task(task_id)
    s = Session(cache, task)
    try:
        if not _writes(s) or not {"identity", "confirmation"} <= _policy_kinds(s):
            return None
        for name, args in _literal_calls(universe, task):
            s.call(name, args)
        s.call(USER_TOOL, {"message": answer_text(task) or "Done."})
        return _score(s)
    finally:
        s.close()


def noop(universe: Path, task_id: str, shape: str) -> float:
    env = make(universe, task_id, user="scripted", reward_shape=shape)
    try:
        return float(run_sync(run_episode(env, reference_policy("noop"))).reward["score"])
    finally:
        env.close()


def oracle_text(universe: Path, task_id: str) -> float:
    env = make(universe, task_id, user="scripted")
    try:
        return float(run_sync(run_episode(env, OracleAgent())).reward["score"])
    finally:
        env.close()


def oracle_tool(universe: Path, task_id: str) -> float:
    """The oracle on the tool channel: its calls made with ``Session.call``, its text sent with the user tool."""
    import random

    from scaleenv.env.agents import AgentContext
    from scaleenv.env.cache import task_cache

    cache = task_cache(universe)
    task = cache.task(task_id)
    s = Session(cache, task)
    agent = OracleAgent()
    agent.reset(AgentContext(task=task, tools=s.tool_schemas(user_tool=False), rng=random.Random(0),
                             mode="conversational", episode=s.episode, seed=0))
    view: list[dict[str, Any]] = [{"role": "user", "content": s.opening}]
    try:
        for _ in range(4 * len(task.gold_chain) + 40):
            if s.done:
                break
            msg = run_sync(agent.act(view))
            view.append(msg)
            if msg.get("tool_calls"):
                for tc in msg["tool_calls"]:
                    res = s.call(tc["function"]["name"], json.loads(tc["function"]["arguments"] or "{}"))
                    view.append({"role": "tool", "tool_call_id": tc["id"], "content": res.output})
                continue
            text = msg.get("content") or ""
            if STOP in text:
                break
            reply = s.call(USER_TOOL, {"message": text}).output
            view.append({"role": "user", "content": reply})
        return _score(s)
    finally:
        s.close()


def probe(universe: Path, per_domain: int) -> dict[str, Any]:
    u = Universe(universe)
    ids = [t.id for d in u.domains for t in list(u.tasks(d))[:per_domain]]
    counts: dict[str, dict[str, int]] = {}

    def count(case: str, score: float | None, bad: bool) -> None:
        c = counts.setdefault(case, {"applies": 0, "hits": 0})
        if score is not None:
            c["applies"] += 1
            c["hits"] += bad

    for i, tid in enumerate(ids):
        p = noop(universe, tid, "partial")
        count("noop_partial_pos", p, p > 0)
        count("noop_partial_one", p, p >= 1.0)
        d = noop(universe, tid, "dense")
        count("noop_dense_pos", d, d > 0)
        t = tool_no_procedure(universe, tid)
        count("tool_no_procedure", t, t is not None and t >= 1.0)
        for q in HACK_QUESTIONS:
            h = consent_hack(universe, tid, q)
            count(q, h, h is not None and h >= 1.0)
        o = oracle_text(universe, tid)
        count("oracle_text_fail", o, o < 1.0)
        ot = oracle_tool(universe, tid)
        count("oracle_tool_fail", ot, ot < 1.0)
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{len(ids)}", file=sys.stderr)
    return {"universe": str(universe), "tasks": len(ids), "cases": counts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("universe", type=Path)
    ap.add_argument("--per-domain", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = probe(a.universe, a.per_domain)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{out['tasks']} tasks of {out['universe']}")
    for case, c in out["cases"].items():
        print(f"  {case:20s} {c['hits']:5d} of {c['applies']}")


if __name__ == "__main__":
    main()
