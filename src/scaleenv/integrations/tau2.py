"""tau2-bench formats: tasks, a replay that grades a tau2 task's actions, and results.

* :func:`tau2_task` turns a scaleenv task into tau2's ``Task`` JSON: ``user_scenario`` from the user
  profile (structured instructions), ``ticket`` (the whole request, for solo agents),
  ``initial_state.initialization_data.agent_data`` (the task's patch, keyed like a tau2 DB:
  ``{table: {primary_key: row}}``) and ``evaluation_criteria`` whose ``actions`` are the gold chain
  with every reference resolved to the value the verified replay produced, ``communicate_info``
  from the answer facts and ``reward_basis`` ``["DB"]`` (plus ``"COMMUNICATE"`` with answer facts).
* :func:`replay_tau2_task` is the adapter back: it plays a tau2 task's actions (and says its
  ``communicate_info``) in a fresh episode and returns scaleenv's reward; the gold actions score 1.
* :func:`tau2_results` writes rollout trajectories in tau2's ``Results`` shape (``info``, ``tasks``,
  ``simulations`` of ``SimulationRun`` with tau2 messages and ``reward_info``).

tau2-bench itself is not needed (it is not on PyPI); these are plain JSON documents in its shapes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scaleenv.env.user_prompt import slip_instruction
from scaleenv.formats.task import Task
from scaleenv.integrations.session import (
    IntegrationError,
    TaskSource,
    gold_calls,
    system_prompt,
    task_source,
)
from scaleenv.reward.state import Reward

TERMINATION = {"user_done": "user_stop", "agent_stop": "agent_stop", "max_turns": "max_steps", "error": "agent_error"}


def _keyed(source: TaskSource, domain: str, tables: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    spec = source.spec(domain)
    out: dict[str, Any] = {}
    for name, rows in tables.items():
        table = spec.table(name)
        pk = table.primary_key if table is not None else "id"
        out[name] = {str(r.get(pk)): r for r in rows}
    return out


def _fmt(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def tau2_task(source: TaskSource, task: Task) -> dict[str, Any]:
    """The tau2-bench ``Task`` JSON of a scaleenv task."""
    from scaleenv.env.loop import solo_request

    worlds = source.worlds(task)
    profile = task.user_profile
    known = dict(profile.known)
    withheld = [w for w in profile.withheld if w in known]
    shared = "; ".join(f"{k}: {_fmt(v)}" for k, v in sorted(known.items()) if k not in withheld)
    hidden = "; ".join(f"{k}: {_fmt(known[k])}" for k in withheld)
    goals = list(profile.goals) or [task.instruction]
    actions = [{"action_id": f"{task.id}_{i}", "requestor": "assistant", "name": name, "arguments": args,
                "info": task.gold_chain[i].purpose or None, "compare_args": None}
               for i, (name, args) in enumerate(gold_calls(task, worlds.outputs))]
    communicate = [_fmt(f.value) for f in task.answer_facts]
    return {
        "id": task.id,
        "description": {"purpose": task.instruction, "relevant_policies": None,
                        "notes": f"scaleenv task ({task.domain}); difficulty: "
                                 f"{json.dumps(task.difficulty.model_dump(mode='json'), sort_keys=True)}"},
        "user_scenario": {
            "persona": profile.persona or None,
            "instructions": {
                "domain": task.domain,
                "reason_for_call": " ".join(goals),
                "known_info": shared or None,
                "unknown_info": None,
                "task_instructions": (f"Share these details only if the agent asks for them: {hidden}. " if hidden
                                      else "") + (f"The first time the agent says it cannot do something, press "
                                                  f"once before accepting: \"{profile.pushback}\". "
                                                  if profile.pushback else "")
                                     + ("Say your requests one at a time, in the order given: the next only once the "
                                        "agent has dealt with the one before. " if profile.gradual else "")
                                     + (f"{slip} " if (slip := slip_instruction(profile)) else "")
                                     + "When your request is done, end the conversation.",
            },
        },
        "ticket": solo_request(task),
        "initial_state": {"initialization_data": {"agent_data": _keyed(source, task.domain, task.initial_patch),
                                                  "user_data": None},
                          "initialization_actions": None, "message_history": None},
        "evaluation_criteria": {"actions": actions, "env_assertions": None, "communicate_info": communicate,
                                "nl_assertions": None,
                                "reward_basis": ["DB", "COMMUNICATE"] if communicate else ["DB"]},
    }


def write_tau2(source: TaskSource, tasks: list[Task], out: Path) -> list[Path]:
    """``out`` ending in ``.json``: one tau2 tasks file. Otherwise a directory laid out like tau2's
    ``data/tau2/domains``: ``<domain>/{tasks.json, split_tasks.json, db.json, policy.md, tools.json}``."""
    from scaleenv.utils.fs import atomic_write_text

    def dump(path: Path, obj: object) -> Path:
        atomic_write_text(path, json.dumps(obj, indent=1, ensure_ascii=False, default=str) + "\n")
        return path

    if out.suffix == ".json":
        if out.is_dir():
            raise IntegrationError(f"--out {out} is a directory; pass a .json file or a directory without .json")
        return [dump(out, [tau2_task(source, t) for t in tasks])]
    if out.exists() and not out.is_dir():
        raise IntegrationError(f"--out {out} is a file; for tau2 pass a directory or a path ending in .json")
    files: list[Path] = []
    by_domain: dict[str, list[Task]] = {}
    for t in tasks:
        by_domain.setdefault(t.domain, []).append(t)
    for domain, ts in by_domain.items():
        from scaleenv.world.world import World

        spec = source.spec(domain)
        d = out / domain
        files.append(dump(d / "tasks.json", [tau2_task(source, t) for t in ts]))
        files.append(dump(d / "split_tasks.json", {"base": [t.id for t in ts]}))
        world = World.from_snapshot(spec, source.universe.base(domain))
        try:
            files.append(dump(d / "db.json", _keyed(source, domain, world.dump())))
        finally:
            world.close()
        policy = system_prompt(ts[0], spec, "conversational", user_tool=False)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write_text(d / "policy.md", f"# {domain.replace('_', ' ').title()} agent policy\n\n{policy}\n")
        files.append(d / "policy.md")
        files.append(dump(d / "tools.json", [t.openai_schema() for t in spec.tools]))
    return files


def load_tau2_tasks(path: str | Path) -> list[dict[str, Any]]:
    """The tau2 task list of a ``tasks.json`` file (or of every ``<domain>/tasks.json`` under a directory)."""
    path = Path(path)
    files = sorted(path.glob("*/tasks.json")) if path.is_dir() else [path]
    out: list[dict[str, Any]] = []
    for f in files:
        out.extend(json.loads(f.read_text(encoding="utf-8")))
    return out


def replay_tau2_task(tau2: Mapping[str, Any], universe: str | Path | None = None) -> Reward:
    """Play a tau2 task's ``evaluation_criteria.actions`` in a fresh episode of the scaleenv task with
    the same id, tell the user its ``communicate_info``, and return the reward."""
    source = task_source(universe)
    task = source.task(str(tau2["id"]))
    criteria = tau2.get("evaluation_criteria") or {}
    ep = source.episode(task)
    try:
        for action in criteria.get("actions") or []:
            ep.call_tool(action["name"], dict(action.get("arguments") or {}))
        info = criteria.get("communicate_info") or []
        if info:
            ep.say(" ".join(f"The {f.name} is {v}." for f, v in zip(task.answer_facts, info, strict=False))
                   if len(info) == len(task.answer_facts) else " ".join(info))
        return ep.evaluate()
    finally:
        ep.close()


# ---------------------------------------------------------------------------- results


def _tau2_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        base = {"turn_idx": len(out), "timestamp": None}
        if role == "assistant":
            calls = []
            for i, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args else {}
                    except ValueError:
                        args = {"_raw": args}
                calls.append({"id": tc.get("id") or f"call_{i}", "name": fn.get("name"), "arguments": args or {},
                              "requestor": "assistant"})
            out.append({"role": "assistant", "content": m.get("content"), "tool_calls": calls or None,
                        "cost": None, "usage": None, "raw_data": None, **base})
        elif role == "user":
            out.append({"role": "user", "content": m.get("content"), "tool_calls": None, "cost": None,
                        "usage": None, "raw_data": None, **base})
        elif role == "tool":
            content = m.get("content")
            try:
                err = isinstance(content, str) and "error" in json.loads(content)
            except (ValueError, TypeError):
                err = False
            out.append({"id": m.get("tool_call_id"), "role": "tool", "content": content, "requestor": "assistant",
                        "error": bool(err), **base})
    return out


def _agent_text(messages: list[dict[str, Any]]) -> str:
    from scaleenv.integrations.session import USER_TOOL

    parts = []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        if isinstance(m.get("content"), str):
            parts.append(m["content"])
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            if fn.get("name") == USER_TOOL:
                with contextlib.suppress(ValueError, AttributeError):
                    parts.append(str(json.loads(fn.get("arguments") or "{}").get("message", "")))
    return "\n".join(parts)


def _action_checks(gold: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    made = [c for m in _tau2_messages(messages) if m["role"] == "assistant" for c in (m["tool_calls"] or [])]
    checks = []
    for a in gold:
        ok = any(c["name"] == a["name"] and isinstance(c["arguments"], dict)
                 and all(a["arguments"].get(k) == v for k, v in c["arguments"].items()) for c in made)
        checks.append({"action": a, "action_match": ok, "action_reward": 1.0 if ok else 0.0, "tool_type": None})
    return checks


def simulation_run(record: Mapping[str, Any], tau2: Mapping[str, Any], task: Task) -> dict[str, Any]:
    """One rollout trajectory record as a tau2 ``SimulationRun``."""
    from scaleenv.reward.facts import fact_stated

    reward = record.get("reward") or {}
    comps = reward.get("components") or {}
    messages = list(record.get("messages") or [])
    text = _agent_text(messages)
    criteria = tau2["evaluation_criteria"]
    comm = [{"info": str(v), "met": fact_stated(f, text), "justification": f"answer fact {f.name!r}"}
            for f, v in zip(task.answer_facts, criteria["communicate_info"], strict=False)]
    db = float(comps.get("state_match", 0.0))
    breakdown = {"DB": db}
    if "COMMUNICATE" in criteria["reward_basis"]:
        breakdown["COMMUNICATE"] = 1.0 if all(c["met"] for c in comm) else 0.0
    duration = float((record.get("timings") or {}).get("total_s") or 0.0)
    termination = TERMINATION.get(str(record.get("termination")), "agent_error")
    if termination == "agent_error" and str(record.get("error") or "").startswith("user"):
        termination = "user_error"
    now = dt.datetime.now(dt.UTC)
    return {
        "id": str(record.get("id") or f"{record['task_id']}#{record.get('trial', 0)}"),
        "task_id": record["task_id"],
        "timestamp": now.isoformat(),
        "start_time": (now - dt.timedelta(seconds=duration)).isoformat(),
        "end_time": now.isoformat(),
        "duration": duration,
        "termination_reason": termination,
        "agent_cost": None,
        "user_cost": None,
        "reward_info": {
            "reward": float(reward.get("score", 0.0)),
            "db_check": {"db_match": db == 1.0, "db_reward": db},
            "env_assertions": None,
            "action_checks": _action_checks(criteria["actions"], messages),
            "nl_assertions": None,
            "communicate_checks": comm,
            "reward_basis": criteria["reward_basis"],
            "reward_breakdown": breakdown,
            "info": {"scaleenv_components": comps, "diff": (reward.get("diff") or [])[:10],
                     "error": record.get("error")},
        },
        "messages": _tau2_messages(messages),
        "trial": record.get("trial"),
        "seed": record.get("seed"),
        "mode": "half_duplex",
        "info": {"usage": record.get("usage") or {}, "steps": record.get("steps"),
                 "tool_calls": record.get("tool_calls"), "tool_errors": record.get("tool_errors")},
    }


def tau2_results(records: Iterable[Mapping[str, Any]], universe: str | Path | None = None, *,
                 settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Rollout trajectory records (``scaleenv rollout``'s trajectories JSONL) as tau2's ``Results``."""
    from scaleenv import __version__

    source = task_source(universe)
    records = list(records)
    settings = dict(settings or {})
    tasks: dict[str, dict[str, Any]] = {}
    sims = []
    for rec in records:
        task = source.task(str(rec["task_id"]))
        if task.id not in tasks:
            tasks[task.id] = tau2_task(source, task)
        sims.append(simulation_run(rec, tasks[task.id], task))
    first = records[0] if records else {}
    domains = sorted({t.split("/")[0] for t in tasks}) or list(source.universe.domains)
    agent = settings.get("agent", first.get("agent"))
    user = settings.get("user", first.get("user"))

    def who(impl: object) -> dict[str, Any]:
        llm = str(impl).partition(":")[2] if isinstance(impl, str) and impl.startswith("openai:") else None
        return {"implementation": impl or "none", "llm": llm, "llm_args": None}

    return {
        "timestamp": dt.datetime.now(dt.UTC).isoformat(),
        "info": {
            "git_commit": f"scaleenv-{__version__}",
            "num_trials": int(settings.get("trials") or (max((r.get("trial", 0) for r in records), default=0) + 1)),
            "max_steps": int(settings.get("max_turns") or 30),
            "max_errors": int(settings.get("max_errors") or 10),
            "user_info": {**who(user), "global_simulation_guidelines": None},
            "agent_info": who(agent),
            "environment_info": {"domain_name": ",".join(domains), "policy": "", "tool_defs": None},
            "seed": settings.get("seed", first.get("seed")),
        },
        "tasks": list(tasks.values()),
        "simulations": sims,
    }


def write_tau2_results(trajectories: str | Path, out: str | Path, universe: str | Path | None = None,
                       settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Convert a rollout's trajectories JSONL into a tau2 ``results.json`` at ``out``."""
    from scaleenv.utils.fs import atomic_write_text

    lines = Path(trajectories).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    results = tau2_results(records, universe, settings=settings)
    atomic_write_text(Path(out), json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n")
    return results
