"""LLM language for procedural tasks: ``scaleenv build --llm-language MODEL``.

The procedural back end writes a task's persona and goals from templates ("I'd like to add a new
bill (amount: 156.8, paid: 99.19)."). After a task is accepted, the language agent rewrites them in
natural, varied language; :func:`language_problems` checks the rewrite and every problem goes back
in a repair prompt. It must

* keep the goal count;
* keep every value the user states: each known, not withheld value that the template persona or
  goals spell out appears, character for character (case and spacing aside);
* hide every withheld fact and every answer the user is to learn (unless the template showed it);
* invent no id-like code the template does not contain, and keep the persona's name.

A rewrite that never passes keeps the template (``verification["language"]["status"] ==
"template"``). The instruction is recomposed from the new persona and goals plus the template's
"Facts you know ..." tail, so what the user knows is unchanged. Answers come through the shared LLM
session: cached (a rerun or ``--resume`` is free), accounted per role and task in the domain's
``tokens.json``, several requests in flight at once.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from scaleenv.formats.task import Task
from scaleenv.llm.base import LLMError, LLMOutputError
from scaleenv.llm.session import Scoped
from scaleenv.synth.llm.prompts import render

_ID_LIKE = re.compile(r"\b[A-Z][A-Z0-9]{1,5}-\d{3,}\b")
_TAILS = (" Facts you know:", " Only reveal ")


def _norm(v: object) -> str:
    return re.sub(r"\s+", " ", str(v)).strip().lower()


def _value_text(v: object) -> str | None:
    """How a fact's value is spelled in text, or None for values not worth matching (booleans, empties)."""
    if v is None or isinstance(v, bool | dict | list):
        return None
    text = _norm(v)
    return text or None


def _template_text(task: Task) -> str:
    prof = task.user_profile
    return _norm(" ".join([prof.persona, *map(str, prof.goals)]))


def facts_of(task: Task) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(stated, withheld, answers): fact name -> value text. ``stated`` holds the known, not withheld
    facts the template persona or goals spell out; ``withheld`` and ``answers`` the values that the
    template keeps out of them."""
    prof = task.user_profile
    known = dict(prof.known)
    held = set(prof.withheld)
    said = _template_text(task)
    stated, withheld = {}, {}
    for k, v in known.items():
        text = _value_text(v)
        if text is None:
            continue
        if k in held:
            if text not in said and len(text) >= 3:
                withheld[k] = text
        elif text in said:
            stated[k] = text
    answers = {}
    for f in task.answer_facts:
        text = _value_text(f.value)
        if text is not None and len(text) >= 3 and text not in said:
            answers[f.name] = text
    return stated, withheld, answers


def language_problems(task: Task, obj: object) -> list[str]:
    """What is wrong with a rewrite ``{"persona": str, "goals": [str]}`` of ``task``'s user side."""
    prof = task.user_profile
    n = len(prof.goals)
    if not isinstance(obj, dict) or not isinstance(obj.get("persona"), str) or not isinstance(obj.get("goals"), list):
        return ['reply with {"persona": "You are ...", "goals": ["...", ...]}']
    goals = obj["goals"]
    problems = []
    if len(goals) != n:
        problems.append(f"there must be exactly {n} goals, in the template's order; there are {len(goals)}")
    if not all(isinstance(g, str) and g.strip() for g in goals):
        problems.append("every goal must be a non-empty string")
        return problems
    text = _norm(" ".join([obj["persona"], *goals]))
    stated, withheld, answers = facts_of(task)
    missing = [f"{k}: {v}" for k, v in stated.items() if v not in text]
    if missing:
        problems.append(f"these values must appear exactly as written: {missing[:8]}")
    shown = [f"{k}: {v}" for k, v in withheld.items() if v in text]
    if shown:
        problems.append(f"these facts are withheld until the agent asks; leave them out: {shown[:8]}")
    leaked = [f"{k}: {v}" for k, v in answers.items() if v in text]
    if leaked:
        problems.append(f"the customer wants to learn these; do not state them: {leaked[:8]}")
    template = " ".join([prof.persona, *map(str, prof.goals), task.instruction])
    invented = sorted(set(_ID_LIKE.findall(" ".join([obj["persona"], *goals]))) - set(_ID_LIKE.findall(template)))
    if invented:
        problems.append(f"do not mention ids the template does not show: {invented[:5]}")
    name = re.match(r"You are (?:responsible for the \w+ )?(.+?)\.?$", prof.persona.strip())
    if name and _norm(name.group(1)) not in _norm(obj["persona"]):
        problems.append(f"the persona must keep the name {name.group(1)!r}")
    if not obj["persona"].strip().lower().startswith("you "):
        problems.append('the persona is in the second person: "You are ..."')
    return problems


def apply_language(task: Task, persona: str, goals: list[str], record: dict[str, Any]) -> Task:
    """``task`` with the new persona and goals; the instruction keeps its facts tail."""
    cut = min((i for i in (task.instruction.find(t) for t in _TAILS) if i >= 0), default=len(task.instruction))
    instruction = " ".join([persona.strip(), *(g.strip() for g in goals)]) + task.instruction[cut:]
    profile = task.user_profile.model_copy(update={"persona": persona.strip(), "goals": [g.strip() for g in goals]})
    return task.model_copy(update={"instruction": instruction, "user_profile": profile,
                                   "verification": task.verification.model_copy(update={"language": record})})


def rewrite_task(task: Task, ask: Scoped, title: str) -> Task:
    """The task in the language agent's words, or (after repair rounds) the template, marked as such."""
    if task.verification.language is not None:
        return task  # rewritten before (a resumed build)
    prof = task.user_profile
    goals = [str(g) for g in prof.goals]
    if not goals:
        return task
    stated, withheld, answers = facts_of(task)
    msgs = render("language", title=title, task_number=task.attempt, persona=prof.persona or "-",
                  goals="\n".join(f"{i}. {g}" for i, g in enumerate(goals, 1)),
                  stated="\n".join(f"- {k}: {v}" for k, v in stated.items()) or "- none",
                  withheld="; ".join(f"{k}: {v}" for k, v in withheld.items()) or "none",
                  answers="; ".join(f"{k}: {v}" for k, v in answers.items()) or "none", n_goals=len(goals))
    model = ask.config.model_for("language")
    try:
        obj = ask.for_task(task.id).json("language", msgs, validate=lambda o: language_problems(task, o))
    except LLMOutputError as e:
        record = {"model": model, "status": "template", "reason": "; ".join(e.problems[:3])[:300]}
        return task.model_copy(update={"verification": task.verification.model_copy(update={"language": record})})
    return apply_language(task, obj["persona"], obj["goals"], {"model": model, "status": "rewritten"})


def rewrite_tasks(root: Path, domain: str, tasks: list[Task], llm: dict[str, Any]) -> list[Task]:
    """Rewrite the accepted ``tasks`` of ``domain`` (in order, several at once); update
    ``tasks/<domain>.jsonl`` and ``domains/<domain>/tokens.json``. An endpoint that fails for good
    stops the build (the answers so far are cached: ``--resume`` continues)."""
    from scaleenv.llm.accounting import merge_domain_summaries
    from scaleenv.synth.llm.build import make_session
    from scaleenv.universe import read_json, write_json
    from scaleenv.utils.fs import atomic_write_text

    todo = [t for t in tasks if t.verification.language is None]
    if not todo:
        return tasks
    session = make_session(llm, root)
    ask = session.scoped(domain=domain)
    title = domain.replace("_", " ").title()
    workers = max(1, int(session.config.concurrency))
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="language") as pool:
            out = list(pool.map(lambda t: rewrite_task(t, ask, title), tasks))
    except LLMError as e:
        raise LLMError(f"--llm-language: {e}; the tasks are kept: continue with --resume "
                       "(answers already received come from the cache)") from None
    atomic_write_text(root / "tasks" / f"{domain}.jsonl", "".join(t.to_jsonl() + "\n" for t in out))
    tokens = root / "domains" / domain / "tokens.json"
    summary = merge_domain_summaries(read_json(tokens) if tokens.exists() else {}, session.ledger.domain_summary(domain))
    statuses = [t.verification.language["status"] for t in out if t.verification.language is not None]
    summary["language"] = {"model": session.config.model_for("language"), "tasks": len(statuses),
                           "rewritten": statuses.count("rewritten"), "template": statuses.count("template")}
    write_json(tokens, summary)
    return out
