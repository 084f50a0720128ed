"""Declared invariants: the spec field, the checker, and the triggers that keep derived columns true."""

from __future__ import annotations

import pytest

from scaleenv.formats.domain import Column, DomainSpec, Invariant, Table
from scaleenv.world.invariants import check_world, invariant_problems
from scaleenv.world.world import World


def _spec(invariants: list[Invariant]) -> DomainSpec:
    flights = Table(name="flights", columns=[
        Column(name="id"), Column(name="seats_total", type="integer"), Column(name="seats_sold", type="integer"),
        Column(name="departs_on", type="date"), Column(name="arrives_on", type="date"), Column(name="status"),
        Column(name="cancelled_on", type="date", nullable=True)])
    res = Table(name="reservations", columns=[
        Column(name="id"), Column(name="flight_id", foreign_key="flights.id"), Column(name="seat", type="integer"),
        Column(name="status")])
    return DomainSpec(name="mini_air", tables=[flights, res], invariants=invariants, clock="2026-06-15T09:00:00")


SOLD = Invariant(name="sold", kind="derived", table="flights", column="seats_sold",
                 expr="SELECT COUNT(*) FROM reservations r WHERE r.flight_id = flights.id AND r.status != 'cancelled'",
                 depends_on=["reservations.flight_id"])
ORDER = Invariant(name="order", kind="row", table="flights", check="arrives_on >= departs_on")
CANCELLED = Invariant(name="cancelled_dated", kind="row", table="flights",
                      check="(status = 'cancelled') = (cancelled_on IS NOT NULL)")
FUTURE = Invariant(name="scheduled_future", kind="row", table="flights", when="status = 'scheduled'",
                   check="departs_on >= :today")
SEAT = Invariant(name="one_seat", kind="unique", table="reservations", columns=["flight_id", "seat"],
                 when="status != 'cancelled'")


def _flight(fid: str, **kw: object) -> dict:
    row = {"id": fid, "seats_total": 100, "seats_sold": 0, "departs_on": "2026-07-01", "arrives_on": "2026-07-01",
           "status": "scheduled", "cancelled_on": None}
    return {**row, **kw}


def test_spec_without_invariants_keeps_its_hash_and_round_trips() -> None:
    plain = _spec([])
    assert "invariants" not in plain.canonical_json()
    rich = _spec([SOLD, ORDER])
    assert rich.content_hash() != plain.content_hash()
    assert DomainSpec.model_validate_json(rich.model_dump_json()) == rich


def test_checker_names_each_breaking_row() -> None:
    spec = _spec([ORDER, CANCELLED, FUTURE, SEAT])
    w = World(spec)
    w.load_rows("flights", [
        _flight("F1"),
        _flight("F2", arrives_on="2026-06-30"),                                  # arrives before it departs
        _flight("F3", status="cancelled"),                                       # cancelled without a date
        _flight("F4", departs_on="2026-05-17", arrives_on="2026-05-17"),         # scheduled in the past
        _flight("F5", status="cancelled", cancelled_on="2026-06-01", departs_on="2026-05-01",
                arrives_on="2026-05-01"),                                        # fine: cancelled, dated, past
    ])
    w.load_rows("reservations", [
        {"id": "R1", "flight_id": "F1", "seat": 1, "status": "confirmed"},
        {"id": "R2", "flight_id": "F1", "seat": 1, "status": "confirmed"},      # the same seat twice
        {"id": "R3", "flight_id": "F1", "seat": 2, "status": "cancelled"},
        {"id": "R4", "flight_id": "F1", "seat": 2, "status": "confirmed"},      # fine: R3 is cancelled
    ])
    got = {(v.invariant, v.key) for v in check_world(w)}
    assert got == {("order", "F2"), ("cancelled_dated", "F3"), ("scheduled_future", "F4"), ("one_seat", "R1"),
                   ("one_seat", "R2")}


def test_derived_column_follows_every_write() -> None:
    spec = _spec([SOLD])
    w = World(spec)
    w.load_rows("flights", [_flight("F1", seats_sold=57), _flight("F2")])
    assert w.row("flights", "F1")["seats_sold"] == 0, "a stale aggregate is recomputed on insert"
    w.load_rows("reservations", [{"id": f"R{i}", "flight_id": "F1", "seat": i, "status": "confirmed"}
                                 for i in range(3)])
    assert w.row("flights", "F1")["seats_sold"] == 3
    w.conn.execute("UPDATE reservations SET status = 'cancelled' WHERE id = 'R0'")
    assert w.row("flights", "F1")["seats_sold"] == 2
    w.conn.execute("UPDATE reservations SET flight_id = 'F2' WHERE id = 'R1'")
    assert (w.row("flights", "F1")["seats_sold"], w.row("flights", "F2")["seats_sold"]) == (1, 1)
    w.conn.execute("DELETE FROM reservations WHERE id = 'R2'")
    assert w.row("flights", "F1")["seats_sold"] == 0
    w.conn.execute("UPDATE flights SET seats_sold = seats_sold + 5 WHERE id = 'F2'")  # a tool's own arithmetic
    assert w.row("flights", "F2")["seats_sold"] == 1
    assert check_world(w) == []


def test_a_world_without_triggers_is_caught() -> None:
    spec = _spec([SOLD])
    w = World(spec.model_copy(update={"invariants": []}))
    w.load_rows("flights", [_flight("F1", seats_sold=157)])
    w.spec = spec
    [v] = check_world(w)
    assert (v.invariant, v.key) == ("sold", "F1") and "157" in v.detail


@pytest.mark.parametrize("inv, needle", [
    (Invariant(name="x", kind="row", table="nope", check="1"), "unknown table"),
    (Invariant(name="x", kind="derived", table="flights", column="seats_sold"), "needs 'expr'"),
    (Invariant(name="x", kind="unique", table="flights", columns=["ghost"]), "unknown column"),
    (Invariant(name="x", kind="row", table="flights", check="no_such_col > 1"), "cannot evaluate"),
])
def test_invariant_problems(inv: Invariant, needle: str) -> None:
    problems = invariant_problems(_spec([inv]))
    assert any(needle in reason for _, reason in problems), problems


def test_spec_validation_reports_a_broken_invariant() -> None:
    from scaleenv.validation.spec import spec_problems

    assert spec_problems(_spec([SOLD, ORDER, CANCELLED, FUTURE, SEAT])) == []
    bad = Invariant(name="typo", kind="row", table="flights", check="arrives_onn >= departs_on")
    assert any("typo" in path and "cannot evaluate" in reason for path, reason in spec_problems(_spec([bad])))
