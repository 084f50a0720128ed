"""relay9's reader (municipal waste collection, 49 requests, 0 repairs, 31/31 tools, 4/4 tasks):
two rules of the prompts that contradicted each other, now said once and the same way."""

from __future__ import annotations

from pathlib import Path

import scaleenv.synth.llm as llm_pkg

PROMPTS = Path(llm_pkg.__file__).parent / "prompts"


def test_a_period_whose_end_a_state_change_sets_is_named_after_the_state_in_both_prompts():
    """The tool-schema prompt said a period keeps the pair start_date/end_date; the database prompt
    said a lifecycle date is named after its state: a subscription's end is both."""
    schema = (PROMPTS / "tool_schema.txt").read_text()
    database = (PROMPTS / "database.txt").read_text()
    assert "is no such pair: it is named" in schema and "cancelled_on" in schema
    assert "name it after\n    its state" in database or "name it after its state" in database.replace("\n   ", "")
    # a record no tool makes may be named in a precondition without a tool
    assert "A record that no tool creates" in schema


def test_the_instruction_prompt_allows_withheld_identity_facts_only_where_withholding_is_allowed():
    """"withheld: [] (the customer keeps nothing back)" stood beside "Such a fact may be withheld"."""
    text = (PROMPTS / "instruction.txt").read_text()
    assert "Such a fact may be withheld" not in text
    assert 'Where\n  "withheld" above allows facts' in text
