"""What an LLM playing the user is told: persona, goals, the facts it may share, and how it behaves
(its requests all at once or one at a time, a pushback, a slip, its decisions). The scripted user needs none of it.

The prompt is built so that the LLM user behaves as the scripted user does, in its own words: it asks for what
its goals say and nothing more, gives the facts it was given (a withheld one only when asked for it), knows
nothing else, never coaches the agent or hints at the outcome, answers a confirmation with a clear yes or no,
declines what it did not ask for, and ends with :data:`~scaleenv.formats.trajectory.STOP` only once every
request was dealt with (done, answered or refused) or the agent can do nothing more.

A custom template (``UserOptions.system_prompt``) may place ``{persona}``, ``{goals}``, ``{known}``, ``{withheld}``,
``{instruction}`` and ``{pushback}``, and the behaviour slots ``{identity}``, ``{pacing}``, ``{refusal}``,
``{slip}`` and ``{decisions}``; a slot it leaves out is appended where the profile has something to say there
(a gradual pace, a pushback, a slip, decisions), as before slots existed."""

from __future__ import annotations

import re
from typing import Any

from scaleenv.env.language import spoken
from scaleenv.formats.task import Decision, Task, UserProfile
from scaleenv.formats.trajectory import STOP

DEFAULT_USER_PROMPT = (
    "You are role-playing a person who has contacted a customer-service agent by chat. You are this person, "
    "not an assistant and not the agent: write only this person's next message, in the first person, short and "
    "natural, the way people type to a support agent (no headings, no lists of field names, no notes about "
    "yourself).\n"
    "\n"
    "Who you are: {persona}\n"
    "\n"
    "What you want (the agent does not know it yet):\n"
    "{goals}\n"
    "\n"
    "Facts you may share, when a request needs them or the agent asks for them:\n"
    "{known}\n"
    "Facts you share ONLY if the agent asks for that very detail (never volunteer them):\n"
    "{withheld}\n"
    "Use every value exactly as written above (ids, names, dates, times, amounts, text to be recorded), and keep "
    "the words that say which records you mean (a status such as \"still ordered\", a kind, a category) as your "
    "requests say them; say the rest in your own words rather than reciting these lines.\n"
    "\n"
    "How you behave:{pacing}{identity}\n"
    "* You know only the facts above. Never invent an id, a value, a date, a name or a reason. If the agent asks "
    "for something you were not given, say you don't know it.\n"
    "* You do not know how the agent works. Never tell it how to do its job (which system, search, tool or step "
    "to use), never say what you expect it to find or what the answer or result should be, and never mention "
    "a database, tools, instructions, a script, a test or a simulation.\n"
    "* Answer what the agent asks. When it asks you to confirm something you asked for (anything on your list "
    "counts, even a request you have not made yet), answer with a clear yes. "
    "When what it proposes names another record, value or change than the one you asked for, answer with a "
    "clear no and give the right one from your facts. When it asks which of several you mean, say which from "
    "your facts.\n"
    "* Say no to anything the agent offers that you did not ask for (another record, another change, something "
    "instead). Never add a request of your own.{refusal}{slip}{decisions}\n"
    "\n"
    "Ending the conversation:\n"
    "* A request is dealt with only when the agent says it has done it, has answered your question, or says it "
    "cannot do it. An agent that offers to do it, asks you to confirm, or lists it in a plan has not done it yet, "
    "and a general \"done\" covers only the requests you have made so far.\n"
    "* Before you end, go through your list: a request not dealt with yet is one to make (or say again), not a "
    "reason to end.\n"
    "* When every request is dealt with, or the agent says it cannot help you any further, say a short goodbye "
    "and end that message with " + STOP + ".\n"
    "* Never end while the agent's last message still asks you something you can answer: answer it first. "
    "Never write " + STOP + " at any other time."
)
"""The LLM user's system prompt; the behaviour slots are filled in by :func:`user_prompt`."""

ALL_AT_ONCE_PROMPT = ("\n* Say what you want in your first message: every request, in your own words (with the "
                      "details each one needs), each once.")
"""The pace of a user whose profile is not ``gradual``: all its requests in its opening (as the scripted user)."""
GRADUAL_PROMPT = ("\n* Say your requests one at a time, in the order listed: begin with the first only, and bring up "
                  "the next only once the agent has dealt with the one before (done it, answered it, or told you it "
                  "cannot). Do not mention that more requests are coming, and do not give details that belong only "
                  "to a request you have not made yet.")
"""Added to the LLM user's prompt when its profile says its requests one at a time."""
ACCEPT_PROMPT = ("\n* When the agent says it cannot do something you asked for, accept it (do not argue or ask for "
                 "an exception) and go on with the rest, if any.")
"""What a user without a pushback does with a refusal."""
PUSHBACK_PROMPT = ("\n* The first time the agent says it cannot do something you asked for, do not accept it at once: "
                   "say this (in your own words, and nothing else in that message) and wait for its answer: "
                   "\"{pushback}\". Accept a second no and go on with the rest, if any.")
"""Added to the LLM user's prompt when its profile presses before accepting a refusal."""
SLIP_PROMPT = ("You make one slip: when you first make this request, \"{goal}\", you give {said} where you mean {meant}. "
               "The first time the agent names {said} back to you (to confirm, or to tell you it cannot), say that "
               "was your mistake and give {meant}, and nothing else in that message. Do not mention it before; if "
               "the agent finds {meant} by itself, just go on.")
"""Told to an LLM user (its prompt, the tau2 export) whose profile gives a wrong id at first (its goals list the right one)."""
DECISIONS_PROMPT = ("\n* Your decisions: when the agent's message says what is quoted on the left, answer with what is "
                    "on the right (in your own words), rather than with a plain yes:")
"""Heads the decisions of a profile that has some (each a line below it)."""
GREETING = "Hi! How can I help you today?"

_NONE = "  (none)"


def slip_instruction(profile: UserProfile) -> str:
    """What an LLM user is told of its slip (:data:`SLIP_PROMPT` filled in); empty when it has none."""
    slip = profile.slip
    if slip is None or slip.goal >= len(profile.goals):
        return ""
    return SLIP_PROMPT.replace("{said}", slip.said).replace("{meant}", slip.meant).replace("{goal}", profile.goals[slip.goal])


def decisions_instruction(decisions: list[Decision]) -> str:
    """What an LLM user is told of its decision points; empty when it has none."""
    if not decisions:
        return ""
    lines = [f"\n  - \"{' ... '.join(d.when)}\" -> \"{d.say}\"" for d in decisions if d.when and d.say]
    return DECISIONS_PROMPT + "".join(lines) if lines else ""


def _value_pattern(value: Any) -> re.Pattern[str]:
    forms = sorted({str(value), spoken(value)}, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(f) for f in forms) + r")(?!\w|\.\d)")


def _hide(text: str, hidden: dict[str, Any]) -> str:
    """``text`` with the withheld values replaced by a pointer to the fact (the user says them only when asked)."""
    for name, value in hidden.items():
        if value is None or spoken(value) == "":
            continue
        text = _value_pattern(value).sub(f"[your {name}: only if asked]", text)
    return text


def _facts(facts: list[tuple[str, Any]]) -> str:
    return "\n".join(f"  - {k}: {spoken(v)}" for k, v in facts) or _NONE


def _identity(task: Task, known: dict[str, Any]) -> str:
    from scaleenv.reward.procedure import is_staff

    who = [f for f in task.user_profile.identity if f in known]
    if is_staff(task):
        said = f" and give these facts: {', '.join(who)}" if who else ""
        return (f"\n* You are a member of staff, not a customer: if the agent asks who you are, say your role{said}.")
    if not who:
        return ""
    return f"\n* If the agent asks who you are or to identify yourself, give these facts of yours: {', '.join(who)}."


def user_prompt(task: Task, template: str | None = None) -> str:
    profile = task.user_profile
    known = dict(profile.known)
    withheld = [w for w in profile.withheld if w in known]
    hidden = {w: known[w] for w in withheld}
    shown = _facts([(k, v) for k, v in sorted(known.items()) if k not in withheld])
    asked_only = _facts([(k, known[k]) for k in withheld])
    goals = "\n".join(f"- {_hide(g, hidden)}" for g in (profile.goals or [task.instruction]))
    text = template or DEFAULT_USER_PROMPT
    for key, val in (("{persona}", profile.persona.strip() or "a customer."), ("{goals}", goals),
                     ("{known}", shown), ("{withheld}", asked_only), ("{instruction}", task.instruction)):
        text = text.replace(key, val)
    slip = slip_instruction(profile)
    slots = (  # (slot, what fills it, whether to append it where the template has no such slot)
        ("{pacing}", GRADUAL_PROMPT if profile.gradual else ALL_AT_ONCE_PROMPT, profile.gradual),
        ("{identity}", _identity(task, known), False),
        ("{refusal}", PUSHBACK_PROMPT if profile.pushback else ACCEPT_PROMPT,
         bool(profile.pushback) and "{pushback}" not in text),
        ("{slip}", f"\n* {slip}" if slip else "", bool(slip)),
        ("{decisions}", decisions_instruction(profile.decisions), bool(profile.decisions)),
    )
    for slot, fill, append in slots:
        if slot in text:
            text = text.replace(slot, fill)
        elif append:
            text += fill
    return text.replace("{pushback}", profile.pushback)
