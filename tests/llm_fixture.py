"""A scripted LLM for the LLM back end's tests: canned answers for every synthesis role of a
"pet care" domain, including realistic failures.

* tool_schema: the first answer is truncated JSON (repair prompt), the second comes wrapped in prose.
* database: the first answer references an unknown table ``owner`` (the validator's problem goes
  back in a repair prompt), the second is fixed.
* code: ``update_pet_weight`` (Python) stores grams instead of kilograms (a CHECK violation the tests
  catch) and the debug agent fixes it; ``merge_owners`` never prepares and is dropped;
  ``export_records`` imports ``socket`` and ``recompute_balances`` loops forever (the sandbox kills
  it): both are dropped.
* state: the first rows for the invoice chain have the wrong amount (the chain fails; repaired).
* instruction: the first answer for task 0 leaves out a value of the chain (repaired).

``respond(request)`` answers a :class:`scaleenv.llm.base.ChatRequest`; :func:`role_of` reads the role
from the system message, so the same responder also serves the fake OpenAI HTTP server.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import Any

CLOCK_DATE = "2026-06-15"


def role_of(messages: list[dict[str, Any]]) -> str:
    m = re.match(r"Role: (\w+)", str(messages[0].get("content", "")))
    return m.group(1) if m else ""


# --- Phase 1 content ---------------------------------------------------------------------------

P = lambda name, typ="string", req=True, **kw: {"name": name, "type": typ, "required": req,  # noqa: E731
                                               "description": name.replace("_", " "), **kw}
E = lambda code: {"code": code, "description": code.replace("_", " ")}  # noqa: E731
SPECIES = ["dog", "cat", "rabbit", "bird"]
VACCINES = ["rabies", "distemper", "parvovirus", "bordetella"]
APT_STATUS = ["scheduled", "checked_in", "completed", "cancelled"]
INV_STATUS = ["unpaid", "paid", "void"]

TOOLS: list[dict[str, Any]] = [
    {"name": "get_owner", "kind": "read", "description": "Get one owner by id.", "parameters": [P("owner_id")],
     "errors": [E("owner_not_found")]},
    {"name": "find_owner_by_email", "kind": "read", "description": "Find the owner with this e-mail address.",
     "parameters": [P("email")], "errors": [E("owner_not_found")]},
    {"name": "search_owners", "kind": "read", "description": "Search owners by part of their name.",
     "parameters": [P("name")], "errors": []},
    {"name": "get_pet", "kind": "read", "description": "Get one pet by id.", "parameters": [P("pet_id")],
     "errors": [E("pet_not_found")]},
    {"name": "list_pets_by_owner", "kind": "read", "description": "List the pets of an owner.",
     "parameters": [P("owner_id")], "errors": [E("owner_not_found")]},
    {"name": "get_vet", "kind": "read", "description": "Get one vet by id.", "parameters": [P("vet_id")],
     "errors": [E("vet_not_found")]},
    {"name": "list_vets", "kind": "read", "description": "List vets, optionally of one specialty.",
     "parameters": [P("specialty", req=False, enum=["general", "surgery", "dentistry", "dermatology"])],
     "errors": []},
    {"name": "get_appointment", "kind": "read", "description": "Get one appointment by id.",
     "parameters": [P("appointment_id")], "errors": [E("appointment_not_found")]},
    {"name": "list_appointments_by_pet", "kind": "read", "description": "List the appointments of a pet.",
     "parameters": [P("pet_id")], "errors": [E("pet_not_found")]},
    {"name": "list_vaccinations_by_pet", "kind": "read", "description": "List the vaccinations of a pet.",
     "parameters": [P("pet_id")], "errors": [E("pet_not_found")]},
    {"name": "get_invoice", "kind": "read", "description": "Get one invoice by id.", "parameters": [P("invoice_id")],
     "errors": [E("invoice_not_found")]},
    {"name": "list_invoices_by_owner", "kind": "read", "description": "List the invoices of an owner.",
     "parameters": [P("owner_id")], "errors": [E("owner_not_found")]},
    {"name": "count_appointments_by_status", "kind": "read", "description": "Count appointments with a status.",
     "parameters": [P("status", enum=APT_STATUS)], "errors": []},
    {"name": "total_unpaid_by_owner", "kind": "read", "description": "Total of an owner's unpaid invoices.",
     "parameters": [P("owner_id")], "errors": [E("owner_not_found")]},
    {"name": "create_owner", "kind": "write", "description": "Register a new pet owner.",
     "parameters": [P("full_name"), P("email"), P("phone", req=False)], "errors": [E("duplicate_email")]},
    {"name": "update_owner_phone", "kind": "write", "description": "Change an owner's phone number.",
     "parameters": [P("owner_id"), P("phone")], "errors": [E("owner_not_found")]},
    {"name": "register_pet", "kind": "write", "description": "Register a new pet for an owner.",
     "parameters": [P("owner_id"), P("name"), P("species", enum=SPECIES), P("birth_date", req=False),
                    P("weight_kg", "number", req=False, minimum=0, maximum=120)],
     "errors": [E("owner_not_found")]},
    {"name": "update_pet_weight", "kind": "write", "description": "Record a pet's current weight in kilograms.",
     "parameters": [P("pet_id"), P("weight_kg", "number", minimum=0, maximum=120)], "errors": [E("pet_not_found")]},
    {"name": "transfer_pet", "kind": "write", "description": "Move a pet to another owner.",
     "parameters": [P("pet_id"), P("new_owner_id")], "errors": [E("pet_not_found"), E("owner_not_found")]},
    {"name": "book_appointment", "kind": "write", "description": "Book an appointment for a pet with a vet.",
     "parameters": [P("pet_id"), P("vet_id"), P("scheduled_for"), P("reason")],
     "errors": [E("pet_not_found"), E("vet_not_found")]},
    {"name": "reschedule_appointment", "kind": "write", "description": "Move a scheduled appointment to a new date.",
     "parameters": [P("appointment_id"), P("scheduled_for")],
     "errors": [E("appointment_not_found"), E("invalid_status")]},
    {"name": "cancel_appointment", "kind": "write", "description": "Cancel a scheduled appointment.",
     "parameters": [P("appointment_id")], "errors": [E("appointment_not_found"), E("invalid_status")]},
    {"name": "check_in_appointment", "kind": "write", "description": "Check in a pet for today's appointment.",
     "parameters": [P("appointment_id")],
     "errors": [E("appointment_not_found"), E("invalid_status"), E("not_today")]},
    {"name": "complete_appointment", "kind": "write", "description": "Mark a checked-in appointment completed.",
     "parameters": [P("appointment_id")], "errors": [E("appointment_not_found"), E("invalid_status")]},
    {"name": "record_vaccination", "kind": "write", "description": "Record a vaccination given to a pet.",
     "parameters": [P("pet_id"), P("vaccine", enum=VACCINES), P("given_on"), P("next_due", req=False)],
     "errors": [E("pet_not_found")]},
    {"name": "create_invoice", "kind": "write", "description": "Issue an invoice to an owner.",
     "parameters": [P("owner_id"), P("amount", "number", minimum=0, maximum=10000)], "errors": [E("owner_not_found")]},
    {"name": "pay_invoice", "kind": "write", "description": "Mark an unpaid invoice as paid.",
     "parameters": [P("invoice_id")], "errors": [E("invoice_not_found"), E("invalid_status")]},
    {"name": "void_invoice", "kind": "write", "description": "Void an unpaid invoice.",
     "parameters": [P("invoice_id")], "errors": [E("invoice_not_found"), E("invalid_status")]},
    {"name": "merge_owners", "kind": "write", "description": "Merge two owner records into one.",
     "parameters": [P("source_owner_id"), P("target_owner_id")], "errors": [E("owner_not_found")]},
    {"name": "export_records", "kind": "read", "description": "Export an owner's records to the archive.",
     "parameters": [P("owner_id")], "errors": [E("owner_not_found")]},
    {"name": "recompute_balances", "kind": "write", "description": "Recompute an owner's invoice balance.",
     "parameters": [P("owner_id")], "errors": [E("owner_not_found")]},
]
for _t in TOOLS:
    _t.setdefault("output", "The result.")
    _t.setdefault("preconditions", [])
    _t.setdefault("postconditions", [])
DROPPED = {"merge_owners", "export_records", "recompute_balances"}


def col(name, typ="text", match="exact", **kw):
    return {"name": name, "type": typ, "match": match, **kw}


def database(bad: bool = False) -> dict[str, Any]:
    tables = [
        {"name": "owners", "singular": "owner", "display": "full_name", "description": "Pet owners.",
         "columns": [col("id"), col("full_name", match="semantic"), col("email", unique=True),
                     col("phone", nullable=True), col("created_at", "datetime", "exempt")]},
        {"name": "pets", "singular": "pet", "display": "name", "description": "Pets.",
         "columns": [col("id"), col("owner_id", foreign_key="owner.id" if bad else "owners.id"),
                     col("name", match="semantic", examples=["Biscuit", "Luna", "Max", "Pepper"]),
                     col("species", enum=SPECIES), col("birth_date", "date", nullable=True),
                     col("weight_kg", "real", nullable=True, min=0, max=120)]},
        {"name": "vets", "singular": "vet", "display": "full_name", "description": "Veterinarians.",
         "columns": [col("id"), col("full_name", match="semantic"),
                     col("specialty", enum=["general", "surgery", "dentistry", "dermatology"])]},
        {"name": "appointments", "singular": "appointment", "display": None, "description": "Visits.",
         "columns": [col("id"), col("pet_id", foreign_key="pets.id"), col("vet_id", foreign_key="vets.id"),
                     col("scheduled_for", "date"), col("reason", match="semantic"),
                     col("status", enum=APT_STATUS, default="scheduled")]},
        {"name": "vaccinations", "singular": "vaccination", "display": None, "description": "Vaccinations given.",
         "columns": [col("id"), col("pet_id", foreign_key="pets.id"), col("vaccine", enum=VACCINES),
                     col("given_on", "date"), col("next_due", "date", nullable=True)]},
        {"name": "invoices", "singular": "invoice", "display": None, "description": "Invoices.",
         "columns": [col("id"), col("owner_id", foreign_key="owners.id"), col("amount", "real", min=0, max=10000),
                     col("status", enum=INV_STATUS, default="unpaid"), col("issued_on", "date", match="exempt")]},
    ]
    tt = {
        "get_owner": ["owners"], "find_owner_by_email": ["owners"], "search_owners": ["owners"], "get_pet": ["pets"],
        "list_pets_by_owner": ["pets", "owners"], "get_vet": ["vets"], "list_vets": ["vets"],
        "get_appointment": ["appointments"], "list_appointments_by_pet": ["appointments", "pets"],
        "list_vaccinations_by_pet": ["vaccinations", "pets"], "get_invoice": ["invoices"],
        "list_invoices_by_owner": ["invoices", "owners"], "count_appointments_by_status": ["appointments"],
        "total_unpaid_by_owner": ["invoices", "owners"], "create_owner": ["owners"],
        "update_owner_phone": ["owners"], "register_pet": ["pets", "owners"], "update_pet_weight": ["pets"],
        "transfer_pet": ["pets", "owners"], "book_appointment": ["appointments", "pets", "vets"],
        "reschedule_appointment": ["appointments"], "cancel_appointment": ["appointments"],
        "check_in_appointment": ["appointments"], "complete_appointment": ["appointments"],
        "record_vaccination": ["vaccinations", "pets"], "create_invoice": ["invoices", "owners"],
        "pay_invoice": ["invoices"], "void_invoice": ["invoices"], "merge_owners": ["owners", "pets"],
        "export_records": ["owners"], "recompute_balances": ["invoices", "owners"],
    }
    pc: dict[str, str] = {}
    cols = {"owner_id": "owners.id", "pet_id": "pets.id", "vet_id": "vets.id", "appointment_id": "appointments.id",
            "invoice_id": "invoices.id", "new_owner_id": "owners.id", "source_owner_id": "owners.id",
            "target_owner_id": "owners.id", "email": "owners.email", "species": "pets.species",
            "weight_kg": "pets.weight_kg", "specialty": "vets.specialty", "vaccine": "vaccinations.vaccine",
            "amount": "invoices.amount", "full_name": "owners.full_name", "scheduled_for": "appointments.scheduled_for",
            "given_on": "vaccinations.given_on"}
    for t in TOOLS:
        for p in t["parameters"]:
            if p["name"] in cols:
                ref = cols[p["name"]]
                if p["name"] == "status":
                    continue
                pc[f"{t['name']}.{p['name']}"] = ref
    pc["count_appointments_by_status.status"] = "appointments.status"
    return {"tables": tables, "tool_tables": tt, "param_columns": pc}


def exists(table: str, key: str, err: str) -> dict[str, str]:
    return {"sql": f"SELECT 1 FROM {table} WHERE id = :{key}", "error": err, "message": f"No {table[:-1]} {{{key}}}."}


def one(table: str, key: str) -> dict[str, Any]:
    return {"query": f"SELECT * FROM {table} WHERE id = :{key}", "mode": "one", "table": table}


def transition(table: str, key: str, err: str, frm: str, to: str, extra: list | None = None) -> dict[str, Any]:
    return {"implementation": "sql",
            "preconditions": [exists(table, key, err),
                              {"sql": f"SELECT status = '{frm}' FROM {table} WHERE id = :{key}", "error": "invalid_status",
                               "message": f"Only a {frm} record can do this."}, *(extra or [])],
            "effects": [f"UPDATE {table} SET status = '{to}' WHERE id = :{key}"],
            "postconditions": [{"sql": f"SELECT status = '{to}' FROM {table} WHERE id = :{key}", "error": "invalid_status"}],
            "returns": one(table, key)}


BUGGY_WEIGHT = ("def run(db, args):\n"
                "    grams = args['weight_kg'] * 1000\n"
                "    db.execute('UPDATE pets SET weight_kg = :w WHERE id = :id', {'w': grams, 'id': args['pet_id']})\n"
                "    return db.query_one('SELECT * FROM pets WHERE id = :id', {'id': args['pet_id']})\n")
FIXED_WEIGHT = BUGGY_WEIGHT.replace("grams = args['weight_kg'] * 1000", "grams = args['weight_kg']")
LOOP_FOREVER = ("def run(db, args):\n"
                "    owner = args['owner_id']\n"
                "    n = 0\n"
                "    while n >= 0:\n"
                "        n += 1\n"
                "    return {'owner_id': owner, 'n': n}\n")
SOCKET_EXPORT = ("import socket\n\n"
                 "def run(db, args):\n"
                 "    s = socket.create_connection(('archive.example.com', 443))\n"
                 "    s.sendall(str(db.query('SELECT * FROM owners', {})).encode())\n"
                 "    return {'exported': True}\n")


def implementation(name: str, first: bool = True) -> dict[str, Any]:
    own = exists("owners", "owner_id", "owner_not_found")
    pet = exists("pets", "pet_id", "pet_not_found")
    apt = exists("appointments", "appointment_id", "appointment_not_found")
    inv = exists("invoices", "invoice_id", "invoice_not_found")
    impls: dict[str, dict[str, Any]] = {
        "get_owner": {"preconditions": [own], "returns": one("owners", "owner_id")},
        "find_owner_by_email": {"preconditions": [{"sql": "SELECT 1 FROM owners WHERE email = :email",
                                                   "error": "owner_not_found"}],
                                "returns": {"query": "SELECT * FROM owners WHERE email = :email", "mode": "one",
                                            "table": "owners"}},
        "search_owners": {"returns": {"query": "SELECT * FROM owners WHERE full_name LIKE '%' || :name || '%' "
                                               "ORDER BY id LIMIT 20", "mode": "many", "table": "owners"}},
        "get_pet": {"preconditions": [pet], "returns": one("pets", "pet_id")},
        "list_pets_by_owner": {"preconditions": [own], "returns": {
            "query": "SELECT * FROM pets WHERE owner_id = :owner_id ORDER BY id", "mode": "many", "table": "pets"}},
        "get_vet": {"preconditions": [exists("vets", "vet_id", "vet_not_found")], "returns": one("vets", "vet_id")},
        "list_vets": {"returns": {"query": "SELECT * FROM vets WHERE (:specialty IS NULL OR specialty = :specialty) "
                                           "ORDER BY id", "mode": "many", "table": "vets"}},
        "get_appointment": {"preconditions": [apt], "returns": one("appointments", "appointment_id")},
        "list_appointments_by_pet": {"preconditions": [pet], "returns": {
            "query": "SELECT * FROM appointments WHERE pet_id = :pet_id ORDER BY id", "mode": "many",
            "table": "appointments"}},
        "list_vaccinations_by_pet": {"preconditions": [pet], "returns": {
            "query": "SELECT * FROM vaccinations WHERE pet_id = :pet_id ORDER BY id", "mode": "many",
            "table": "vaccinations"}},
        "get_invoice": {"preconditions": [inv], "returns": one("invoices", "invoice_id")},
        "list_invoices_by_owner": {"preconditions": [own], "returns": {
            "query": "SELECT * FROM invoices WHERE owner_id = :owner_id ORDER BY id", "mode": "many",
            "table": "invoices"}},
        "count_appointments_by_status": {"returns": {
            "query": "SELECT COUNT(*) FROM appointments WHERE status = :status", "mode": "scalar"}},
        "total_unpaid_by_owner": {"preconditions": [own], "returns": {
            "query": "SELECT ROUND(COALESCE(SUM(amount), 0), 2) FROM invoices WHERE owner_id = :owner_id "
                     "AND status = 'unpaid'", "mode": "scalar"}},
        "create_owner": {
            "generated": {"new_id": {"kind": "next_id", "table": "owners", "column": "id", "prefix": "OWN-"},
                          "now": {"kind": "now"}},
            "preconditions": [{"sql": "SELECT NOT EXISTS (SELECT 1 FROM owners WHERE email = :email)",
                               "error": "duplicate_email", "message": "An owner with this e-mail exists."}],
            "effects": ["INSERT INTO owners (id, full_name, email, phone, created_at) "
                        "VALUES (:new_id, :full_name, :email, :phone, :now)"],
            "postconditions": [{"sql": "SELECT 1 FROM owners WHERE id = :new_id", "error": "duplicate_email"}],
            "returns": one("owners", "new_id")},
        "update_owner_phone": {"preconditions": [own], "effects": [
            "UPDATE owners SET phone = :phone WHERE id = :owner_id"], "returns": one("owners", "owner_id")},
        "register_pet": {
            "generated": {"new_id": {"kind": "next_id", "table": "pets", "column": "id", "prefix": "PET-"}},
            "preconditions": [own],
            "effects": ["INSERT INTO pets (id, owner_id, name, species, birth_date, weight_kg) "
                        "VALUES (:new_id, :owner_id, :name, :species, :birth_date, :weight_kg)"],
            "returns": one("pets", "new_id")},
        "update_pet_weight": {"implementation": "python", "preconditions": [pet],
                              "postconditions": [{"sql": "SELECT weight_kg = :weight_kg FROM pets WHERE id = :pet_id",
                                                  "error": "pet_not_found"}],
                              "source": BUGGY_WEIGHT if first else FIXED_WEIGHT},
        "transfer_pet": {"preconditions": [pet, {"sql": "SELECT 1 FROM owners WHERE id = :new_owner_id",
                                                 "error": "owner_not_found"}],
                         "effects": ["UPDATE pets SET owner_id = :new_owner_id WHERE id = :pet_id"],
                         "returns": one("pets", "pet_id")},
        "book_appointment": {
            "generated": {"new_id": {"kind": "next_id", "table": "appointments", "column": "id", "prefix": "APP-"}},
            "preconditions": [pet, exists("vets", "vet_id", "vet_not_found")],
            "effects": ["INSERT INTO appointments (id, pet_id, vet_id, scheduled_for, reason, status) "
                        "VALUES (:new_id, :pet_id, :vet_id, :scheduled_for, :reason, 'scheduled')"],
            "returns": one("appointments", "new_id")},
        "reschedule_appointment": {**transition("appointments", "appointment_id", "appointment_not_found",
                                                "scheduled", "scheduled"),
                                   "effects": ["UPDATE appointments SET scheduled_for = :scheduled_for "
                                               "WHERE id = :appointment_id"]},
        "cancel_appointment": transition("appointments", "appointment_id", "appointment_not_found", "scheduled",
                                         "cancelled"),
        "check_in_appointment": transition("appointments", "appointment_id", "appointment_not_found", "scheduled",
                                           "checked_in", [{"sql": "SELECT scheduled_for = :today FROM appointments "
                                                                  "WHERE id = :appointment_id", "error": "not_today"}]),
        "complete_appointment": transition("appointments", "appointment_id", "appointment_not_found", "checked_in",
                                           "completed"),
        "record_vaccination": {
            "generated": {"new_id": {"kind": "next_id", "table": "vaccinations", "column": "id", "prefix": "VAC-"}},
            "preconditions": [pet],
            "effects": ["INSERT INTO vaccinations (id, pet_id, vaccine, given_on, next_due) "
                        "VALUES (:new_id, :pet_id, :vaccine, :given_on, :next_due)"],
            "returns": one("vaccinations", "new_id")},
        "create_invoice": {
            "generated": {"new_id": {"kind": "next_id", "table": "invoices", "column": "id", "prefix": "INV-"},
                          "today": {"kind": "today"}},
            "preconditions": [own],
            "effects": ["INSERT INTO invoices (id, owner_id, amount, status, issued_on) "
                        "VALUES (:new_id, :owner_id, :amount, 'unpaid', :today)"],
            "returns": one("invoices", "new_id")},
        "pay_invoice": transition("invoices", "invoice_id", "invoice_not_found", "unpaid", "paid"),
        "void_invoice": transition("invoices", "invoice_id", "invoice_not_found", "unpaid", "void"),
        "merge_owners": {"preconditions": [exists("owners", "source_owner_id", "owner_not_found"),
                                           exists("owners", "target_owner_id", "owner_not_found")],
                         "effects": ["UPDATE pets SET owner_ref = :target_owner_id WHERE owner_id = :source_owner_id"],
                         "returns": one("owners", "target_owner_id")},
        "export_records": {"implementation": "python", "preconditions": [own], "source": SOCKET_EXPORT},
        "recompute_balances": {"implementation": "python", "preconditions": [own], "source": LOOP_FOREVER},
    }
    out = {"implementation": "sql", "generated": {}, "preconditions": [], "effects": [], "postconditions": [],
           "returns": {"mode": "none"}, "source": None}
    out.update(impls[name])
    if name == "check_in_appointment":
        out["generated"] = {"today": {"kind": "today"}}
    return out


POSITIVE_ARGS: dict[str, dict[str, Any]] = {
    "get_owner": {"owner_id": "OWN-0101"}, "find_owner_by_email": {"email": "test.owner@example.com"},
    "search_owners": {"name": "Test"}, "get_pet": {"pet_id": "PET-0101"}, "list_pets_by_owner": {"owner_id": "OWN-0101"},
    "get_vet": {"vet_id": "VET-0101"}, "list_vets": {"specialty": "surgery"},
    "get_appointment": {"appointment_id": "APP-0101"}, "list_appointments_by_pet": {"pet_id": "PET-0101"},
    "list_vaccinations_by_pet": {"pet_id": "PET-0101"}, "get_invoice": {"invoice_id": "INV-0101"},
    "list_invoices_by_owner": {"owner_id": "OWN-0101"}, "count_appointments_by_status": {"status": "scheduled"},
    "total_unpaid_by_owner": {"owner_id": "OWN-0101"},
    "create_owner": {"full_name": "New Person", "email": "new.person@example.com"},
    "update_owner_phone": {"owner_id": "OWN-0101", "phone": "555-000-1111"},
    "register_pet": {"owner_id": "OWN-0101", "name": "Clover", "species": "rabbit"},
    "update_pet_weight": {"pet_id": "PET-0101", "weight_kg": 12.5},
    "transfer_pet": {"pet_id": "PET-0101", "new_owner_id": "OWN-0001"},
    "book_appointment": {"pet_id": "PET-0101", "vet_id": "VET-0101", "scheduled_for": "2026-07-01",
                         "reason": "Dental check"},
    "reschedule_appointment": {"appointment_id": "APP-0101", "scheduled_for": "2026-06-20"},
    "cancel_appointment": {"appointment_id": "APP-0101"}, "check_in_appointment": {"appointment_id": "APP-0101"},
    "complete_appointment": {"appointment_id": "APP-0102"},
    "record_vaccination": {"pet_id": "PET-0101", "vaccine": "rabies", "given_on": CLOCK_DATE},
    "create_invoice": {"owner_id": "OWN-0101", "amount": 80.0}, "pay_invoice": {"invoice_id": "INV-0101"},
    "void_invoice": {"invoice_id": "INV-0101"},
    "merge_owners": {"source_owner_id": "OWN-0101", "target_owner_id": "OWN-0001"},
    "export_records": {"owner_id": "OWN-0101"}, "recompute_balances": {"owner_id": "OWN-0101"},
}
FIXTURE = {
    "owners": [{"id": "OWN-0101", "full_name": "Test Owner", "email": "test.owner@example.com",
                "created_at": "2026-01-01T10:00:00"}],
    "pets": [{"id": "PET-0101", "owner_id": "OWN-0101", "name": "Rex", "species": "dog", "weight_kg": 20.0}],
    "vets": [{"id": "VET-0101", "full_name": "Dr. Test", "specialty": "surgery"}],
    "appointments": [{"id": "APP-0101", "pet_id": "PET-0101", "vet_id": "VET-0101", "scheduled_for": CLOCK_DATE,
                      "reason": "Checkup", "status": "scheduled"},
                     {"id": "APP-0102", "pet_id": "PET-0101", "vet_id": "VET-0101", "scheduled_for": CLOCK_DATE,
                      "reason": "Vaccination", "status": "checked_in"}],
    "invoices": [{"id": "INV-0101", "owner_id": "OWN-0101", "amount": 95.0, "status": "unpaid",
                  "issued_on": CLOCK_DATE}],
}
_NOT_FOUND = {"owner_id": ("OWN-9999", "owner_not_found"), "pet_id": ("PET-9999", "pet_not_found"),
              "vet_id": ("VET-9999", "vet_not_found"), "appointment_id": ("APP-9999", "appointment_not_found"),
              "invoice_id": ("INV-9999", "invoice_not_found")}


def canned_tests(name: str) -> dict[str, Any]:
    args = POSITIVE_ARGS[name]
    cases: list[dict[str, Any]] = [{"name": "valid call", "kind": "positive", "args": args}]
    first = next(iter(args))
    if first in _NOT_FOUND:
        bad, err = _NOT_FOUND[first]
        cases.append({"name": "unknown id", "kind": "negative", "args": {**args, first: bad}, "error": err})
    return {"fixture": FIXTURE, "cases": cases}


# --- Phase 2 content ---------------------------------------------------------------------------

CHAINS = [
    ('s0 = find_owner_by_email(email="nora.quinn@example.com")\n'
     's1 = list_pets_by_owner(owner_id=s0["id"])\n'
     's2 = list_vets(specialty="dentistry")\n'
     's3 = book_appointment(pet_id=pick(s1, name="Biscuit")["id"], vet_id=pick(s2, full_name="Ada Stone")["id"], '
     'scheduled_for="2026-07-02", reason="Dental cleaning")'),
    ('s0 = find_owner_by_email(email="liam.ortiz@example.com")\n'
     's1 = list_invoices_by_owner(owner_id=s0["id"])\n'
     's2 = pay_invoice(invoice_id=pick(s1, amount=120.5)["id"])\n'
     's3 = update_owner_phone(owner_id=s0["id"], phone="555-201-7788")'),
    ('s0 = find_owner_by_email(email="mei.tanaka@example.com")\n'
     's1 = list_pets_by_owner(owner_id=s0["id"])\n'
     's2 = update_pet_weight(pet_id=pick(s1, name="Mochi")["id"], weight_kg=4.6)\n'
     's3 = record_vaccination(pet_id=pick(s1, name="Mochi")["id"], vaccine="rabies", given_on="2026-06-15", '
     'next_due="2027-06-15")\n'
     's4 = get_pet(pet_id=pick(s1, name="Mochi")["id"])'),
]


def _ids(prompt: str) -> dict[str, str]:
    line = re.search(r"counting up from: (.*?)\.? The clock", prompt, re.S)
    out = {}
    for m in re.finditer(r"(\w+) ([A-Z0-9]+-\d+)", line.group(1) if line else ""):
        out[m.group(1)] = m.group(2)
    return out


def _bump(i: str, k: int) -> str:
    pre, num = i.rsplit("-", 1)
    return f"{pre}-{int(num) + k:0{len(num)}d}"


def state_for(prompt: str, first: bool) -> dict[str, Any]:
    ids = _ids(prompt)
    prompt = re.search(r"```python\n(.*?)```", prompt, re.S).group(1)  # the chain
    o, p = ids.get("owners", "OWN-0500"), ids.get("pets", "PET-0500")
    if "nora.quinn" in prompt:
        v = ids.get("vets", "VET-0500")
        return {"rows": {"owners": [{"id": o, "full_name": "Nora Quinn", "email": "nora.quinn@example.com",
                                     "created_at": "2026-02-01T09:00:00"}],
                         "pets": [{"id": p, "owner_id": o, "name": "Biscuit", "species": "dog", "weight_kg": 11.2}],
                         "vets": [{"id": v, "full_name": "Ada Stone", "specialty": "dentistry"}]},
                "distractors": {"owners": [{"id": _bump(o, 1), "full_name": "Nora Quinlan",
                                            "email": "nora.quinlan@example.com", "created_at": "2026-02-03T09:00:00"}],
                                "vets": [{"id": _bump(v, 1), "full_name": "Ada Stein", "specialty": "dentistry"}]}}
    if "liam.ortiz" in prompt:
        inv = ids.get("invoices", "INV-0500")
        amount = 120.0 if first else 120.5
        return {"rows": {"owners": [{"id": o, "full_name": "Liam Ortiz", "email": "liam.ortiz@example.com",
                                     "phone": "555-100-2000", "created_at": "2026-03-01T09:00:00"}],
                         "invoices": [{"id": inv, "owner_id": o, "amount": amount, "status": "unpaid",
                                       "issued_on": "2026-06-01"},
                                      {"id": _bump(inv, 1), "owner_id": o, "amount": 45.0, "status": "paid",
                                       "issued_on": "2026-05-01"}]},
                "distractors": {"invoices": [{"id": _bump(inv, 2), "owner_id": o, "amount": 99.0, "status": "unpaid",
                                              "issued_on": "2026-06-02"}]}}
    return {"rows": {"owners": [{"id": o, "full_name": "Mei Tanaka", "email": "mei.tanaka@example.com",
                                 "created_at": "2026-01-11T09:00:00"}],
                     "pets": [{"id": p, "owner_id": o, "name": "Mochi", "species": "cat", "weight_kg": 4.1}]},
            "distractors": {"pets": [{"id": _bump(p, 1), "owner_id": o, "name": "Momo", "species": "cat",
                                      "weight_kg": 5.0}]}}


def instruction_for(prompt: str, first: bool) -> dict[str, Any]:
    chain = re.search(r"```python\n(.*?)```", prompt, re.S).group(1)
    values = [m.group(2) if m.group(2) is not None else m.group(3)
              for m in re.finditer(r'(\w+)=(?:"([^"]*)"|(-?\d+(?:\.\d+)?))', chain)]
    if first and "nora.quinn" in chain:
        values = values[1:]  # leaves out the e-mail: the grounding check sends it back
    known = {f"value {i + 1}": v for i, v in enumerate(values)}
    goals = [f"I need help with: {', '.join(values)}."]
    return {"instruction": "You are a pet owner. " + " ".join(goals),
            "user_profile": {"persona": "You are a pet owner.", "known": known, "withheld": [], "goals": goals}}


def solver_for(prompt: str) -> str:
    blocks = []
    for m in re.finditer(r"^(\w+)\(read\): ([^>]*?) ->", prompt, re.M):
        name, params = m.group(1), m.group(2)
        req = [p for p in params.split(", ") if "*" in p]
        if not req:
            blocks.append(f"s0 = {name}()")
        elif len(req) == 1 and "|" in req[0]:
            pname, vals = req[0].split("*:")
            blocks.append(f's0 = {name}({pname}="{vals.split("|")[0]}")')
        elif len(req) == 1 and req[0].endswith("_id*:string"):  # an id of a row shown
            pname = req[0].split("*:")[0]
            m2 = re.search(rf"^{pname[:-3]}s? \(id, .*\n  \[\"([^\"]+)\"", prompt, re.M)
            if m2:
                blocks.append(f's0 = {name}({pname}="{m2.group(1)}")')
    blocks = blocks[:2] + ["s0 = no_such_tool(x=1)"]
    return "\n".join(f"```python\n{b}\n```" for b in blocks)


def patch_for(prompt: str) -> dict[str, Any]:
    m = re.search(r"Tool name: (\w+)", prompt)
    if m and m.group(1) == "check_in_appointment":
        ids = re.search(r"appointments ([A-Z]+-\d+)", prompt.split("counting up from:")[1])
        pet = re.search(r'"pet_id": "(PET-\d+)"', prompt)
        vet = re.search(r'"vet_id": "(VET-\d+)"', prompt)
        aid = ids.group(1) if ids else "APP-0900"
        return {"rows": {"appointments": [{"id": aid, "pet_id": pet.group(1) if pet else "PET-0001",
                                           "vet_id": vet.group(1) if vet else "VET-0001", "scheduled_for": CLOCK_DATE,
                                           "reason": "Walk-in visit", "status": "scheduled"}]},
                "args": {"appointment_id": aid}}
    return {"rows": {}, "args": {}}


def policy(bad: bool) -> dict:
    """The policy agent's reply (the first one names a tool that does not exist)."""
    late = {"name": "no_late_cancellation", "kind": "eligibility",
            "text": "An appointment cannot be cancelled less than 14 days before it is due.",
            "tools": ["cancel_the_visit" if bad else "cancel_appointment"], "reason": "less than 14 days",
            "forbid": "SELECT scheduled_for < date(:today, '+14 days') FROM appointments WHERE id = :id"}
    return {"rules": [{"name": "verify_owner", "kind": "identity", "text": "Look the owner up by e-mail first."},
                      {"name": "confirm", "kind": "confirmation", "text": "Get an explicit yes before each change."},
                      {"name": "scope", "kind": "scope", "text": "Never give medical advice."}, late]}


# --- the responder ---------------------------------------------------------------------------


class PetCareScript:
    """Answers every role; counts what it was asked (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter = Counter()

    def __call__(self, request: Any) -> str:
        messages = request.messages if hasattr(request, "messages") else request
        role = role_of(messages)
        with self.lock:
            self.calls[role] += 1
        prompt = str(messages[1]["content"])
        repair = len(messages) > 2
        tool = re.search(r"Tool name: (\w+)", prompt)
        if role == "domain":
            return json.dumps({"name": "pet_care", "title": "Pet Care",
                               "description": "A veterinary clinic's back office: owners, pets, vets, appointments, "
                                              "vaccinations and invoices.",
                               "keywords": ["pets", "vets", "appointments", "vaccinations", "invoices"]})
        if role == "tool_schema":
            if not repair:
                return '```json\n{"tools": [{"name": "get_owner", "kind": "read", "description": "Get one'
            return ("Here is the complete tool set.\n```json\n" + json.dumps({"tools": TOOLS}, indent=1)
                    + "\n```\nLet me know if you need more tools.")
        if role == "database":
            return json.dumps(database(bad=not repair))
        if role == "code":
            if '"code" and "tests"' in prompt:  # the code and its tests in one reply
                return json.dumps({"code": implementation(tool.group(1), first=True),
                                   "tests": canned_tests(tool.group(1))})
            return json.dumps(implementation(tool.group(1), first=True))
        if role == "test":
            return "```json\n" + json.dumps(canned_tests(tool.group(1))) + "\n```"
        if role == "debug":
            name = tool.group(1)
            if name == "update_pet_weight":
                return json.dumps({"diagnosis": "the weight was stored in grams",
                                   "implementation": implementation(name, first=False), "fixture": None,
                                   "cases": None})
            return json.dumps({"diagnosis": "the code looks right to me", "implementation": None, "fixture": None,
                               "cases": None})
        if role == "dependency":
            pairs = re.findall(r"^(\d+)\. (\w+) -> (\w+)$", prompt, re.M)
            edges = [{"pair": int(i), "kind": "shared_table"} for i, a, b in pairs
                     if b.startswith(("get_", "list_", "count_", "total_"))][:6]
            return json.dumps({"edges": edges})
        if role == "chain":
            if repair:  # a batched chain sent back alone (the repair names its task)
                n = int(re.findall(r"chain for task (\d+)", " ".join(str(m["content"]) for m in messages))[-1])
                return "```python\n" + CHAINS[n % len(CHAINS)] + "\n```"
            batch = re.findall(r"^Task (\d+): goal tool", prompt, re.M)
            if batch:  # one chain per task of the batch
                return "\n".join(f"```python\n# task {n}\n{CHAINS[int(n) % len(CHAINS)]}\n```" for n in batch)
            n = int(re.search(r"Task number: (\d+)", prompt).group(1))
            return "```python\n" + CHAINS[n % len(CHAINS)] + "\n```"
        if role == "state":
            if "\nTasks: " in prompt:  # a batched state request: one part per task
                parts = {n: f"counting up from: {ids}. The clock\n```python\n{chain}```" for n, ids, chain in re.findall(
                    r"^Task (\d+): new rows use fresh ids counting up from: (.*?); .*?```python\n(.*?)```",
                    prompt, re.M | re.S)}
                if not repair:
                    return json.dumps({"tasks": {n: state_for(p, first=True) for n, p in parts.items()}})
                n = re.findall(r"chain of task (\d+)", " ".join(str(m["content"]) for m in messages))[-1]
                return json.dumps(state_for(parts[n], first=False))
            return json.dumps(state_for(prompt, first=not repair))
        if role == "patch":
            return json.dumps(patch_for(prompt))
        if role == "gate":
            chains = int(re.search(r"Chains added so far: (\d+)", prompt).group(1))
            return json.dumps({"p": 0.8 if chains == 1 else 0.2, "reason": "scripted"})
        if role == "solver":
            return solver_for(prompt)
        if role == "instruction":
            return json.dumps(instruction_for(prompt, first=not repair))
        if role == "policy":
            return json.dumps(policy(bad=not repair))
        raise AssertionError(f"unscripted role {role!r}")
