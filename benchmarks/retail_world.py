"""A retail world at the scale of tau2-bench's retail domain, for the core benchmark.

About 500 users, 1,000 orders with their items, fulfillments and payments, and 50 products with
about 1,500 variants: close to 3 MB when the rows are dumped as JSON (tau2's ``db.json`` is 2.81 MB).
Everything is generated from an explicit ``random.Random(seed)``, so the world is identical on every run.
"""

from __future__ import annotations

import json
import random
from typing import Any

from scaleenv.formats.domain import DomainSpec

_ORDER_STATUS = ["pending", "processed", "delivered", "cancelled", "return requested", "exchange requested"]
_ADDRESS = ["address1", "address2", "city", "state", "country", "zip"]


def _address_params(prefix: str = "") -> list[dict[str, Any]]:
    return [
        {"name": a, "type": "string", "description": f"The {a} of the new address.",
         "column": f"{prefix}.{a}" if prefix else None}
        for a in _ADDRESS
    ]


SPEC: dict[str, Any] = {
    "name": "retail",
    "description": "An online retailer: users, products with variants, orders with items, fulfillments and payments.",
    "keywords": ["retail", "orders", "returns", "exchanges"],
    "tables": [
        {
            "name": "users",
            "primary_key": "user_id",
            "columns": [
                {"name": "user_id", "type": "text"},
                {"name": "first_name", "type": "text", "match": "semantic"},
                {"name": "last_name", "type": "text", "match": "semantic"},
                {"name": "email", "type": "text", "unique": True},
                {"name": "address1", "type": "text"},
                {"name": "address2", "type": "text"},
                {"name": "city", "type": "text"},
                {"name": "state", "type": "text"},
                {"name": "country", "type": "text"},
                {"name": "zip", "type": "text"},
                {"name": "phone", "type": "text"},
                {"name": "membership", "type": "text", "enum": ["regular", "gold", "platinum"]},
            ],
        },
        {
            "name": "payment_methods",
            "primary_key": "id",
            "columns": [
                {"name": "id", "type": "text"},
                {"name": "user_id", "type": "text", "foreign_key": "users.user_id"},
                {"name": "source", "type": "text", "enum": ["credit_card", "paypal", "gift_card"]},
                {"name": "brand", "type": "text", "nullable": True},
                {"name": "last_four", "type": "text", "nullable": True},
                {"name": "balance", "type": "real", "nullable": True, "min": 0},
            ],
        },
        {
            "name": "products",
            "primary_key": "product_id",
            "columns": [
                {"name": "product_id", "type": "text"},
                {"name": "name", "type": "text", "match": "semantic"},
            ],
        },
        {
            "name": "variants",
            "primary_key": "item_id",
            "columns": [
                {"name": "item_id", "type": "text"},
                {"name": "product_id", "type": "text", "foreign_key": "products.product_id"},
                {"name": "options", "type": "json"},
                {"name": "available", "type": "boolean"},
                {"name": "price", "type": "real", "min": 0},
                {"name": "sku", "type": "text"},
                {"name": "weight_kg", "type": "real", "min": 0},
            ],
        },
        {
            "name": "orders",
            "primary_key": "order_id",
            "columns": [
                {"name": "order_id", "type": "text"},
                {"name": "user_id", "type": "text", "foreign_key": "users.user_id"},
                {"name": "address1", "type": "text"},
                {"name": "address2", "type": "text"},
                {"name": "city", "type": "text"},
                {"name": "state", "type": "text"},
                {"name": "country", "type": "text"},
                {"name": "zip", "type": "text"},
                {"name": "status", "type": "text", "enum": _ORDER_STATUS},
                {"name": "shipping_method", "type": "text", "enum": ["standard", "express", "overnight"]},
                {"name": "total", "type": "real", "min": 0},
                {"name": "cancel_reason", "type": "text", "nullable": True,
                 "enum": ["no longer needed", "ordered by mistake"]},
                {"name": "created_at", "type": "datetime", "match": "exempt"},
            ],
        },
        {
            "name": "order_items",
            "primary_key": "id",
            "columns": [
                {"name": "id", "type": "text"},
                {"name": "order_id", "type": "text", "foreign_key": "orders.order_id"},
                {"name": "item_id", "type": "text", "foreign_key": "variants.item_id"},
                {"name": "product_id", "type": "text", "foreign_key": "products.product_id"},
                {"name": "name", "type": "text"},
                {"name": "price", "type": "real", "min": 0},
                {"name": "quantity", "type": "integer", "min": 1},
                {"name": "options", "type": "json"},
            ],
        },
        {
            "name": "fulfillments",
            "primary_key": "tracking_id",
            "columns": [
                {"name": "tracking_id", "type": "text"},
                {"name": "order_id", "type": "text", "foreign_key": "orders.order_id"},
                {"name": "item_ids", "type": "json"},
            ],
        },
        {
            "name": "payments",
            "primary_key": "id",
            "columns": [
                {"name": "id", "type": "integer", "match": "exempt"},
                {"name": "order_id", "type": "text", "foreign_key": "orders.order_id"},
                {"name": "transaction_type", "type": "text", "enum": ["payment", "refund"]},
                {"name": "amount", "type": "real", "min": 0},
                {"name": "payment_method_id", "type": "text", "foreign_key": "payment_methods.id"},
            ],
        },
    ],
    "tools": [
        {
            "name": "find_user_id_by_email",
            "description": "Find a user id by email address.",
            "kind": "read",
            "parameters": [{"name": "email", "type": "string", "column": "users.email",
                            "description": "The user's email, such as 'something@example.com'."}],
            "preconditions": [{"sql": "SELECT 1 FROM users WHERE email = :email", "error": "user_not_found",
                               "message": "no user with email {email}"}],
            "returns": {"query": "SELECT user_id FROM users WHERE email = :email", "mode": "scalar"},
            "errors": [{"code": "user_not_found"}],
        },
        {
            "name": "get_user_details",
            "description": "Get a user's profile, including their payment methods.",
            "kind": "read",
            "parameters": [{"name": "user_id", "type": "string", "column": "users.user_id",
                            "description": "The user id, such as 'sara_doe_496'."}],
            "preconditions": [{"sql": "SELECT 1 FROM users WHERE user_id = :user_id", "error": "user_not_found"}],
            "returns": {"query": "SELECT u.*, (SELECT json_group_array(json_object('id', id, 'source', source, "
                                 "'brand', brand, 'last_four', last_four, 'balance', balance)) FROM "
                                 "payment_methods p WHERE p.user_id = u.user_id) AS payment_methods "
                                 "FROM users u WHERE u.user_id = :user_id", "mode": "one", "table": "users"},
            "errors": [{"code": "user_not_found"}],
        },
        {
            "name": "get_order_details",
            "description": "Get the status and details of an order, including its items.",
            "kind": "read",
            "parameters": [{"name": "order_id", "type": "string", "column": "orders.order_id",
                            "description": "The order id, such as '#W0000000'."}],
            "preconditions": [{"sql": "SELECT 1 FROM orders WHERE order_id = :order_id", "error": "order_not_found",
                               "message": "no order with id {order_id}"}],
            "returns": {"query": "SELECT o.*, (SELECT json_group_array(json_object('item_id', item_id, 'name', "
                                 "name, 'price', price, 'options', json(options))) FROM order_items i WHERE "
                                 "i.order_id = o.order_id) AS items FROM orders o WHERE o.order_id = :order_id",
                        "mode": "one", "table": "orders"},
            "errors": [{"code": "order_not_found"}],
        },
        {
            "name": "get_product_details",
            "description": "Get a product and all of its variants.",
            "kind": "read",
            "parameters": [{"name": "product_id", "type": "string", "column": "products.product_id",
                            "description": "The product id."}],
            "preconditions": [{"sql": "SELECT 1 FROM products WHERE product_id = :product_id",
                               "error": "product_not_found"}],
            "returns": {"query": "SELECT item_id, options, available, price FROM variants "
                                 "WHERE product_id = :product_id ORDER BY item_id", "mode": "many",
                        "table": "variants"},
            "errors": [{"code": "product_not_found"}],
        },
        {
            "name": "cancel_pending_order",
            "description": "Cancel a pending order; the amount paid is refunded to the original payment method.",
            "kind": "write",
            "parameters": [
                {"name": "order_id", "type": "string", "column": "orders.order_id", "description": "The order id."},
                {"name": "reason", "type": "string", "enum": ["no longer needed", "ordered by mistake"],
                 "description": "Why the order is cancelled."},
            ],
            "generated": {"payment_id": {"kind": "next_id", "table": "payments", "column": "id", "width": 0}},
            "preconditions": [
                {"sql": "SELECT 1 FROM orders WHERE order_id = :order_id", "error": "order_not_found"},
                {"sql": "SELECT status = 'pending' FROM orders WHERE order_id = :order_id",
                 "error": "order_not_pending", "message": "order {order_id} is not pending"},
            ],
            "effects": [
                "UPDATE orders SET status = 'cancelled', cancel_reason = :reason WHERE order_id = :order_id",
                "INSERT INTO payments (id, order_id, transaction_type, amount, payment_method_id) "
                "SELECT :payment_id, order_id, 'refund', amount, payment_method_id FROM payments "
                "WHERE order_id = :order_id AND transaction_type = 'payment'",
            ],
            "postconditions": [
                {"sql": "SELECT status = 'cancelled' FROM orders WHERE order_id = :order_id",
                 "error": "order_not_pending"},
            ],
            "returns": {"query": "SELECT * FROM orders WHERE order_id = :order_id", "mode": "one"},
            "errors": [{"code": "order_not_found"}, {"code": "order_not_pending"}],
        },
        {
            "name": "modify_pending_order_address",
            "description": "Change the shipping address of a pending order.",
            "kind": "write",
            "parameters": [
                {"name": "order_id", "type": "string", "column": "orders.order_id", "description": "The order id."},
                *_address_params("orders"),
            ],
            "preconditions": [
                {"sql": "SELECT 1 FROM orders WHERE order_id = :order_id", "error": "order_not_found"},
                {"sql": "SELECT status = 'pending' FROM orders WHERE order_id = :order_id",
                 "error": "order_not_pending", "message": "order {order_id} is not pending"},
            ],
            "effects": [
                "UPDATE orders SET address1 = :address1, address2 = :address2, city = :city, state = :state, "
                "country = :country, zip = :zip WHERE order_id = :order_id",
            ],
            "postconditions": [
                {"sql": "SELECT zip = :zip AND address1 = :address1 FROM orders WHERE order_id = :order_id",
                 "error": "order_not_pending"},
            ],
            "returns": {"query": "SELECT * FROM orders WHERE order_id = :order_id", "mode": "one"},
            "errors": [{"code": "order_not_found"}, {"code": "order_not_pending"}],
        },
        {
            "name": "modify_user_address",
            "description": "Change a user's default address.",
            "kind": "write",
            "parameters": [
                {"name": "user_id", "type": "string", "column": "users.user_id", "description": "The user id."},
                *_address_params("users"),
            ],
            "preconditions": [{"sql": "SELECT 1 FROM users WHERE user_id = :user_id", "error": "user_not_found"}],
            "effects": [
                "UPDATE users SET address1 = :address1, address2 = :address2, city = :city, state = :state, "
                "country = :country, zip = :zip WHERE user_id = :user_id",
            ],
            "returns": {"query": "SELECT * FROM users WHERE user_id = :user_id", "mode": "one"},
            "errors": [{"code": "user_not_found"}],
        },
    ],
}

_FIRST = ["Sara", "Yusuf", "Aarav", "Mei", "Liam", "Olivia", "Noah", "Emma", "Lucas", "Amelia", "Mason",
          "Isabella", "Ethan", "Sofia", "Mohamed", "Chen", "Fatima", "Raj", "Yara", "Omar", "Anya", "Juan", "Ivan",
          "Lei", "Ava", "Mia", "Harper", "Evelyn", "Daiki", "Ines"]
_LAST = ["Doe", "Rossi", "Garcia", "Kim", "Nguyen", "Smith", "Brown", "Silva", "Khan", "Ito", "Muller", "Lopez",
         "Wilson", "Moore", "Taylor", "Lee", "Patel", "Ahmed", "Davis", "Martin", "Thomas", "Lewis", "Walker",
         "Young", "Allen", "Scott", "Green", "Baker", "Hill", "Clark"]
_CITIES = [("Austin", "TX"), ("Denver", "CO"), ("Seattle", "WA"), ("Phoenix", "AZ"), ("Chicago", "IL"),
           ("Boston", "MA"), ("Portland", "OR"), ("Columbus", "OH"), ("Charlotte", "NC"), ("San Diego", "CA")]
_STREETS = ["Main", "Oak", "Pine", "Maple", "Cedar", "Elm", "Hickory", "Willow", "Lake", "Hill", "Park", "River"]
_PRODUCTS = ["T-Shirt", "Jacket", "Sneakers", "Backpack", "Headphones", "Water Bottle", "Desk Lamp", "Office Chair",
             "Laptop", "Smartphone", "Tablet", "Smart Watch", "Bluetooth Speaker", "Coffee Maker", "Blender",
             "Air Purifier", "Vacuum Cleaner", "Electric Kettle", "Hiking Boots", "Running Shoes", "Sunglasses",
             "Wristwatch", "Wallet", "Luggage Set", "Yoga Mat", "Dumbbells", "Bicycle", "Skateboard", "Tent",
             "Sleeping Bag", "Camera Lens", "Tripod", "Keyboard", "Mouse", "Monitor", "Printer", "Router",
             "External Drive", "Gaming Console", "Board Game", "Puzzle", "Notebook", "Pen Set", "Perfume",
             "Makeup Kit", "Espresso Machine", "Grill", "Cookware", "Action Camera", "Fleece Jacket"]
_OPTS = {
    "color": ["black", "white", "red", "blue", "green", "grey", "silver", "navy", "beige", "purple"],
    "size": ["XS", "S", "M", "L", "XL", "XXL", "7", "8", "9", "10", "11", "12"],
    "material": ["cotton", "polyester", "leather", "nylon", "aluminum", "steel", "plastic", "wood", "glass"],
    "style": ["classic", "modern", "sport", "vintage", "minimalist", "deluxe"],
    "capacity": ["500ml", "750ml", "1L", "1.5L", "2L", "16GB", "32GB", "64GB", "128GB", "256GB", "1TB"],
}


def _names(n: int, k: int) -> list[str]:
    return [f"{i:0{k}d}" for i in range(n)]


def generate(seed: int = 0, *, users: int = 500, orders: int = 1000, products: int = 50,
             variants: int = 1500) -> dict[str, list[dict[str, Any]]]:
    """The rows of every table, in load order."""
    rng = random.Random(seed)
    out: dict[str, list[dict[str, Any]]] = {t["name"]: [] for t in SPEC["tables"]}

    def address() -> dict[str, str]:
        city, state = rng.choice(_CITIES)
        return {"address1": f"{rng.randint(10, 9999)} {rng.choice(_STREETS)} Street",
                "address2": f"Suite {rng.randint(100, 999)}", "city": city, "state": state,
                "country": "USA", "zip": f"{rng.randint(10000, 99999)}"}

    user_pms: dict[str, list[str]] = {}
    for i in range(users):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        uid = f"{first.lower()}_{last.lower()}_{1000 + i}"
        out["users"].append({"user_id": uid, "first_name": first, "last_name": last,
                             "email": f"{first.lower()}.{last.lower()}{1000 + i}@example.com", **address(),
                             "phone": f"+1-{rng.randint(200, 999)}-{rng.randint(200, 999)}-{rng.randint(0, 9999):04d}",
                             "membership": rng.choice(["regular", "regular", "gold", "platinum"])})
        pms = []
        for _ in range(rng.randint(1, 3)):
            source = rng.choice(["credit_card", "paypal", "gift_card"])
            pid = f"{source}_{rng.randint(1000000, 9999999)}"
            pms.append(pid)
            out["payment_methods"].append({
                "id": pid, "user_id": uid, "source": source,
                "brand": rng.choice(["visa", "mastercard", "amex"]) if source == "credit_card" else None,
                "last_four": f"{rng.randint(0, 9999):04d}" if source == "credit_card" else None,
                "balance": round(rng.uniform(0, 300), 2) if source == "gift_card" else None,
            })
        user_pms[uid] = pms

    per_product = [variants // products + (1 if i < variants % products else 0) for i in range(products)]
    catalog: list[tuple[str, str, list[dict[str, Any]]]] = []
    for i in range(products):
        pid = f"{rng.randint(10**9, 10**10 - 1)}"
        name = _PRODUCTS[i % len(_PRODUCTS)]
        out["products"].append({"product_id": pid, "name": name})
        keys = rng.sample(sorted(_OPTS), 3)
        vs = []
        for _ in range(per_product[i]):
            item_id = f"{rng.randint(10**9, 10**10 - 1)}"
            v = {"item_id": item_id, "product_id": pid,
                 "options": {k: rng.choice(_OPTS[k]) for k in keys},
                 "available": rng.random() < 0.7, "price": round(rng.uniform(5, 1500), 2),
                 "sku": f"{name[:3].upper()}-{item_id[-6:]}", "weight_kg": round(rng.uniform(0.05, 25), 3)}
            out["variants"].append(v)
            vs.append(v)
        catalog.append((pid, name, vs))

    uids = list(user_pms)
    pay_id = 0
    for i in range(orders):
        oid = f"#W{1000000 + i * 7919 % 9000000:07d}"
        uid = rng.choice(uids)
        status = rng.choice(_ORDER_STATUS)
        order = {
            "order_id": oid, "user_id": uid, **address(), "status": status,
            "shipping_method": rng.choice(["standard", "standard", "express", "overnight"]), "total": 0.0,
            "cancel_reason": rng.choice(["no longer needed", "ordered by mistake"]) if status == "cancelled" else None,
            "created_at": f"2026-0{rng.randint(1, 5)}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:00:00",
        }
        out["orders"].append(order)
        total = 0.0
        items = []
        for j in range(rng.randint(1, 5)):
            pid, name, vs = rng.choice(catalog)
            v = rng.choice(vs)
            items.append(v["item_id"])
            total += v["price"]
            out["order_items"].append({"id": f"{oid}-{j + 1}", "order_id": oid, "item_id": v["item_id"],
                                       "product_id": pid, "name": name, "price": v["price"], "quantity": 1,
                                       "options": v["options"]})
        order["total"] = round(total, 2)
        if status not in ("pending", "cancelled"):
            out["fulfillments"].append({"tracking_id": f"{rng.randint(10**11, 10**12 - 1)}", "order_id": oid,
                                        "item_ids": items})
        pm = rng.choice(user_pms[uid])
        pay_id += 1
        out["payments"].append({"id": pay_id, "order_id": oid, "transaction_type": "payment",
                                "amount": round(total, 2), "payment_method_id": pm})
        if status == "cancelled":
            pay_id += 1
            out["payments"].append({"id": pay_id, "order_id": oid, "transaction_type": "refund",
                                    "amount": round(total, 2), "payment_method_id": pm})
    return out


def spec() -> DomainSpec:
    return DomainSpec.model_validate(SPEC)


def build_world(seed: int = 0):
    """A loaded World plus its rows (so callers can measure the JSON size)."""
    from scaleenv.world import World

    rows = generate(seed)
    world = World(spec())
    for table, table_rows in rows.items():
        world.load_rows(table, table_rows)
    return world, rows


def json_size_bytes(rows: dict[str, list[dict[str, Any]]]) -> int:
    return len(json.dumps(rows, indent=2).encode())
