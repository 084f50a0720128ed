"""Deliberately broken blueprints are rejected, or their tools are not admitted, with the reason reported."""

from __future__ import annotations

import copy

import pytest
import yaml

from scaleenv.errors import SpecError
from scaleenv.synth.procedural.blueprint import CATALOG_DIR, Blueprint
from scaleenv.synth.procedural.domain import build_domain


def _pet_care() -> dict:
    return yaml.safe_load((CATALOG_DIR / "pet_care.yaml").read_text())


def _op(data: dict, name: str) -> dict:
    return next(o for o in data["operations"] if name in (o["name"] if isinstance(o["name"], list) else [o["name"]]))


def test_broken_foreign_key_is_rejected():
    data = _pet_care()
    data["entities"][2]["columns"][0]["ref"] = "owner_typo"
    with pytest.raises(SpecError) as e:
        build_domain(Blueprint.model_validate(data), 0)
    assert any("owner_typo" in reason or "owner_typo" in path for path, reason in e.value.problems)


def test_contract_on_missing_column_is_rejected():
    data = _pet_care()
    _op(data, "pay_invoice")["preconditions"][0]["sql"] = "SELECT 1 FROM invoices WHERE no_such_col = :invoice_id"
    with pytest.raises(SpecError) as e:
        build_domain(Blueprint.model_validate(data), 0)
    path, reason = e.value.problems[0]
    assert "preconditions[0]" in path and "no_such_col" in reason


def test_effect_that_violates_its_postcondition_is_not_admitted():
    data = copy.deepcopy(_pet_care())
    op = _op(data, "pay_invoice")
    op["effects"][0] = "UPDATE invoices SET paid = ROUND(paid + :amount * 3, 2) WHERE id = :invoice_id"
    op["postconditions"] = [{"sql": "SELECT paid <= amount - 1000 FROM invoices WHERE id = :invoice_id",
                             "error": "overpayment"}]
    d = build_domain(Blueprint.model_validate(data), 0)
    names = {n for n in (op["name"] if isinstance(op["name"], list) else [op["name"]])}
    rejected = set(d.tests["rejected"])
    assert names & rejected, rejected
    report = next(r for r in d.tests["reports"] if r["tool"] in names)
    assert not report["admitted"]
    assert report["failures"] and report["failures"][0]["verdict"] == "unexpected_failure"
    assert all(t.name not in names for t in d.spec.tools)


def test_unsatisfiable_rule_is_not_admitted_with_reason():
    data = _pet_care()
    _op(data, "transfer_pet")["preconditions"].append(
        {"sql": "SELECT 0 FROM pets WHERE id = :pet_id", "error": "same_owner"})
    d = build_domain(Blueprint.model_validate(data), 0)
    rep = next(r for r in d.tests["reports"] if r["tool"] in ("transfer_pet", "change_pet_owner"))
    assert not rep["admitted"]
    assert "satisf" in rep["failures"][0]["reason"] or "failed" in rep["failures"][0]["reason"]


def test_boolean_columns_get_tested_tools():
    data = _pet_care()
    pets = next(e for e in data["entities"] if e["name"] == "pets")
    pets["columns"].append({"name": "neutered", "type": "boolean", "gen": {"bool": 0.5}, "mutable": True})
    found = False
    for seed in range(4):  # a seed may drop the optional update tool
        d = build_domain(Blueprint.model_validate(data), seed)
        assert d.tests["counts"]["unexpected_failure"] == 0, d.tests["rejected"]
        update = next((t for t in d.spec.tools if t.name.endswith("pet_neutered")), None)
        if update is not None:
            assert update.param("new_neutered").type == "boolean"
            found = True
    assert found


def test_missing_ids_are_really_missing():
    from scaleenv.tools.sampling import _missing_like

    existing = {"PET-0099", "PET-9999"}
    assert _missing_like("PET-0042", existing) not in existing
    assert _missing_like("PET-0042", set()) == "PET-9999"
