"""What an LLM playing the user is told: persona, goals, the facts it may share, and how it behaves
(one request at a time, a pushback, a slip). The scripted user needs none of it."""

from __future__ import annotations

from scaleenv.env.language import spoken
from scaleenv.formats.task import Task, UserProfile
from scaleenv.formats.trajectory import STOP

DEFAULT_USER_PROMPT = (
    "You are playing a user who contacts a customer-service agent. Stay in character.\n"
    "{persona}\n"
    "Your goal (the agent does not know it; state it in your own words, one request at a time if there are "
    "several):\n{goals}\n"
    "Facts you know and may share: {known}\n"
    "Facts you know but share ONLY if the agent asks for them: {withheld}\n"
    "Rules: write only your next message to the agent, briefly and in the first person. Never invent facts you "
    "were not given; if asked for something you don't know, say you don't know. Say no to anything the agent "
    "offers that you did not ask for (another record, another change, something instead). When all your goals are done, "
    "or the agent cannot help further, end your message with " + STOP + "."
)
PUSHBACK_PROMPT = ("\nThe first time the agent says it cannot do something you asked for, do not accept it at once: "
                   "say this (in your own words) and wait for its answer: \"{pushback}\". Accept a second no.")
"""Added to the LLM user's prompt when its profile presses before accepting a refusal."""
GRADUAL_PROMPT = ("\nSay your requests one at a time, in the order listed: begin with the first only, and bring up the "
                  "next only once the agent has dealt with the one before (done it, answered it, or told you it "
                  "cannot). Do not mention that more requests are coming.")
"""Added to the LLM user's prompt when its profile says its requests one at a time."""
SLIP_PROMPT = ("You make one slip: when you first make this request, \"{goal}\", you give {said} where you mean {meant}. "
               "The first time the agent names {said} back to you (to confirm, or to tell you it cannot), say that "
               "was your mistake and give {meant}, and nothing else in that message. Do not mention it before.")
"""Told to an LLM user (its prompt, the tau2 export) whose profile gives a wrong id at first (its goals list the right one)."""
GREETING = "Hi! How can I help you today?"


def slip_instruction(profile: UserProfile) -> str:
    """What an LLM user is told of its slip (:data:`SLIP_PROMPT` filled in); empty when it has none."""
    slip = profile.slip
    if slip is None or slip.goal >= len(profile.goals):
        return ""
    return SLIP_PROMPT.replace("{said}", slip.said).replace("{meant}", slip.meant).replace("{goal}", profile.goals[slip.goal])


def user_prompt(task: Task, template: str | None = None) -> str:
    profile = task.user_profile
    known = dict(profile.known)
    withheld = [w for w in profile.withheld if w in known]
    shown = "; ".join(f"{k}: {spoken(v)}" for k, v in sorted(known.items()) if k not in withheld) or "none"
    hidden = "; ".join(f"{k}: {spoken(known[k])}" for k in withheld) or "none"
    goals = "\n".join(f"- {g}" for g in (profile.goals or [task.instruction]))
    text = template or DEFAULT_USER_PROMPT
    for key, val in (("{persona}", profile.persona), ("{goals}", goals), ("{known}", shown),
                     ("{withheld}", hidden), ("{instruction}", task.instruction)):
        text = text.replace(key, val)
    if profile.gradual:
        text += GRADUAL_PROMPT
    slip = slip_instruction(profile)
    if slip:
        text += "\n" + slip
    if profile.pushback and "{pushback}" not in (template or ""):
        text += PUSHBACK_PROMPT.replace("{pushback}", profile.pushback)
    return text.replace("{pushback}", profile.pushback)


