"""audit_invariants and `scaleenv audit --invariants` over a built universe, and tools that keep the
invariants true in every task's expected world."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.env.invariant_audit import audit_invariants
from scaleenv.synth.procedural.blueprint import catalog
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.domain import seed_world
from scaleenv.tools.runtime import execute_tool
from scaleenv.universe import Universe
from scaleenv.world.invariants import check_world

runner = CliRunner()


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("u") / "universe"
    res = runner.invoke(app, ["build", "--domain", "pet_care", "--domain", "football", "--tasks-per-domain", "8",
                              "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def test_every_base_initial_and_expected_world_is_coherent(universe: Path) -> None:
    result = audit_invariants(Universe(universe))
    assert result["violations"] == 0, result
    assert result["worlds"] == 2 * (1 + 2 * 8)
    assert {d["domain"]: d["invariants"] > 0 for d in result["per_domain"]} == {"pet_care": True, "football": True}
    res = runner.invoke(app, ["audit", str(universe), "--invariants", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["violations"] == 0


def test_audit_finds_a_corrupted_base_world(universe: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "u"
    shutil.copytree(universe, copy)
    base = copy / "domains" / "pet_care" / "base.sqlite"
    conn = sqlite3.connect(":memory:")
    conn.deserialize(base.read_bytes())
    conn.execute("DROP TRIGGER IF EXISTS _log_update_pets")
    conn.execute("UPDATE pets SET breed = 'beagle' WHERE id = (SELECT id FROM pets WHERE species IN ('cat', 'rabbit') "
                 "LIMIT 1)")
    conn.commit()
    base.write_bytes(conn.serialize())
    result = audit_invariants(Universe(copy), domains=["pet_care"])
    base_hits = [v for v in result["per_domain"][0]["examples"] if v["world"] == "base"]
    assert [v["invariant"] for v in base_hits] == ["pets.breed_matches_species"]
    res = runner.invoke(app, ["audit", str(copy), "--domain", "pet_care"])
    assert res.exit_code == 1 and "pets.breed_matches_species" in res.output
    res = runner.invoke(app, ["audit", str(copy), "--domain", "atlantis"])
    assert res.exit_code == 2 and "unknown domain" in res.output
    res = runner.invoke(app, ["audit", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "Traceback" not in res.output


def _world(name: str):
    bp = catalog()[name]
    spec = derive_spec(bp, 0)
    return spec, seed_world(spec, bp, 0)


def test_tools_keep_derived_columns_and_rules_true() -> None:
    import random

    from scaleenv.tools.sampling import ArgSampler

    spec, w = _world("airline")
    book = spec.tool("book_seat")
    assert book is not None
    args = ArgSampler(w, random.Random(0)).satisfying_args(book, attempts=30)
    assert args is not None
    before = w.row("flights", args["flight_id"])["seats_sold"]
    assert execute_tool(w, book, args).ok
    # the operation adds 1 itself and inserts a reservation; the derived column stays the true count
    assert w.row("flights", args["flight_id"])["seats_sold"] == before + 1
    assert check_world(w) == []


def test_transitions_and_updates_keep_the_lifecycle_rules() -> None:
    spec, w = _world("football")
    postpone = next(t for t in spec.tools if t.meta.get("family") == "transition" and t.meta.get("to") == "postponed")
    fid = w.conn.execute("SELECT id FROM fixtures WHERE status = 'scheduled' LIMIT 1").fetchone()[0]
    assert execute_tool(w, postpone, {postpone.parameters[0].name: fid}).ok
    assert w.row("fixtures", fid)["goals_for"] is None
    create = next(t for t in spec.tools if t.meta.get("family") == "create" and t.meta.get("entity") == "fixtures")
    past = execute_tool(w, create, {"club_id": "CLB-0001", "opponent": "Harbor City", "competition": "cup",
                                    "venue": "home", "kickoff_at": "2026-05-17T15:00:00"})
    assert not past.ok and "out_of_time" in past.output, "a scheduled match cannot lie in the past"
    shirt = next(t for t in spec.tools if t.meta.get("family") == "update" and t.meta.get("column") == "shirt_number")
    a, b = w.conn.execute("SELECT p.id, q.shirt_number FROM players p JOIN players q ON q.club_id = p.club_id "
                          "AND q.id != p.id WHERE p.status != 'retired' AND q.status != 'retired' LIMIT 1").fetchone()
    dup = execute_tool(w, shirt, {shirt.parameters[0].name: a, "new_shirt_number": b})
    assert not dup.ok and "duplicate_shirt_number" in dup.output
    assert check_world(w) == []


def rows(domain: str, sql: str) -> list:
    """``sql`` run on the seeded base world of the catalog domain ``domain`` (seed 0)."""
    from synth_helpers import context

    conn = sqlite3.connect(":memory:")
    conn.deserialize(context(domain).base)
    return conn.execute(sql).fetchall()


def test_the_seeded_worlds_keep_the_rules_players_found_broken_in_round_27():
    """football: a ticket costs what buy_ticket charges (45 in the stands, 150 in the vip section, less 10
    or 20 percent) and a supporter holds at most 4 for a match; healthcare: a patient is in one consultation
    at a time; job seeking: one interview scheduled per application."""
    prices = rows("football", "SELECT section, price FROM tickets")
    assert prices and all(p in ((150.0, 135.0, 120.0) if s == "vip" else (45.0, 40.5, 36.0)) for s, p in prices)
    assert rows("football", "SELECT 1 FROM tickets WHERE status != 'refunded' GROUP BY fixture_id, supporter_id "
                            "HAVING COUNT(*) > 4") == []
    assert rows("healthcare_telemedicine", "SELECT 1 FROM consultations WHERE status = 'in_progress' "
                                           "GROUP BY patient_id HAVING COUNT(*) > 1") == []
    assert rows("job_seeking", "SELECT 1 FROM interviews WHERE status = 'scheduled' GROUP BY application_id "
                               "HAVING COUNT(*) > 1") == []


def test_the_seeded_worlds_keep_the_rules_players_found_broken_in_round_29():
    """healthcare: a refill in progress is of an active prescription, one at a time, and a prescription runs
    365 days (what prescribe_medication writes); express: a parcel costs the tariff; wedding: a booking costs
    the venue's rate and its deposit is a fifth; stock trading: a market order is filled and open buys fit the
    cash; pet care: a pet has one appointment at a time; football: a club plays one match a day."""
    hc = "healthcare_telemedicine"
    assert rows(hc, "SELECT r.id FROM refill_orders r JOIN prescriptions p ON p.id = r.prescription_id "
                    "WHERE r.status IN ('pending', 'ready') AND p.status != 'active'") == []
    assert rows(hc, "SELECT 1 FROM refill_orders WHERE status IN ('pending', 'ready') GROUP BY prescription_id "
                    "HAVING COUNT(*) > 1") == []
    assert rows(hc, "SELECT id FROM prescriptions WHERE expires_on != date(prescribed_on, '+365 days')") == []
    assert rows("express_logistics", "SELECT id FROM shipments WHERE price < ROUND(CASE service_level WHEN "
                "'standard' THEN 5 + 1.2 * weight_kg WHEN 'express' THEN 9 + 2 * weight_kg ELSE 15 + 3 * weight_kg "
                "END, 2) - 0.005") == []
    assert rows("wedding_planning", "SELECT id FROM venue_bookings WHERE ABS(deposit - ROUND(total_price * 0.2, 2)) "
                                    ">= 0.005") == []
    assert rows("stock_trading", "SELECT id FROM orders WHERE order_type = 'market' AND status != 'filled'") == []
    assert rows("stock_trading", "SELECT a.id FROM accounts a JOIN orders o ON o.account_id = a.id WHERE o.side = "
                "'buy' AND o.status = 'open' GROUP BY a.id HAVING SUM(o.quantity * o.price) > a.cash_balance + 0.005") == []
    assert rows("pet_care", "SELECT 1 FROM appointments WHERE status IN ('scheduled', 'checked_in') "
                            "GROUP BY pet_id, scheduled_at HAVING COUNT(*) > 1") == []
    assert rows("football", "SELECT 1 FROM fixtures WHERE status IN ('scheduled', 'played') "
                            "GROUP BY club_id, substr(kickoff_at, 1, 10) HAVING COUNT(*) > 1") == []
    # round 30: a contract's paid is the sum of its payments, none on a draft, none beyond its amount
    assert rows("wedding_planning", "SELECT c.id FROM vendor_contracts c WHERE ABS(c.paid - COALESCE((SELECT "
                "SUM(p.amount) FROM contract_payments p WHERE p.contract_id = c.id), 0)) > 0.005 OR c.paid > c.amount "
                "OR (c.status = 'draft' AND c.paid > 0)") == []
    assert rows("wedding_planning", "SELECT 1 FROM contract_payments") != []


def test_discontinuing_a_prescription_cancels_its_refills_in_progress():
    """A refill pending at the pharmacy is not left on a prescription the doctor stopped (play round 29)."""
    from scaleenv.world.world import World
    from synth_helpers import context

    ctx = context("healthcare_telemedicine")
    world = World.from_snapshot(ctx.spec, ctx.base)
    rx = world.conn.execute("SELECT r.prescription_id FROM refill_orders r JOIN prescriptions p ON "
                            "p.id = r.prescription_id WHERE r.status IN ('pending', 'ready') AND p.status = 'active' "
                            "ORDER BY 1 LIMIT 1").fetchone()[0]
    tool = ctx.spec.tool("discontinue_prescription") or ctx.spec.tool("stop_prescription")
    assert tool is not None
    assert execute_tool(world, tool, {"prescription_id": rx}).ok
    assert world.conn.execute("SELECT status FROM prescriptions WHERE id = ?", (rx,)).fetchone()[0] == "discontinued"
    assert {s for (s,) in world.conn.execute("SELECT status FROM refill_orders WHERE prescription_id = ?", (rx,))} \
        <= {"cancelled", "picked_up"}
    assert check_world(world) == []


def test_the_seeded_worlds_keep_the_rules_players_found_broken_in_round_31():
    """job seeking: no application still in screening has interviews (book_interview moves it on);
    marketplace: an offer is 40-100 percent of the asking price and waits only on a
    listing for sale, a listing is sold once; project management: work starts in a started sprint and is
    due by the sprint's end."""
    assert rows("job_seeking", "SELECT i.id FROM interviews i JOIN applications a ON a.id = i.application_id "
                               "WHERE a.status IN ('submitted', 'screening')") == []
    assert rows("job_seeking", "SELECT 1 FROM interviews WHERE status = 'scheduled'") != []
    market = "second_hand_marketplace"
    assert rows(market, "SELECT o.id FROM offers o JOIN listings l ON l.id = o.listing_id "
                        "WHERE o.amount < 0.4 * l.price - 0.01 OR o.amount > l.price + 0.01") == []
    assert rows(market, "SELECT o.id FROM offers o JOIN listings l ON l.id = o.listing_id "
                        "WHERE o.status = 'pending' AND l.status NOT IN ('active', 'reserved')") == []
    assert rows(market, "SELECT 1 FROM orders WHERE status != 'cancelled' GROUP BY listing_id HAVING COUNT(*) > 1") == []
    pm = "project_management"
    assert rows(pm, "SELECT t.id FROM tasks t JOIN sprints s ON s.id = t.sprint_id "
                    "WHERE t.status IN ('in_progress', 'in_review', 'done') AND s.status = 'planned'") == []
    assert rows(pm, "SELECT t.id FROM tasks t JOIN sprints s ON s.id = t.sprint_id WHERE t.due_date > s.end_date") == []
