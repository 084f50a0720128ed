"""Incoherence that careful players found and no invariant declared (issue 12's remainder): each class of
defect is checked across every catalog domain, eval-only ones included, on the data itself."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from scaleenv.synth.procedural.blueprint import catalog
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.seeddata import seed_rows
from scaleenv.synth.tasks.state import IDENTIFYING, distractor
from scaleenv.tools.values import email_key

NAMES = sorted(catalog())


def _state_columns(name: str) -> list[tuple[str, str, str, list[str]]]:
    """(table, column, lifecycle column, matching states) for every nullable column named after a state
    of its row's lifecycle: ``shipped_at`` with ``shipped``, ``returned_on`` with ``returned``,
    ``cancel_reason`` with ``cancelled``."""
    out = []
    for e in catalog()[name].entities:
        lc = e.lifecycle
        if lc is None:
            continue
        for c in e.columns:
            head = c.name.split("_")[0]
            if c.name == lc.column or c.ref or not c.nullable or len(head) < 4:
                continue
            if c.type not in ("date", "datetime") and not c.name.endswith("_reason"):
                continue
            states = [s for s in lc.states if head[:5] in (s[:5], s.split("_")[-1][:5])]
            if states:
                out.append((e.name, c.name, lc.column, states))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_a_column_named_after_a_state_is_set_exactly_in_its_states(name: str) -> None:
    """A paid order with a shipped date, a returned rental without a return date: every nullable
    column named after a lifecycle state is declared ``set_in`` and the seed rows follow it."""
    bp = catalog()[name]
    rows = seed_rows(bp, 0)
    for table, col, status, _states in _state_columns(name):
        ent = bp.entity(table)
        assert ent is not None and ent.lifecycle is not None
        assert col in ent.lifecycle.set_in, f"{table}.{col} is not declared set_in"
        allowed = set(ent.lifecycle.set_in[col])
        for r in rows[table]:
            assert (r[col] is not None) == (r[status] in allowed), (table, r)


def _rows(name: str) -> dict[str, dict[str, dict]]:
    return {t: {r["id"]: r for r in rs} for t, rs in seed_rows(catalog()[name], 0, 3.0).items()}


def test_child_rows_agree_with_their_parents() -> None:
    """The defects the players found, on the data (scale 3, so every rule meets many rows)."""
    car = _rows("car_rental")
    for m in car["maintenance_records"].values():
        assert m["odometer_km"] <= car["cars"][m["car_id"]]["odometer_km"], m
    for r in car["rentals"].values():
        if r["status"] == "active":
            assert car["cars"][r["car_id"]]["status"] == "rented", r
    air = _rows("airline")
    for r in air["reservations"].values():
        if r["status"] == "flown":
            assert air["flights"][r["flight_id"]]["status"] in ("departed", "landed"), r
        assert r["booked_at"] <= air["flights"][r["flight_id"]]["departs_at"], r
    lib = _rows("library_services")
    for loan in lib["loans"].values():
        if loan["status"] == "active":
            assert lib["copies"][loan["copy_id"]]["status"] == "on_loan", loan
    shop = _rows("second_hand_marketplace")
    for o in shop["orders"].values():
        assert (o["shipped_at"] is None) == (o["status"] in ("paid", "cancelled")), o
        listing = shop["listings"][o["listing_id"]]
        assert o["buyer_id"] != listing["seller_id"] and o["paid_at"] >= listing["posted_at"], o
        if o["status"] != "cancelled":
            assert listing["status"] == "sold", o


def _identifying(name: str) -> list[tuple[str, str]]:
    spec = derive_spec(catalog()[name], 0)
    return [(t.name, c.name) for t in spec.tables for c in t.columns
            if not c.foreign_key and c.type == "text" and (IDENTIFYING.search(c.name) or "email" in c.name)]


@pytest.mark.parametrize("name", [n for n in NAMES if _identifying(n)])
def test_lookalikes_never_share_an_identifying_value(name: str) -> None:
    """A look-alike has its own passport, licence, plate, ISBN or barcode, and an e-mail address that
    is not the original's words reordered (``maria.novak@`` / ``novak.maria@``)."""
    spec = derive_spec(catalog()[name], 0)
    rows = seed_rows(catalog()[name], 0)
    rng = random.Random(f"lookalikes:{name}")
    for table, col in _identifying(name):
        tbl = spec.table(table)
        assert tbl is not None
        taken = {r[col] for r in rows[table]}
        for row in rows[table][:12]:
            if row[col] is None:
                continue
            for _ in range(3):
                d = distractor(tbl, row, rng, taken)
                assert d[col] != row[col], (table, col, row[col])
                if email_key(row[col]):
                    assert email_key(d[col]) != email_key(row[col]), (table, col, row[col], d[col])


@pytest.mark.parametrize("name", NAMES)
def test_namesakes_in_the_seed_data_have_distinct_email_addresses(name: str) -> None:
    """Two people of the same name in a base world: their own addresses (``email``, or a unique address
    column) differ in more than word order and domain (``jsmith@example.org`` / ``jsmith@example.net``)."""
    spec = derive_spec(catalog()[name], 0)
    for table, rs in seed_rows(catalog()[name], 0, 3.0).items():
        tbl = spec.table(table)
        assert tbl is not None
        own = {c.name for c in tbl.columns if c.name == "email" or (c.unique and "email" in c.name)}
        keys: dict[tuple, list[str]] = defaultdict(list)
        for r in rs:
            for col, v in r.items():
                if isinstance(v, str) and "@" in v and col in own:
                    keys[(col, email_key(v))].append(v)
        dup = {k: v for k, v in keys.items() if len(v) > 1}
        assert not dup, (table, dup)
