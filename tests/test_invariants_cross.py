"""Rules across rows and tables (blueprint ``constraints``): the seeded worlds obey them (checked here
with plain SQL, not through the invariants), the audit finds a world that breaks them, and the
derived tools refuse, or keep them, when a write would break one."""

from __future__ import annotations

import pytest

from scaleenv.errors import ToolError
from scaleenv.synth.procedural.blueprint import Blueprint, blueprint_problems, catalog
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.domain import seed_world
from scaleenv.tools.runtime import run_tool
from scaleenv.world.invariants import check_world
from scaleenv.world.world import World

SEEDS = [0, 1, 2]


def world_of(name: str, seed: int) -> World:
    bp = catalog()[name]
    return seed_world(derive_spec(bp, seed), bp, seed)


def count(world: World, sql: str) -> int:
    return int(world.conn.execute(sql).fetchone()[0])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_car_is_never_booked_twice_and_is_rented_exactly_while_out(seed: int) -> None:
    w = world_of("car_rental", seed)
    assert count(w, """SELECT COUNT(*) FROM rentals a JOIN rentals b ON a.car_id = b.car_id AND a.id < b.id
                       WHERE a.status IN ('reserved', 'active') AND b.status IN ('reserved', 'active')
                       AND a.start_date < b.end_date AND b.start_date < a.end_date""") == 0
    assert count(w, """SELECT COUNT(*) FROM cars c WHERE (c.status = 'rented') !=
                       EXISTS (SELECT 1 FROM rentals r WHERE r.car_id = c.id AND r.status = 'active')""") == 0
    assert count(w, """SELECT COUNT(*) FROM maintenance_records m JOIN cars c ON c.id = m.car_id
                       WHERE m.odometer_km > c.odometer_km""") == 0
    assert count(w, "SELECT COUNT(*) FROM rentals WHERE status = 'active'") > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_a_copy_has_one_active_loan_and_is_on_loan_exactly_then(seed: int) -> None:
    w = world_of("library_services", seed)
    assert count(w, "SELECT COUNT(*) FROM (SELECT copy_id FROM loans WHERE status = 'active' "
                    "GROUP BY copy_id HAVING COUNT(*) > 1)") == 0
    assert count(w, """SELECT COUNT(*) FROM copies c WHERE (c.status = 'on_loan') !=
                       EXISTS (SELECT 1 FROM loans l WHERE l.copy_id = c.id AND l.status = 'active')""") == 0
    assert count(w, "SELECT COUNT(*) FROM loans WHERE status = 'active'") >= 5


@pytest.mark.parametrize("seed", SEEDS)
def test_one_active_prescription_of_a_drug_per_patient(seed: int) -> None:
    w = world_of("healthcare_telemedicine", seed)
    assert count(w, """SELECT COUNT(*) FROM (SELECT c.patient_id, p.medication FROM prescriptions p
                       JOIN consultations c ON c.id = p.consultation_id WHERE p.status = 'active'
                       GROUP BY c.patient_id, p.medication HAVING COUNT(*) > 1)""") == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_organic_farms_use_no_synthetic_inputs_and_fields_are_not_overplanted(seed: int) -> None:
    w = world_of("agriculture_environmental", seed)
    assert count(w, """SELECT COUNT(*) FROM input_applications a JOIN plantings p ON p.id = a.planting_id
                       JOIN fields f ON f.id = p.field_id JOIN farms fa ON fa.id = f.farm_id
                       WHERE fa.certification = 'organic'
                       AND a.product_type IN ('synthetic_fertilizer', 'herbicide', 'insecticide')""") == 0
    assert count(w, "SELECT COUNT(*) FROM (SELECT planting_id FROM input_applications GROUP BY planting_id "
                    "HAVING SUM(nitrogen_kg_per_ha) > 170)") == 0
    assert count(w, """SELECT COUNT(*) FROM fields f WHERE f.area_ha + 0.005 < (SELECT COALESCE(SUM(p.area_ha), 0)
                       FROM plantings p WHERE p.field_id = f.id AND p.status IN ('planted', 'growing'))""") == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_fares_follow_the_price_list_and_claims_follow_the_flight(seed: int) -> None:
    w = world_of("airline", seed)
    assert count(w, """SELECT COUNT(*) FROM reservations r JOIN flights f ON f.id = r.flight_id
                       WHERE abs(r.fare - (CASE r.cabin WHEN 'business' THEN f.price_business
                       ELSE f.price_economy END) - (CASE WHEN r.insurance THEN 30 ELSE 0 END)) > 0.005""") == 0
    assert count(w, """SELECT COUNT(*) FROM claims c JOIN reservations r ON r.id = c.reservation_id
                       JOIN flights f ON f.id = r.flight_id WHERE NOT (CASE c.reason WHEN 'cancellation'
                       THEN f.status = 'cancelled' ELSE f.status IN ('departed', 'landed')
                       AND c.filed_at >= f.departs_at END)""") == 0
    assert count(w, "SELECT COUNT(*) FROM claims") > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_a_courier_carries_one_order_and_is_on_delivery_exactly_then(seed: int) -> None:
    w = world_of("food_delivery", seed)
    assert count(w, """SELECT COUNT(*) FROM couriers c WHERE (c.status = 'on_delivery') !=
                       EXISTS (SELECT 1 FROM orders o WHERE o.courier_id = c.id AND o.status = 'out_for_delivery')""") == 0
    assert count(w, "SELECT COUNT(*) FROM (SELECT courier_id FROM orders WHERE status = 'out_for_delivery' "
                    "GROUP BY courier_id HAVING COUNT(*) > 1)") == 0


def test_the_audit_finds_a_world_that_breaks_a_cross_table_rule() -> None:
    w = world_of("library_services", 0)
    assert check_world(w) == []
    loan = w.conn.execute("SELECT id, copy_id FROM loans WHERE status = 'active' ORDER BY id LIMIT 1").fetchone()
    other = w.conn.execute("SELECT id FROM loans WHERE status = 'returned' ORDER BY id LIMIT 1").fetchone()
    w.conn.execute("UPDATE loans SET copy_id = ?, status = 'active' WHERE id = ?", (loan[1], other[0]))
    w.conn.execute("UPDATE copies SET status = 'on_loan' WHERE id = (SELECT MIN(id) FROM copies WHERE status = "
                   "'available')")
    found = {(v.invariant, v.key) for v in check_world(w)}
    assert ("loans.one_active_loan_per_copy", other[0]) in found
    assert any(inv == "copies.on_loan_iff_loan_active" for inv, _ in found)


def test_a_derived_write_that_would_break_a_rule_is_refused_with_its_code() -> None:
    w = world_of("car_rental", 0)
    tool = next(t for t in w.spec.tools if t.name.endswith("maintenance_record") and t.kind == "write")
    car, km = w.conn.execute("SELECT id, odometer_km FROM cars ORDER BY id LIMIT 1").fetchone()
    args = {"car_id": car, "service_type": "oil change", "performed_on": "2026-06-01", "cost": 80.0}
    with pytest.raises(ToolError) as e:
        run_tool(w, tool, {**args, "odometer_km": km + 1000})
    assert e.value.code == "rule_odometer_not_ahead_of_car"
    run_tool(w, tool, {**args, "odometer_km": max(0, km - 1000)})
    assert check_world(w) == []


def test_a_child_leaving_its_state_puts_the_parent_back() -> None:
    w = world_of("library_services", 0)
    tool = next(t for t in w.spec.tools if any(p.name.endswith("_id") for p in t.parameters)
                and t.kind == "write" and "'lost'" in t.effects[0])
    loan, copy = w.conn.execute("SELECT id, copy_id FROM loans WHERE status = 'active' ORDER BY id LIMIT 1").fetchone()
    run_tool(w, tool, {tool.parameters[0].name: loan})
    assert w.conn.execute("SELECT status FROM copies WHERE id = ?", (copy,)).fetchone()[0] == "withdrawn"
    assert check_world(w) == []


def test_constraints_that_name_missing_columns_or_states_are_reported() -> None:
    data = catalog()["car_rental"].model_dump(by_alias=True)
    rentals = next(e for e in data["entities"] if e["name"] == "rentals")
    rentals["constraints"] = [{"kind": "no_overlap", "key": ["truck_id"], "start": "start_date", "states": ["gone"]},
                              {"kind": "status_agrees", "fk": "car_id", "states": ["active"], "parent_states": ["lent"]}]
    problems = [r for _, r in blueprint_problems(Blueprint.model_validate(data))]
    assert "'truck_id' is not a column" in problems
    assert "unknown state 'gone'" in problems
    assert "unknown cars state 'lent'" in problems


def test_a_second_row_where_one_is_allowed_is_refused() -> None:
    w = world_of("second_hand_marketplace", 0)
    tool = next(t for t in w.spec.tools if t.kind == "write" and 'INSERT INTO "watchlist_items"' in t.effects[0])
    user, listing = w.conn.execute("SELECT user_id, listing_id FROM watchlist_items ORDER BY id LIMIT 1").fetchone()
    args = {p.name: None for p in tool.parameters if not p.required}
    args.update({"user_id": user, "listing_id": listing})
    args.update({p.name: "Maybe" for p in tool.parameters if p.required and p.name not in args})
    with pytest.raises(ToolError) as e:
        run_tool(w, tool, args)
    assert e.value.code == "rule_watched_once"
