"""Look-alikes and clones have their own contact values and differ from the original in more than the
e-mail (express_logistics seed 7: the cloned target CUS-0044 kept CUS-0008's phone), and every built
task's initial world holds each identifying contact value once (the ``shared_contact`` audit check)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleenv.cli import app
from scaleenv.formats.domain import Column, Table
from scaleenv.synth.contacts import shared_contacts
from scaleenv.synth.procedural.blueprint import catalog
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.seeddata import seed_rows
from scaleenv.synth.tasks.context import DomainContext
from scaleenv.synth.tasks.state import distractor, fresh_unique, identity_columns, renamed
from scaleenv.synth.tasks.validity import lookalike_column
from scaleenv.universe import Universe
from scaleenv.world.patch import apply_patch
from scaleenv.world.world import World

runner = CliRunner()


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("u") / "universe"
    res = runner.invoke(app, ["build", "--domain", "express_logistics", "--domain", "wedding_planning", "--seed", "7",
                              "--tasks-per-domain", "12", "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def test_a_clone_has_its_own_phone_and_email() -> None:
    spec = derive_spec(catalog()["express_logistics"], 0)
    tbl = spec.table("customers")
    assert tbl is not None
    rng = random.Random(0)
    for row in seed_rows(catalog()["express_logistics"], 7)["customers"][:20]:
        taken = {row["email"], row["phone"]}
        clone = fresh_unique(tbl, row, rng, taken)
        assert clone["full_name"] == row["full_name"]
        assert clone["phone"] != row["phone"] and clone["email"] != row["email"], (row, clone)


def test_a_lookalike_differs_in_two_identifying_attributes_where_the_table_has_them() -> None:
    """A person table whose only contact value is the e-mail: the look-alike also lives elsewhere."""
    tbl = Table(name="students", columns=[Column(name="id"), Column(name="full_name"), Column(name="email", unique=True),
                                          Column(name="country"), Column(name="level")])
    row = {"id": "STU-0001", "full_name": "Maria Novak", "email": "maria.novak@example.com", "country": "Peru",
           "level": "beginner"}
    rng = random.Random(3)
    for _ in range(10):
        d = distractor(tbl, row, rng, {row["email"]})
        assert d["full_name"] == row["full_name"] and d["level"] == row["level"]
        assert d["email"] != row["email"] and d["country"] != row["country"], d


def test_copied_children_are_other_people() -> None:
    """A donor couple's guest copied to the target couple is someone else, with an e-mail of their own name."""
    spec = derive_spec(catalog()["wedding_planning"], 0)
    tbl = spec.table("guests")
    assert tbl is not None
    guest = seed_rows(catalog()["wedding_planning"], 0)["guests"][0]
    rng = random.Random(1)
    taken: set = {guest["email"]}
    copy = fresh_unique(tbl, renamed(tbl, guest, rng, taken), rng, taken)
    assert copy["full_name"] != guest["full_name"] and copy["email"] != guest["email"]
    assert copy["full_name"].split()[-1].lower() in copy["email"], copy


def test_no_task_world_shares_a_contact_value(universe: Path) -> None:
    u = Universe(universe)
    checked = 0
    for name in u.domains:
        spec = u.spec(name)
        ctx = DomainContext(spec, u.base(name), None)  # type: ignore[arg-type]
        for task in u.tasks(name):
            assert shared_contacts(task, ctx) == [], task.id
            checked += 1
    assert checked == 24


def test_target_and_its_lookalikes_differ_in_more_than_the_email(universe: Path) -> None:
    u = Universe(universe)
    spec = u.spec("express_logistics")
    ctx = DomainContext(spec, u.base("express_logistics"), None)  # type: ignore[arg-type]
    pairs = 0
    for task in u.tasks("express_logistics"):
        world = World.from_snapshot(spec, ctx.base)
        apply_patch(world, task.initial_patch)
        for row in task.initial_patch.get("customers", []):
            col = lookalike_column(ctx, "customers") or "full_name"
            for (other,) in world.conn.execute(f'SELECT id FROM customers WHERE "{col}" = ? AND id != ?',
                                               (row[col], row["id"])):
                o = world.row("customers", other)
                assert o is not None
                differ = [c for c in ("email", "phone", "city") if o[c] != row[c]]
                assert len(differ) >= 2, (task.id, row, o)
                pairs += 1
        world.close()
    assert pairs > 0


def test_the_audit_reports_a_shared_phone(universe: Path) -> None:
    u = Universe(universe)
    spec = u.spec("express_logistics")
    ctx = DomainContext(spec, u.base("express_logistics"), None)  # type: ignore[arg-type]
    task = next(t for t in u.tasks("express_logistics") if t.initial_patch.get("customers"))
    base = World.from_snapshot(spec, ctx.base)
    first = base.row("customers", "CUS-0001")
    assert first is not None
    patch = {t: [dict(r) for r in rows] for t, rows in task.initial_patch.items()}
    patch["customers"][0]["phone"] = first["phone"]
    bad = task.model_copy(update={"initial_patch": patch})
    found = shared_contacts(bad, ctx)
    assert len(found) == 1 and found[0][0] == "shared_contact" and "CUS-0001" in found[0][1], found
    assert "customers.phone" in found[0][1]


def test_a_correspondent_address_is_not_an_identity() -> None:
    spec = derive_spec(catalog()["email_management"], 0)
    by_table = {t.name: identity_columns(t) for t in spec.tables}
    assert by_table["contacts"] == ["email"] and by_table["accounts"] == ["email_address"]
    assert by_table["messages"] == [] and by_table["drafts"] == []  # many messages share a sender
