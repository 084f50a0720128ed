"""Seeding never fails for a catalog domain: a row that breaks a rule about its parent gets a
conforming parent instead of being redrawn blindly (``benchmarks/seed_sweep.py`` runs many seeds)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaleenv.synth.procedural.blueprint import Blueprint, catalog
from scaleenv.synth.procedural.derive import derive_spec
from scaleenv.synth.procedural.domain import seed_world
from scaleenv.synth.procedural.seeddata import seed_rows
from scaleenv.world.invariants import check_world

# 131 broke second_hand_marketplace (no completed order for a review after 80 draws)
SEEDS = [3, 57, 131]


@pytest.mark.parametrize("name", sorted(catalog()))
def test_every_catalog_domain_seeds_at_a_handful_of_seeds(name: str) -> None:
    bp = catalog()[name]
    for seed in SEEDS:
        world = seed_world(derive_spec(bp, seed), bp, seed)
        assert check_world(world, limit=1) == [], (name, seed)


def test_the_seed_that_used_to_fail_picks_completed_orders_for_its_reviews() -> None:
    rows = seed_rows(catalog()["second_hand_marketplace"], 131)
    status = {o["id"]: o["status"] for o in rows["orders"]}
    assert rows["reviews"] and all(status[r["order_id"]] == "completed" for r in rows["reviews"])


def test_the_same_seed_gives_the_same_rows() -> None:
    bp = catalog()["library_services"]
    assert seed_rows(bp, 5) == seed_rows(bp, 5)
    assert seed_rows(bp, 5) != seed_rows(bp, 6)


def test_a_table_whose_parents_run_out_keeps_the_rows_that_obey() -> None:
    data = catalog()["online_learning"].model_dump(by_alias=True)
    certs = next(e for e in data["entities"] if e["name"] == "certificates")
    certs["count"] = 400  # far more than completed enrollments, one certificate each
    certs["constraints"] = [{"kind": "at_most", "name": "one_per_enrollment", "key": ["enrollment_id"]}]
    bp = Blueprint.model_validate(data)
    rows = seed_rows(bp, 0)
    completed = {e["id"] for e in rows["enrollments"] if e["status"] == "completed"}
    got = [c["enrollment_id"] for c in rows["certificates"]]
    assert 3 <= len(got) <= len(completed) and len(set(got)) == len(got) and set(got) <= completed
    assert [c["id"] for c in rows["certificates"]] == [f"CRT-{i:04d}" for i in range(1, len(got) + 1)]


def test_a_build_whose_literal_request_cannot_replay_still_finishes(tmp_path: Path) -> None:
    # library_services at seed 1 holds a task whose forbidden call breaks a later step of the naive
    # gate's chain: the gate scores 0 instead of stopping the build
    from typer.testing import CliRunner

    from scaleenv.cli import app

    res = CliRunner().invoke(app, ["build", "--domain", "library_services", "--tasks-per-domain", "24", "--seed", "1",
                                   "--executor", "serial", "--out", str(tmp_path / "u")])
    assert res.exit_code == 0, res.output[-400:]
    made = re.search(r"(\d+) verified tasks", res.output)
    assert made is not None and 20 <= int(made.group(1)) <= 24, res.output[-400:]  # the attempt budget may leave one out
