"""Seed data obeys the domain's own rules: every catalog domain at scales 1 and 17, coherent entities,
meaningful text, and no identifying value with an appended numeric suffix."""

from __future__ import annotations

import re

import pytest

from scaleenv.synth.procedural.blueprint import catalog, load_blueprint_file
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.domain import seed_world
from scaleenv.synth.procedural.seeddata import seed_rows
from scaleenv.tools.values import email_styles
from scaleenv.world.invariants import check_world, invariant_problems

NAMES = sorted(catalog())

# an identifying value with digits glued on: "Gloverbury FC-914-511", "pbrooks.453.308@", "555-504-1087-939-483"
_SUFFIXED = re.compile(r"([-. ]\d{2,})+$")
_EMAIL_DIGITS = re.compile(r"\d@")
_IDENTIFYING = re.compile(r"(^|_)(name|full_name|title|email|phone|mobile|subject|display_name|username)$")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("scale", [1.0, 17.0])
def test_every_catalog_world_obeys_its_invariants(name: str, scale: float) -> None:
    bp = catalog()[name]
    spec = derive_spec(bp, 0)
    assert invariant_problems(spec) == []
    world = seed_world(spec, bp, 0, scale)
    assert check_world(world) == []


def test_the_catalog_declares_invariants_for_the_domains_the_issue_measured() -> None:
    kinds = {n: {(i.table, i.kind) for i in derive_spec(catalog()[n], 0).invariants} for n in NAMES}
    assert ("flights", "derived") in kinds["airline"]
    assert ("water_permits", "derived") in kinds["agriculture_environmental"]
    assert ("players", "unique") in kinds["football"]
    assert ("pets", "row") in kinds["pet_care"] and ("invoices", "row") in kinds["pet_care"]
    assert ("drafts", "row") in kinds["email_management"]
    assert ("prescriptions", "row") in kinds["healthcare_telemedicine"]


@pytest.mark.parametrize("name", NAMES)
def test_identifying_text_has_no_numeric_suffix_and_no_placeholder(name: str) -> None:
    rows = seed_rows(catalog()[name], 0, 3.0)
    for table, rs in rows.items():
        for r in rs:
            for col, v in r.items():
                if not isinstance(v, str) or col == "id":
                    continue
                assert v.strip().lower() not in {"field", "sample text", "lorem", "text", "value"}, (table, col, v)
                if "email" in col:
                    assert not _EMAIL_DIGITS.search(v), (table, col, v)
                elif "phone" in col or "mobile" in col:
                    assert len(re.sub(r"\D", "", v)) <= 11, (table, col, v)
                elif _IDENTIFYING.search(col) and not any(ch.isdigit() or ch == "#"
                                                          for ch in catalog_pattern(name, table, col)):
                    assert not _SUFFIXED.search(v), (table, col, v)


def catalog_pattern(domain: str, table: str, col: str) -> str:
    """The column's own generator as text: digits there ("Sprint ##", "Statistics 101") are by design."""
    ent = catalog()[domain].entity(table)
    c = next((c for c in ent.columns if c.name == col), None) if ent else None
    return str(c.gen) if c and isinstance(c.gen, dict) else ""


def test_emails_follow_the_person_and_breeds_the_species() -> None:
    rows = seed_rows(catalog()["pet_care"], 0)
    for owner in rows["owners"]:
        local = owner["email"].split("@")[0]
        assert local in email_styles(owner["full_name"]), owner
    breeds = {"dog": {"mixed", "labrador", "beagle", "golden retriever", "border collie"},
              "cat": {"mixed", "siamese", "persian", "maine coon"}}
    for pet in rows["pets"]:
        if pet["species"] in breeds:
            assert pet["breed"] in breeds[pet["species"]], pet


def test_lifecycle_state_decides_the_dependent_columns() -> None:
    rows = seed_rows(catalog()["pet_care"], 1)
    for inv in rows["invoices"]:
        if inv["status"] == "paid":
            assert inv["paid"] == inv["amount"]
        elif inv["status"] == "open":
            assert inv["paid"] < inv["amount"]
        cents = round(inv["amount"] * 100) % 100
        assert cents in (0, 50, 95, 99), inv  # price-list amounts
    drafts = seed_rows(catalog()["email_management"], 0)["drafts"]
    assert {d["status"] for d in drafts if d["scheduled_for"]} == {"scheduled"}
    fixtures = seed_rows(catalog()["football"], 0)["fixtures"]
    for f in fixtures:
        assert (f["status"] == "played") == (f["goals_for"] is not None)
        if f["status"] == "scheduled":
            assert f["kickoff_at"][:10] >= "2026-06-15"


def test_derived_values_agree_with_children() -> None:
    rows = seed_rows(catalog()["airline"], 0)
    live: dict[str, int] = {}
    for r in rows["reservations"]:
        if r["status"] != "cancelled":
            live[r["flight_id"]] = live.get(r["flight_id"], 0) + 1
    assert {f["id"]: f["seats_sold"] for f in rows["flights"]} == {f["id"]: live.get(f["id"], 0)
                                                                   for f in rows["flights"]}


def test_an_unsatisfiable_rule_is_a_clear_error(tmp_path) -> None:
    src = (catalog()["pet_care"].model_dump(by_alias=True, exclude_none=True))
    owners = next(e for e in src["entities"] if e["name"] == "owners")
    owners["rules"] = [{"name": "impossible", "check": "loyalty_points < 0"}]
    import yaml

    path = tmp_path / "pet_care.yaml"
    path.write_text(yaml.safe_dump(src))
    from scaleenv.errors import SpecError

    with pytest.raises(SpecError, match="owners.impossible"):
        seed_rows(load_blueprint_file(path), 0)
