"""Defects careful players found in round 2 of play (issues 15 and 11): a customer's task that cannot
find the customer by what they know, partial requests that contradict themselves, and stiff or
wrong wording in the conditional, computed and description families."""

from __future__ import annotations

import contextlib
import re

import pytest

from scaleenv.formats.task import Task
from scaleenv.synth.tasks import generate as gen
from scaleenv.synth.tasks.families import generate_task
from scaleenv.synth.tasks.families.partial import PartialBuilder
from scaleenv.synth.tasks.families.selection import measure_words, plural_measure, qualified
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.synth.tasks.identity import finder_defect, finders_for, is_customer, owned_finders, self_finders
from scaleenv.synth.tasks.instruction import drop_stale_age_words, language_defects
from scaleenv.synth.tasks.reasons import Reason
from scaleenv.synth.tasks.validity import contradicting_requests
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World
from synth_helpers import context, family_tasks

TODAY = "2026-06-15"


def _initial(name: str, task: Task) -> bytes:
    ctx = context(name)
    w = World.from_snapshot(ctx.spec, ctx.base)
    apply_patch(w, task.initial_patch)
    snap = w.snapshot()
    w.close()
    return snap


def _tasks(name: str, attempts: range, config: ChainConfig | None = None) -> list[Task]:
    ctx = context(name)
    out = []
    for a in attempts:
        with contextlib.suppress(TaskRejected):
            out.append(generate_task(ctx, 0, a, config))
    return out


# --- 1. the identity rule has a tool ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["stock_trading", "social_media_messaging", "telecom"])
def test_every_customer_task_can_find_the_user_by_what_the_user_knows(name):
    spec = context(name).spec
    tasks = _tasks(name, range(24))
    customers = [t for t in tasks if is_customer(t)]
    assert customers
    for t in customers:
        assert finder_defect(spec, t) is None, (t.id, t.tools, t.user_profile.known)


def test_telecom_finds_the_customer_by_name_and_by_the_phone_number_of_a_line():
    spec = context("telecom").spec
    # seed 0 used to drop the customer search (its only finder was a line's phone number); a search
    # over people is never dropped now
    assert [f.tool for f in self_finders(spec, "customers")] == ["find_customers"]
    owned = owned_finders(spec, "customers")
    assert [(f.tool, f.column, f.via) for f in owned] == [("find_lines", "phone_number", "customer_id")]
    # seed 21's telecom tasks (once a description task: "terminate my line ... register my Galaxy S24"):
    # every customer task holds a finder (whichever attempts happen to be accepted)
    ctx = context("telecom", 21)
    tasks = []
    for attempt in range(40):
        try:
            tasks.append(generate_task(ctx, 21, attempt))
        except gen.TaskRejected:
            continue
    customers = [t for t in tasks if is_customer(t)]
    assert len(customers) >= 3
    for task in customers:
        assert finder_defect(ctx.spec, task) is None
        assert {"find_customers", "find_lines"} & set(task.tools)


def test_the_check_names_a_task_whose_tools_or_profile_lack_the_finder():
    spec = context("stock_trading").spec
    task = next(t for t in _tasks("stock_trading", range(24)) if is_customer(t))
    assert finder_defect(spec, task) is None
    finders = {f.tool for f in finders_for(spec, "accounts")}
    assert finders
    without = task.model_copy(update={"tools": [n for n in task.tools if n not in finders]})
    assert "accounts" in (finder_defect(spec, without) or "")
    staff = task.model_copy(update={"user_profile": task.user_profile.model_copy(
        update={"persona": "You are a staff member looking after the account X."})})
    assert finder_defect(spec, staff.model_copy(update={"tools": without.tools})) is None


def test_a_build_that_loses_the_finder_rejects_the_task(monkeypatch):
    ctx = context("stock_trading")
    finders = {f.tool for f in finders_for(ctx.spec, "accounts")}
    real = gen.expand_tools

    def lose_finders(*a, **k):
        tools, extra = real(*a, **k)
        return [n for n in tools if n not in finders], extra

    monkeypatch.setattr(gen, "expand_tools", lose_finders)
    reasons = []
    for a in range(12):
        try:
            generate_task(ctx, 0, a)
        except TaskRejected as e:
            reasons.append(e.reason)
    assert Reason.NO_SELF_FINDER in reasons


# --- 2. partial requests do not contradict themselves -------------------------------------------------------------

CONTRADICTORY = [6, 70, 84, 102]
"""entertainment_media_query attempts (seed 0, default mix) that were partial tasks asking to resume a
subscription (or pause a profile) and to cancel it."""


def test_partial_tasks_hold_no_two_moves_for_one_record():
    partial = family_tasks("entertainment_media_query", "partial", 8)
    assert len(partial) >= 8
    for t in partial:
        assert contradicting_requests(context("entertainment_media_query").spec, _initial(
            "entertainment_media_query", t), t.gold_chain, t.forbidden) == [], t.user_profile.goals


def test_the_partial_family_avoids_contradictions_at_the_cause(monkeypatch):
    """The attempts that made contradictory tasks now make coherent ones (or other allowed goals), and
    never reach the build-time net."""
    name = "entertainment_media_query"
    spec = context(name).spec
    netted = []
    real = gen.contradicting_requests

    def spy(*a, **k):
        out = real(*a, **k)
        netted.extend(out)
        return out

    monkeypatch.setattr(gen, "contradicting_requests", spy)
    for t in _tasks(name, range(110)):
        if t.family == "partial":
            assert not contradicting_requests(spec, _initial(name, t), t.gold_chain, t.forbidden)
    assert netted == []


def test_without_the_cause_fix_the_detector_finds_the_players_contradictions(monkeypatch):
    name = "entertainment_media_query"
    spec = context(name).spec
    monkeypatch.setattr(PartialBuilder, "contradicts_refused", lambda *a, **k: False)
    monkeypatch.setattr(gen, "contradicting_requests", lambda *a, **k: [])
    found = []
    for t in _tasks(name, range(110), ChainConfig(family_mix={"partial": 1.0})):
        found += contradicting_requests(spec, _initial(name, t), t.gold_chain, t.forbidden)
    # two moves for one state, or an edit of a record the refused call would end (".plan" of a profile
    # whose cancellation is refused)
    assert found and all(" vs refused " in f for f in found) and any(".status" in f for f in found)


def test_a_next_step_is_no_contradiction():
    """A refused call that only applies after the allowed goal (publish once reviewed) is a next step."""
    name = "knowledge_management"
    spec = context(name).spec
    for t in family_tasks(name, "partial", 4):
        for clash in contradicting_requests(spec, _initial(name, t), t.gold_chain, t.forbidden):
            pytest.fail(f"{t.id}: {clash}")


# --- 3. wording -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "kind"), [
    ("My out for delivery order with the highest charged is late, cancel it.", "stiff"),
    ("Cancel every in progress task for sprint SPR-0001.", "stiff"),
    ("My pet with the lowest weight kg is moving to a new home.", "stiff"),
    ("Can you tell me the total size kb of message MSG-0114?", "stiff"),
    ("If my loyalty points is at least 260, please change my phone.", "stiff"),
    ("If the vacancies of job posting JOB-0038 is at least 5, take it down.", "stiff"),
])
def test_language_defects_catch_stiff_attribute_phrases(text, kind):
    assert any(d.startswith(kind + ":") for d in language_defects(text, TODAY)), language_defects(text, TODAY)


@pytest.mark.parametrize("text", [
    "My order that is out for delivery with the highest charge is late, cancel it.",
    "My pet with the lowest weight is moving to a new home.",
    "If my loyalty points are at least 260, please change my phone.",
    "The package is out for delivery today.",
    "I'd like to add a new lesson for my course.",
    "Register my new Galaxy S24 (IMEI 521898520387008, bought 2026-06-01) on that same line.",
])
def test_language_defects_pass_the_mended_phrases(text):
    assert language_defects(text, TODAY) == []


def test_an_age_word_that_a_date_contradicts_is_caught_and_dropped():
    text = "Register my new Galaxy S24 (IMEI 521898520387008, bought 2021-06-10) on that same line."
    assert any(d.startswith("age_word:") for d in language_defects(text, TODAY))
    assert language_defects(text) == []  # without today no date can be judged
    fixed = drop_stale_age_words(text, TODAY)
    assert fixed == "Register my Galaxy S24 (IMEI 521898520387008, bought 2021-06-10) on that same line."
    for old in ["I just bought a router on 2020-01-02; add it.", "Add my brand-new bike (bought 2019-03-01)."]:
        assert language_defects(old, TODAY) and not any(
            d.startswith("age_word:") for d in language_defects(drop_stale_age_words(old, TODAY), TODAY))


def test_attribute_phrases_read_as_a_person_says_them():
    spec = context("food_delivery").spec
    orders = spec.table("orders")
    assert orders is not None
    cols = {c.name: c for c in orders.columns}
    assert measure_words(cols["charged"]) == "charge"
    assert qualified("order", cols["status"], "out_for_delivery") == "order that is out for delivery"
    # "every placed order of mine" read as every order I placed (seed 47): such a state is said as one
    assert qualified("order", cols["status"], "placed") == "order that is still placed"
    assert qualified("order", cols["status"], "delivered") == "delivered order"
    lights = context("smart_home").spec.table("lights")
    assert lights is not None
    power = next(c for c in lights.columns if c.name == "power")
    assert qualified("light", power, "on") == "light that is on"  # play round 24: "Turn every on light off"
    status = next(c for c in context("online_learning").spec.table("submissions").columns if c.name == "status")
    assert qualified("submission", status, "needs_revision") == "submission that needs revision"  # round 25
    pets = context("pet_care").spec.table("pets")
    assert pets is not None
    assert measure_words(next(c for c in pets.columns if c.name == "weight_kg")) == "weight"
    assert plural_measure("loyalty points") and plural_measure("refills left") and not plural_measure("status")


def test_the_players_telecom_descriptions_no_longer_call_an_old_phone_new():
    tasks = []
    for i in range(60):  # the description family names records by what they are ("the phone I bought ...")
        with contextlib.suppress(TaskRejected):
            tasks.append(generate_task(context("telecom"), 0, i, ChainConfig(family_mix={"description": 1.0})))
    old = [t for t in tasks if re.search(r"bought 20(1\d|2[0-4])-", " ".join(t.user_profile.goals))]
    assert old, "no task describes a device bought years before the clock"
    for task in old:
        text = " ".join(task.user_profile.goals)
        assert "my new" not in text and "brand-new" not in text, text
        assert "line with plan Starter and status active" not in text


@pytest.mark.parametrize("family", ["computed", "description", "conditional", "bulk"])
def test_family_goals_have_no_language_defects(family):
    for name in ["pet_care", "project_management", "express_logistics"]:
        spec = context(name).spec
        for t in family_tasks(name, family, 4):
            for g in t.user_profile.goals:
                assert language_defects(g, spec.clock) == [], (t.id, g)


def test_a_referred_sentence_is_quoted_and_a_name_is_not():
    from scaleenv.synth.tasks.families.description import DescriptionBuilder

    ctx = context("social_media_messaging")
    b = DescriptionBuilder(ctx, 0, 0, ChainConfig())
    reports = ctx.spec.table("reports")
    assert reports is not None
    post = next(c for c in reports.columns if c.name == "post_id")
    b.attrs = [post]
    assert b.phrase(reports, {"post_id": "Arrive full speak population goal. Is unfounded"}) == \
        'report with post "Arrive full speak population goal. Is unfounded"'
    assert b.phrase(reports, {"post_id": "Dr. Elizabeth Barron"}) == "report with post Dr. Elizabeth Barron"


def test_every_catalog_domain_keeps_a_finder_of_its_people_on_every_seed():
    """Seeds dropped the only search over a domain's people (food_delivery, fitness_club, job_seeking,
    email_management on some seeds), and couples were searched by partner names that did not count as
    something a person knows (wedding_planning): the identity rule then had no tool to follow it."""
    from scaleenv.synth.procedural.blueprint import catalog
    from scaleenv.synth.procedural.derive import _PERSON_COLUMN, derive_spec
    from scaleenv.synth.tasks.identity import self_finders

    for name, bp in catalog().items():
        people = [e.name for e in bp.entities if any(_PERSON_COLUMN.search(c.name) for c in e.columns)
                  and any(c.search for c in e.columns)]
        for seed in range(6):
            spec = derive_spec(bp, seed)
            for table in people:
                assert self_finders(spec, table), (name, seed, table)


@pytest.mark.parametrize("name", ["online_learning", "pet_care", "retail"])
def test_a_conditional_task_holds_the_tool_of_the_branch_it_did_not_take(name, monkeypatch):
    """online_learning/00004 (seed 31) asked "if the score is at least 10.5, give it a score of 20;
    otherwise send it back", but only the send-back tool was in the task: the tool list told the branch."""
    from scaleenv.synth.tasks.families.conditional import ConditionalBuilder

    seen: list[tuple[str | None, list[str]]] = []
    original = ConditionalBuilder.make_task

    def spy(self, initial_hash, expected_hash, gold_keys, tools, *rest):
        seen.append((self.untaken_tool, list(tools)))
        return original(self, initial_hash, expected_hash, gold_keys, tools, *rest)

    monkeypatch.setattr(ConditionalBuilder, "make_task", spy)
    tasks = family_tasks(name, "conditional", 3)
    assert tasks and len(seen) >= len(tasks)
    for untaken, tools in seen:
        assert untaken is not None and untaken in tools, (untaken, tools)


def test_the_verb_of_an_infinitive_is_not_cut_as_a_noun_before_the_target():
    """fitness_club/00024 (seed 31) read "I want to every active member ... to plan PLN-0005": the cut
    of "the noun before the slot" took "switch" after "to" for a noun ("towards bill")."""
    from scaleenv.synth.tasks.families.phrasing import _cut_noun
    from scaleenv.synth.tasks.instruction import EntityRef

    spec = context("fitness_club").spec
    member = EntityRef(table="members", singular="member", row={"id": "MBR-0001"})
    assert _cut_noun("I want to switch ", member, spec) == "I want to switch "
    assert _cut_noun("I'd like to move ", member, spec) == "I'd like to move "
    assert _cut_noun("Book my member ", member, spec).strip() == "Book"


@pytest.mark.parametrize(("text", "flagged"), [
    ("I'm moving away; cancel membership my account (Wesley Jones).", True),
    ("Nobody showed up for every booked class booking for member MBR-0063.", True),
    ("We've run out of every available menu item for Clark's Kitchen; mark item them sold out.", True),
    ("We've run out of every available menu item for Clark's Kitchen; mark them sold out.", False),
    ("If my store credit is at least 95, leave a review; otherwise, I'm Lori Clark; I'd like to order 2.", True),
    ("Please cancel my booking.", False),
    ("Please change the phone on my account.", False),
    ("I booked my flight for Monday.", False),
])
def test_the_language_check_catches_the_seams_players_met_in_round_three(text, flagged):
    from scaleenv.synth.tasks.instruction import language_defects

    assert bool(language_defects(text)) is flagged, language_defects(text)


def test_a_statement_of_what_happened_also_says_what_to_do():
    """retail/00016 (seed 47): "Every paypal order of mine just left the warehouse." was the whole
    request to ship them; a careful agent asked what to do and could not pass."""
    from scaleenv.synth.procedural.blueprint import catalog
    from scaleenv.synth.procedural.derive import derive_spec, with_request

    assert with_request("Order {order_id} just left the warehouse.", "shipped") == \
        "Order {order_id} just left the warehouse; please mark it shipped."
    assert with_request("Member {member_id} is back from leave.", "active", person=True).endswith("mark them active.")
    for kept in ("The courier collected order {order_id}, please mark it shipped.", "Cancel reservation {rental_id}.",
                 "The pitch is frozen; postpone fixture {fixture_id}.", "Can I keep loan {loan_id} a bit longer?"):
        assert with_request(kept, "x") == kept
    spec = derive_spec(catalog()["retail"], 0)
    ship = next((t for t in spec.tools if t.meta.get("to") == "shipped"), None)
    assert ship is not None and all("please" in p or "?" in p for p in ship.meta["phrasings"])


def test_the_user_never_asks_for_a_write_in_another_persons_name():
    """second_hand_marketplace/00000 (seed 59): "ask the seller ... from my account USR-0007", where
    USR-0007 was another member: the gold chain sent a message as someone else."""
    from scaleenv.synth.tasks.generate import TaskBuilder

    seen = []
    for seed in (59, 0):
        ctx = context("second_hand_marketplace", seed)
        for i in range(30):
            try:
                task = generate_task(ctx, seed, i)
            except TaskRejected as e:
                seen.append(str(e))
                continue
            for c in task.gold_chain:
                sender = c.args.get("sender_id")
                assert not isinstance(sender, str), (task.id, c.tool, sender)  # the user's own id comes from a look-up
    assert hasattr(TaskBuilder, "foreign_actor")


def test_a_new_record_is_asked_for_with_the_record_it_belongs_to():
    """online_learning/00015 (seed 67): "I'd like to add a new module (title: ..., position: 17, ...)"
    never said which course; the expected world put it in one the user had named only elsewhere."""
    from scaleenv.synth.tasks.generate import TaskRejected as Rejected

    said = []
    for i in range(60):
        try:
            task = generate_task(context("online_learning"), 0, i)
        except Rejected:
            continue
        said += [g for g in task.user_profile.goals if re.search(r"\b(add|register) a new\b", g)]
    assert said
    assert all(re.search(r"\bfor (my account|it\b|[a-z]+ \S+)", g) for g in said), said  # "it": a conditional's record


def test_a_task_holds_a_reader_of_what_its_policy_rules_decide_on():
    """travel_agency/00007 (seed 67): "no cancelling within 30 days of departure", but no tool of the
    task showed the departure's date, so a careful agent could not apply the rule."""
    from scaleenv.synth.tasks.generate import rule_readers

    spec = context("travel_agency", 67).spec
    assert "get_departure" in rule_readers(spec, ["cancel_trip_booking"])
    assert rule_readers(spec, ["cancel_trip_booking", "get_departure", "get_trip_booking"]) == ()
    for i in range(30):
        try:
            task = generate_task(context("travel_agency", 67), 67, i)
        except TaskRejected:
            continue
        writes = [c.tool for c in task.gold_chain + task.forbidden]
        assert not set(rule_readers(spec, writes)) - set(task.tools), (task.id, task.tools)


def test_a_phrasing_that_calls_a_record_me_is_said_only_by_that_person():
    """express_logistics/00002 (seed 73): the courier Taylor Torres spoke "collect 1 parcels from me
    (CUS-0005)", and CUS-0005 was a customer named Amy Nguyen."""
    from types import SimpleNamespace

    from scaleenv.synth.tasks.instruction import EntityRef, _speaks_as_other

    customer = EntityRef(table="customers", singular="customer", row={"id": "CUS-0005"})
    courier = EntityRef(table="couriers", singular="courier", row={"id": "CRR-0024"})
    goal = SimpleNamespace(refs={"customer_id": customer}, args={"customer_id": "CUS-0005"})
    phrasing = "Can a courier collect {parcel_count} parcels from me ({customer_id})?"
    assert _speaks_as_other(phrasing, goal, courier)
    assert _speaks_as_other(phrasing, goal, None)
    assert not _speaks_as_other(phrasing, goal, customer)
    # play round 11, express_logistics/00018 (seed 5309): the customer given as a literal id, not a record
    # of the chain, spoken by the courier Susan Cook
    literal = SimpleNamespace(refs={}, args={"customer_id": "CUS-0023"})
    assert _speaks_as_other(phrasing, literal, courier)
    assert not _speaks_as_other(phrasing, literal,
                                EntityRef(table="customers", singular="customer", row={"id": "CUS-0023"}))
    assert not _speaks_as_other("Cancel shipment {shipment_id}.", goal, courier)


def test_the_speaker_is_not_the_subject_of_a_third_person_phrasing():
    """Play round 26 (express logistics): "driver my account (Douglas Frederick) has finished the shift, mark
    them off duty"; the fallback then read "please go off duty my account". A phrasing whose slot is the
    subject of a verb for someone else is not used for the speaker, who asks to be marked off duty."""
    goals = []
    for attempt in range(120):
        with contextlib.suppress(TaskRejected):
            task = generate_task(context("express_logistics"), 0, attempt,
                                 ChainConfig(family_mix={"conditional": 1.0, "direct": 1.0}))
            goals += [g for g in task.user_profile.goals if "off duty" in g]
    assert goals
    for goal in goals:
        assert not re.search(r"\b(driver|courier) my account\b|off duty my account|my account \([^)]*\) (has|is)\b",
                             goal), goal
    assert any("mark me as off duty" in g for g in goals)


# --- a conditional names its record once (round 25: "my invoice status open at my appointment ..." three times) ----

def test_a_branch_calls_the_record_the_condition_named_it():
    from scaleenv.synth.tasks.families.conditional import as_it
    from scaleenv.synth.tasks.instruction import EntityRef

    visit = EntityRef(table="appointments", singular="appointment", row={"id": "APT-1"},
                      by={"scheduled_at": "2025-12-17T19:00:00"})
    invoice = EntityRef(table="invoices", singular="invoice", row={"id": "INV-1", "status": "open"},
                        by={"status": "open"}, within=visit)
    at = "at my appointment scheduled time 2025-12-17T19:00:00"
    assert as_it(f"Invoice status open {at} was issued by mistake, please void it", invoice) == \
        "it was issued by mistake, please void it"
    assert as_it(f"please put a payment of $105.5 on bill status open {at}", invoice) == "please put a payment of $105.5 on it"
    listing = EntityRef(table="listings", singular="listing", row={"id": "LST-0073"})
    assert as_it("I decided to keep it; take down my ad LST-0073", listing) == "I decided to keep it; take it down"
    # a verb before a bare id stays, and so does a record found under this one
    assert as_it("reopen LST-0073; withdraw my offer 100 at listing LST-0073", listing) == \
        "reopen LST-0073; withdraw my offer 100 at listing LST-0073"
    lamp = EntityRef(table="lights", singular="light", row={"id": "L1", "name": "Desk Lamp"}, by={"name": "Desk Lamp"},
                     display="name", owner_word="the")
    assert as_it("Turn off light Desk Lamp, please", lamp) == "Turn it off, please"
    assert as_it("please change the brightness of the light Desk Lamp to 20", lamp) == "please change its brightness to 20"


@pytest.mark.parametrize("name", ["pet_care", "smart_home", "second_hand_marketplace"])
def test_conditional_requests_name_their_record_in_the_condition_only(name):
    tasks = family_tasks(name, "conditional", 6)
    assert len(tasks) >= 4
    for task in tasks:
        sentence = next(g for g in task.user_profile.goals if g.startswith("If "))
        condition, _, branches = sentence.partition(" is at least ") if " is at least " in sentence \
            else sentence.partition(" are at least ")
        named = re.search(r"\b(?:of|my) (.+)$", condition.removeprefix("If "))
        assert named is not None, sentence
        record = named.group(1)
        if record.startswith(("my ", "the ")) or " " in record:
            assert record not in branches, sentence
        assert "?;" not in sentence and "?." not in sentence, sentence


def test_a_bulk_change_says_its_end_state_only_where_the_verb_does_not():
    """Play round 29: "remove every only-me post of mine so that they are removed", "unspam every read message
    of mine so that they are inbox", "Don't every draft of mine that is still scheduled later after all"
    (its "send" cut as a noun of the tool's name), "Please flag spam every inbox message"."""
    from scaleenv.synth.tasks.families.phrasing import _end_state

    email = {t.name: t for t in context("email_management").spec.tools}
    social = {t.name: t for t in context("social_media_messaging").spec.tools}
    assert _end_state(email["unspam_email"], "unspam", "inbox", True) == " so that their folder is inbox"
    assert _end_state(social["start_review_abuse_report"], "start review", "reviewing", False) == " so that it is reviewing"
    assert _end_state(social["uphold_abuse_report"], "uphold", "actioned", True) == " so that they are actioned"
    for tool, verb, to in ((social["purge_post"], "remove", "removed"), (social["hide_post"], "hide", "hidden"),
                           (email["flag_spam_email"], "flag spam", "spam")):
        assert _end_state(tool, verb, to, True) == "", (verb, to)
    said = []
    for task in family_tasks("email_management", "bulk", 12):
        said += task.user_profile.goals
    assert said
    for goal in said:
        assert not re.search(r"\bDon't every\b|\bflag spam every\b|so that (they are|it is) (inbox|removed)\b", goal), goal
