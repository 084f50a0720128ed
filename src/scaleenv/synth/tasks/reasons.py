"""Why a task attempt was rejected: one typed value per reason (counted in ``tasks_report.json``
and written to ``attempts.jsonl`` as its string)."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """A rejection reason of Phase 2 (both back ends); the value is the string the reports count."""

    # the initial state: rows the chain acts on, look-alikes
    MISSING_ROW = "missing_row"
    CLONE_CONFLICT = "clone_conflict"
    CLONE_BREAKS_PRECONDITIONS = "clone_breaks_preconditions"
    INCOHERENT_WORLD = "incoherent_world"
    DISTRACTOR_INTERFERENCE = "distractor_interference"
    # goals and the seed chain
    NO_GOAL_TOOLS = "no_goal_tools"
    NO_SATISFYING_ARGS = "no_satisfying_args"
    UNSTATED_ARGUMENT = "unstated_argument"
    EXEMPT_INPUT = "exempt_input"
    RESOLUTION_FAILED = "resolution_failed"
    GOAL_FAILED = "goal_failed"
    NOOP_SUBGOAL = "noop_subgoal"
    UNOBSERVABLE_SUBGOAL = "unobservable_subgoal"
    CHAIN_TOO_SHORT = "chain_too_short"
    CHAIN_TOO_LONG = "chain_too_long"
    # verification and expansion
    NO_EFFECT = "no_effect"
    LANGUAGE_DEFECT = "language_defect"
    VERIFICATION_FAILED = "verification_failed"
    EXPANSION_CHANGED_GOLD = "expansion_changed_gold"
    FOREIGN_ACTOR = "foreign_actor"
    """A write the user asks for in another person's name (an actor argument naming someone else)."""
    UNKNOWABLE_ID = "unknowable_id"
    """A request names by its id a record the request itself creates ("use 60 points on invoice INV-0062",
    an invoice made earlier in the same request): the user cannot know that id, and which record gets it
    depends on the order of the creations."""
    WASTED_REQUEST = "wasted_request"
    """A record changed and then ended by the same request (pay towards a booking, then cancel it)."""
    MISSING_TOOL = "missing_tool"
    """A tool the task must hold (the branch a conditional request did not take) did not join its tools."""
    NO_SELF_FINDER = "no_self_finder"
    """The user speaks for itself, but the task's tools (or its profile) give no way to find the
    user's own record by what the user knows, although the domain has a finder for it."""
    # the families that single records out by a criterion (computed, description, bulk, programmatic, long)
    NO_SELECTION = "no_selection"
    """No criterion singles the target out among the user's own records (or the lister does not show it)."""
    SELECTION_NOT_UNIQUE = "selection_not_unique"
    """The world as built (after mending) does not single the target out by the criterion any more."""
    BULK_TARGET_FAILED = "bulk_target_failed"
    """The goal does not apply to (or change) every record the condition covers."""
    PROGRAM_MISMATCH = "program_mismatch"
    """The query program's result differs from what the gold chain does or finds."""
    ORDER_DEPENDENT = "order_dependent"
    """A record the request creates also meets its selection (a new ticket among "every normal ticket"):
    which records change would depend on the order of the writes."""
    HORIZON_TOO_SHORT = "horizon_too_short"
    """A long-horizon attempt ended with fewer calls than the family asks for."""
    # the integrity gates (``gate_`` + the failing gate)
    GATE_GOLD_NOT_1 = "gate_gold_not_1"
    GATE_GOLD_CONVERSATIONAL_NOT_1 = "gate_gold_conversational_not_1"
    """The oracle talking to the scripted user does not score 1 (the user or the procedure misjudges it)."""
    GATE_GOLD_STYLED_NOT_1 = "gate_gold_styled_not_1"
    """The oracle talking to the scripted user in another style does not score 1 (the style gate)."""
    GATE_NOOP_NOT_0 = "gate_noop_not_0"
    GATE_PARROT_NOT_0 = "gate_parrot_not_0"
    GATE_SPRAY_NOT_0 = "gate_spray_not_0"
    GATE_RANDOM_NOT_0 = "gate_random_not_0"
    GATE_HACK_NOT_0 = "gate_hack_not_0"
    GATE_READ_DUMP_NOT_0 = "gate_read_dump_not_0"
    GATE_SWAP_NOT_0 = "gate_swap_not_0"
    GATE_NAIVE_NOT_0 = "gate_naive_not_0"
    GATE_STRICT_NOT_0 = "gate_strict_not_0"
    GATE_REORDERED_NOT_0 = "gate_reordered_not_0"
    # build-level and LLM back end
    DUPLICATE = "duplicate"
    LLM_OUTPUT = "llm_output"
    SYNTHESIS_ERROR = "synthesis_error"
    CHAIN_UNUSABLE = "chain_unusable"
    STATE_UNUSABLE = "state_unusable"
    STATE_NOT_EXECUTABLE = "state_not_executable"
    INSTRUCTION_UNGROUNDED = "instruction_ungrounded"

    # the policy families (refusal, partial, conditional)
    BREAKS_POLICY = "breaks_policy"
    NO_WAIVED_CALL = "no_waived_call"
    """No call that a rule covers and its exception allows (the ``waived`` family)."""
    NO_ENABLING_CHANGE = "no_enabling_change"
    """No change on the task's records after which the forbidden one is allowed (the ``enabled`` family)."""
    INSTRUCTION_SHAPE = "instruction_shape"
    NO_ALLOWED_GOAL = "no_allowed_goal"
    NO_ALTERNATIVE_BRANCH = "no_alternative_branch"
    NO_CONDITION_COLUMN = "no_condition_column"
    NO_POLICY_VIOLATION = "no_policy_violation"
    POLICY_NOT_BROKEN = "policy_not_broken"
    SEVERAL_RULES_BROKEN = "several_rules_broken"
    """The refused request breaks another rule too, so its reason is not one."""
    REFUSED_CALL_FAILS = "refused_call_fails"
    RULE_UNVERIFIABLE = "rule_unverifiable"
    TWO_REFUSALS = "two_refusals"
    CONTRADICTORY_REQUESTS = "contradictory_requests"
    """A refused request and an allowed one are two moves for the same record (resume it, cancel it)."""

    @classmethod
    def gate(cls, failure: str) -> Reason:
        """The reason for a failed gate (``failure`` as ``GateResult.failures`` names it: ``noop_not_0``)."""
        return cls("gate_" + failure)
