"""The agent's default system prompt, per mode and user channel."""

from __future__ import annotations

from scaleenv.formats.domain import DomainSpec
from scaleenv.formats.task import Task

DEFAULT_SYSTEM_PROMPT = (
    "You are a customer-service agent for the {domain} service: {description}\n"
    "Help the user by calling the tools. Look up what you need with the tools and ask the user for any "
    "detail you are missing; never invent identifiers or values. Make only the changes the user asks for. "
    "When the request is done, tell the user the outcome, including every value they asked for."
)
SOLO_SUFFIX = (
    "\nThere is no one to talk to: the first message is the whole request. Complete it with the tools, then "
    "reply with a final message (no tool calls) that states the outcome and every value asked for."
)
TOOL_ONLY_SUFFIX = (
    "\nYou talk to the user only through the send_message_to_user tool, which returns their reply: use it to ask "
    "for missing details and to report the outcome, including every value the user asked for."
)
SOLO_TOOL_SUFFIX = (
    "\nThere is no one to ask: the first message is the whole request. Complete it with the tools, then report "
    "the outcome, including every value asked for, with the send_message_to_user tool."
)


CLOCK_NOTE = "\nThe current date and time is {now}."

POLICY_HEADER = (
    "\n\nPolicy of the {domain} service (follow it; the tools do not enforce every rule):\n{rules}\n"
    "When a rule forbids what the user asks, do not do it: tell the user you cannot, and why (name the rule's "
    "condition). Each rule applies at the moment a change is made, to the records as they stand then."
)
STAFF_NOTE = ("\nA member of staff who says they look after a record (not a customer) has no customer"
              " account to verify: the identity rule does not apply to them.")
"""Said with an identity rule: staff personas are exempt from it (the procedure check agrees)."""
SOLO_POLICY_NOTE = "\nIn this session there is no one to ask: a rule that needs the user's yes or identity is met by the request itself."


def policy_section(spec: DomainSpec | None, mode: str = "conversational") -> str:
    """The domain's policy as the agent is told it (empty when the domain has none)."""
    if spec is None or spec.policy is None or not spec.policy.rules:
        return ""
    text = POLICY_HEADER.replace("{domain}", spec.name.replace("_", " ")).replace("{rules}", spec.policy.document())
    if spec.policy.of_kind("identity"):
        text += STAFF_NOTE
    return text + (SOLO_POLICY_NOTE if mode == "solo" else "")


def system_prompt(task: Task, spec: DomainSpec | None, mode: str = "conversational", *, user_tool: bool = True) -> str:
    """The agent's system prompt (the rollout agents' default, plus how to reach the user)."""
    domain = task.domain.replace("_", " ")
    description = (spec.description if spec is not None and spec.description else domain)
    text = DEFAULT_SYSTEM_PROMPT.replace("{domain}", domain).replace("{description}", description)
    if spec is not None:  # rules such as "within 45 days" need today's date, which no tool tells
        text += CLOCK_NOTE.replace("{now}", spec.clock.replace("T", " ")[:16])
    text += policy_section(spec, mode)
    if user_tool:
        return text + (SOLO_TOOL_SUFFIX if mode == "solo" else TOOL_ONLY_SUFFIX)
    return text + (SOLO_SUFFIX if mode == "solo" else "")
