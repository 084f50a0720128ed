"""Fresh realistic values (tools/values.py) and look-alikes that differ in real ways (tasks/state.py)."""

from __future__ import annotations

import random
import re

import pytest

from scaleenv.formats.domain import Column, Table
from scaleenv.synth.tasks.state import distractor, fresh_unique
from scaleenv.tools.values import email_for_name, email_styles, fresh_value, redraw_shape, text_for_column


def test_email_styles_spell_the_name_without_digits() -> None:
    styles = email_styles("Dr. María Elena Novak")
    assert styles[0] == "maria.novak" and "mnovak" in styles and "maria.e.novak" in styles
    assert not any(ch.isdigit() for s in styles for ch in s)
    rng = random.Random(3)
    taken = {f"{s}@{d}" for s in styles[:3] for d in ("example.com", "example.net")}
    e = email_for_name("Maria Elena Novak", rng, taken)
    assert e not in taken and e.split("@")[0] in styles


@pytest.mark.parametrize("column, like, shape", [
    ("phone", "555-504-1087", r"555-\d{3}-\d{4}"),
    ("plate", "7ABC123", r"\d[A-Z]{3}\d{3}"),
    ("sku", "SKU-4821-QX", r"SKU-\d{4}-[A-Z]{2}"),
    ("permit_number", "WP-0042-AB", r"WP-\d{4}-[A-Z]{2}"),
    ("zip_code", "90210", r"\d{5}"),
])
def test_fresh_codes_keep_their_shape(column: str, like: str, shape: str) -> None:
    rng = random.Random(0)
    taken: set[str] = {like}
    for _ in range(50):
        v = fresh_value(column, like, rng, taken)
        assert re.fullmatch(shape, v), v
        assert v not in taken
        taken.add(v)


def test_fresh_email_and_names_have_no_numeric_suffix() -> None:
    rng = random.Random(1)
    row = {"full_name": "Paul Brooks", "email": "paul.brooks@example.net"}
    taken = {row["email"]}
    for _ in range(30):
        v = fresh_value("email", row["email"], rng, taken, row=row)
        assert v not in taken and not re.search(r"\d", v), v
        taken.add(v)
    club = fresh_value("name", "Gloverbury FC", rng, {"Gloverbury FC"})
    assert club.endswith(" FC") and club != "Gloverbury FC" and not re.search(r"\d", club)
    person = fresh_value("full_name", "Maria Novak", rng, {"Maria Novak"})
    assert len(person.split()) >= 2 and not re.search(r"\d", person)
    assert fresh_value("shirt_number", 7, rng, set(range(1, 30)), lo=1, hi=40) in range(30, 41)


def test_redraw_shape_and_text_are_realistic() -> None:
    rng = random.Random(2)
    assert re.fullmatch(r"HA\d{3}", redraw_shape("HA123", rng))
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(0)
    notes = text_for_column("clinical_notes", fake, rng, ["vaccination"])
    assert len(notes.split()) >= 4 and notes.lower() != "field"
    assert len(text_for_column("street_address", fake, rng).split()) >= 2


PEOPLE = Table(name="owners", columns=[
    Column(name="id"), Column(name="full_name"), Column(name="email", unique=True), Column(name="phone"),
    Column(name="city"), Column(name="birth_date", type="date"), Column(name="status", enum=["active", "closed"]),
    Column(name="joined_on", type="date"), Column(name="club_id", foreign_key="clubs.id"),
])


def test_distractor_shares_confusables_and_differs_in_real_ways() -> None:
    rng = random.Random(5)
    row = {"id": "OWN-0001", "full_name": "Maria Novak", "email": "maria.novak@example.com", "phone": "555-201-3344",
           "city": "Springfield", "birth_date": "1984-03-02", "status": "active", "joined_on": "2026-06-20",
           "club_id": "CLB-0002"}
    taken = {row["email"]}
    seen_birth_gaps = []
    for i in range(20):
        d = distractor(PEOPLE, {**row, "id": f"OWN-{i + 2:04d}"}, rng, taken)
        assert (d["full_name"], d["city"], d["status"], d["club_id"]) == (row["full_name"], row["city"], "active",
                                                                          row["club_id"])
        assert d["email"] != row["email"] and d["email"].split("@")[0] in email_styles("Maria Novak")
        assert re.fullmatch(r"555-\d{3}-\d{4}", d["phone"]) and d["phone"] != row["phone"]
        assert d["birth_date"] < row["birth_date"]
        seen_birth_gaps.append(int(row["birth_date"][:4]) - int(d["birth_date"][:4]))
        assert d["joined_on"] >= "2026-06-15", "a future date stays in the future"
    assert min(seen_birth_gaps) >= 2, "birth dates are years apart"
    assert len({d for d in taken}) == len(taken)


def test_fresh_unique_never_appends_digits() -> None:
    rng = random.Random(9)
    taken: set = set()
    row = {"id": "OWN-0001", "full_name": "Paul Brooks", "email": "pbrooks@example.net", "phone": "555-504-1087",
           "city": "Gloverbury", "birth_date": "1990-01-01", "status": "active", "joined_on": "2025-01-01",
           "club_id": "CLB-0001"}
    clone = fresh_unique(PEOPLE, row, rng, taken)
    assert clone["email"] != row["email"] and not re.search(r"\d", clone["email"])
    again = fresh_unique(PEOPLE, clone, rng, taken)
    assert again["email"] not in (row["email"], clone["email"]), "a clone's look-alike avoids the original too"


def test_mend_rows_makes_task_rows_obey_the_invariants() -> None:
    from scaleenv.synth.procedural.blueprint import catalog
    from scaleenv.synth.procedural.derive import derive_spec
    from scaleenv.synth.procedural.domain import seed_world
    from scaleenv.synth.tasks.state import mend_rows
    from scaleenv.world.invariants import check_world

    bp = catalog()["football"]
    spec = derive_spec(bp, 0)
    w = seed_world(spec, bp, 0)
    player = w.row("players", w.conn.execute("SELECT id FROM players WHERE status != 'retired' LIMIT 1").fetchone()[0])
    fixture = w.row("fixtures", w.conn.execute("SELECT id FROM fixtures WHERE status = 'scheduled' LIMIT 1")
                    .fetchone()[0])
    twin = {**player, "id": "PLY-0900"}                                  # same club, same shirt number
    late = {**fixture, "id": "FIX-0900", "kickoff_at": "2026-05-17T15:00:00"}  # "scheduled" a month ago
    played = {**fixture, "id": "FIX-0901", "status": "played"}           # played, but no score
    before = w.state_hash()
    assert mend_rows(w, "players", [twin], random.Random(0)) == 1
    assert mend_rows(w, "fixtures", [late, played], random.Random(0)) >= 2
    assert w.state_hash() == before, "mending leaves the world untouched"
    assert twin["shirt_number"] != player["shirt_number"] and 1 <= twin["shirt_number"] <= 99
    assert late["kickoff_at"] == "2026-06-15T15:00:00"
    assert played["goals_for"] is not None or played["kickoff_at"][:10] <= "2026-06-15"
    w.load_rows("players", [twin])
    w.load_rows("fixtures", [late])
    assert check_world(w) == []


def test_a_one_word_label_gets_a_variant_of_its_kind_not_a_persons_name():
    """fitness_club (seed 31): plans named "Off-Peak", "Standard"... got fresh names such as "Pamela Strong"."""
    rng = random.Random(0)
    for like in ("Standard", "Off-Peak", "Flex"):
        v = fresh_value("name", like, rng, {like})
        assert v != like and like in v.split() and v.split()[-1] in {"Plus", "Select", "Classic", "Extra", "Lite", "Pro", "Max", "Essential", "Prime", "Advantage"}, v
    assert fresh_value("city", "Lisbon", rng, {"Lisbon"}) != "Lisbon Plus"


def test_a_fresh_street_address_is_a_street_not_redrawn_letters():
    """smart_home (seed 31): a look-alike household's unique address was "535 Yiaihms Vswoyj"."""
    rng = random.Random(0)
    for _ in range(5):
        v = fresh_value("address", "535 Maple Street", rng, {"535 Maple Street"})
        from faker.providers.address.en_US import Provider

        number, *words = v.split()
        assert v != "535 Maple Street" and number.isdigit() and words
        assert set(words) & set(Provider.street_suffixes), v  # "Leon Bridge", not "Yiaihms Vswoyj"
