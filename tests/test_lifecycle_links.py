"""A state that means a link is not yet set: a placed food order has no courier (issue 12's remainder),
a collected parcel has one, an invited wedding guest has no table, a task being worked on has an
assignee. Declared in the catalog, obeyed by the seeder, mended in task patches, kept by the tools."""

from __future__ import annotations

import random

import pytest

from scaleenv.synth.procedural.blueprint import Blueprint, blueprint_problems, catalog
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.domain import seed_world
from scaleenv.synth.tasks.state import mend_rows
from scaleenv.tools.runtime import execute_tool
from scaleenv.world.invariants import check_world


def _world(name: str, seed: int = 0, scale: float = 1.0):
    bp = catalog()[name]
    spec = derive_spec(bp, seed)
    return spec, seed_world(spec, bp, seed, scale)


@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_a_food_order_has_a_courier_exactly_once_dispatched(scale: float) -> None:
    spec, w = _world("food_delivery", 0, scale)
    assert "orders.courier_id_set_iff_out_for_delivery_delivered" in {i.name for i in spec.invariants}
    rows = w.conn.execute("SELECT status, courier_id FROM orders").fetchall()
    assert {s for s, _ in rows} >= {"placed", "accepted", "out_for_delivery", "delivered", "cancelled"}
    for status, courier in rows:
        assert (courier is not None) == (status in ("out_for_delivery", "delivered")), (status, courier)
    couriers = {r[0] for r in w.conn.execute("SELECT id FROM couriers")}
    assert {c for _, c in rows if c is not None} <= couriers
    assert check_world(w) == []


def test_a_patched_order_is_mended_to_its_state() -> None:
    spec, w = _world("food_delivery")
    placed = dict(w.row("orders", w.conn.execute("SELECT id FROM orders WHERE status = 'delivered'").fetchone()[0]))
    placed.update(id="ORD-9001", status="placed")
    sent = dict(placed, id="ORD-9002", status="out_for_delivery", courier_id=None)
    assert mend_rows(w, "orders", [placed, sent], random.Random(0)) >= 2  # the courier is tried until one fits
    assert placed["courier_id"] is None
    assert w.row("couriers", sent["courier_id"]) is not None  # a courier, never a date


def test_the_rules_of_links_are_declared_and_the_seeds_obey_them() -> None:
    for name, table, rule, bad in (
        ("express_logistics", "shipments", "collected_by_a_courier",
         "status IN ('picked_up', 'in_transit', 'out_for_delivery', 'delivered', 'returned') AND courier_id IS NULL"),
        ("wedding_planning", "guests", "seated_once_attending", "rsvp = 'invited' AND table_number IS NOT NULL"),
        ("project_management", "tasks", "worked_by_an_assignee",
         "status IN ('in_progress', 'in_review', 'done') AND assignee_id IS NULL"),
    ):
        for scale in (1.0, 5.0):
            spec, w = _world(name, 0, scale)
            assert any(i.table == table and rule in i.name for i in spec.invariants), (name, rule)
            assert w.conn.execute(f"SELECT count(*) FROM {table} WHERE {bad}").fetchone()[0] == 0, (name, scale)
            assert check_world(w) == [], name


def test_a_parcel_without_a_courier_cannot_be_picked_up() -> None:
    spec, w = _world("express_logistics")
    pick_up = next(t for t in spec.tools if t.meta.get("family") == "transition" and t.meta.get("to") == "picked_up")
    sid = w.conn.execute("SELECT id FROM shipments WHERE status = 'created' AND courier_id IS NULL LIMIT 1").fetchone()
    if sid is None:
        sid = w.conn.execute("SELECT id FROM shipments WHERE status = 'created' LIMIT 1").fetchone()
        w.conn.execute("UPDATE shipments SET courier_id = NULL WHERE id = ?", sid)
    res = execute_tool(w, pick_up, {pick_up.parameters[0].name: sid[0]})
    assert not res.ok
    assigned = w.conn.execute("SELECT id FROM shipments WHERE status = 'created' AND courier_id IS NOT NULL "
                              "LIMIT 1").fetchone()
    assert assigned is not None and execute_tool(w, pick_up, {pick_up.parameters[0].name: assigned[0]}).ok
    assert check_world(w) == []


def test_a_generic_transition_cannot_set_a_link() -> None:
    bp = catalog()["food_delivery"].model_dump(by_alias=True)
    orders = next(e for e in bp["entities"] if e["name"] == "orders")
    orders["lifecycle"]["transitions"].append({"verb": "dispatch", "from": ["accepted"], "to": "out_for_delivery"})
    problems = blueprint_problems(Blueprint.model_validate(bp))
    assert any("courier_id" in msg and "cannot pick one" in msg for _, msg in problems), problems
