"""Data that broke its domain's own rules in play round 15: open orders on closed brokerage accounts, market
orders left open for a week, tickets sold for away fixtures. Each rule now holds in the base world and in
every task world the generator makes (the invariant audit checks the latter for whole builds)."""

from __future__ import annotations

from scaleenv.world.invariants import check_world
from scaleenv.world.world import World
from synth_helpers import context


def _base(name: str) -> World:
    ctx = context(name)
    return World.from_snapshot(ctx.spec, ctx.base)


def test_no_open_order_on_a_closed_account_and_no_market_order_waits():
    world = _base("stock_trading")
    rows = world.conn.execute("SELECT a.status, o.order_type FROM orders o JOIN accounts a ON a.id = o.account_id "
                              "WHERE o.status = 'open'").fetchall()
    assert rows and all(status != "closed" and kind == "limit" for status, kind in rows)
    names = {i.name for i in world.spec.invariants}
    assert {"orders.no_open_orders_on_a_closed_account", "orders.market_orders_fill_at_once"} <= names
    assert check_world(world) == []


def test_tickets_are_sold_for_home_fixtures_only():
    world = _base("football")
    venues = {r[0] for r in world.conn.execute(
        "SELECT f.venue FROM tickets t JOIN fixtures f ON f.id = t.fixture_id")}
    assert venues == {"home"}
    assert "tickets.sold_for_a_home_fixture" in {i.name for i in world.spec.invariants}
    assert check_world(world) == []
