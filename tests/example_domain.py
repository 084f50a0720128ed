"""A small hand-written domain that exercises every core feature (types, constraints, contracts,
generated ids, a Python-implemented tool, semantic/exempt match policies)."""

from __future__ import annotations

from scaleenv.formats.domain import DomainSpec

SPEC = {
    "name": "bookshop",
    "description": "A small bookshop: customers, books, orders and payments.",
    "keywords": ["books", "orders"],
    "tables": [
        {
            "name": "customers",
            "primary_key": "id",
            "columns": [
                {"name": "id", "type": "text", "match": "exempt"},
                {"name": "name", "type": "text", "match": "semantic"},
                {"name": "email", "type": "text", "unique": True},
                {"name": "vip", "type": "boolean", "default": False},
                {"name": "joined", "type": "date"},
                {"name": "prefs", "type": "json", "nullable": True},
            ],
        },
        {
            "name": "books",
            "primary_key": "id",
            "columns": [
                {"name": "id", "type": "text"},
                {"name": "title", "type": "text", "match": "semantic"},
                {"name": "price", "type": "real", "min": 0},
                {"name": "stock", "type": "integer", "min": 0},
                {"name": "genre", "type": "text", "enum": ["fiction", "science", "history"]},
            ],
        },
        {
            "name": "orders",
            "primary_key": "id",
            "columns": [
                {"name": "id", "type": "text"},
                {"name": "customer_id", "type": "text", "foreign_key": "customers.id"},
                {"name": "book_id", "type": "text", "foreign_key": "books.id"},
                {"name": "quantity", "type": "integer", "min": 1, "max": 10},
                {"name": "total", "type": "real", "min": 0},
                {"name": "status", "type": "text", "enum": ["pending", "shipped", "cancelled"],
                 "default": "pending"},
                {"name": "note", "type": "text", "nullable": True, "match": "semantic"},
                {"name": "created_at", "type": "datetime", "match": "exempt"},
            ],
        },
        {
            "name": "payments",
            "primary_key": "id",
            "columns": [
                {"name": "id", "type": "integer"},
                {"name": "order_id", "type": "text", "foreign_key": "orders.id"},
                {"name": "amount", "type": "real", "min": 0},
                {"name": "refunded", "type": "real", "default": 0, "min": 0},
            ],
        },
    ],
    "tools": [
        {
            "name": "get_book",
            "description": "Look up a book by its id.",
            "kind": "read",
            "parameters": [{"name": "book_id", "type": "string", "column": "books.id",
                            "description": "The book id, e.g. B001."}],
            "preconditions": [{"sql": "SELECT 1 FROM books WHERE id = :book_id", "error": "not_found",
                               "message": "no book with id {book_id}"}],
            "returns": {"query": "SELECT * FROM books WHERE id = :book_id", "mode": "one", "table": "books"},
            "errors": [{"code": "not_found", "description": "The book does not exist."}],
        },
        {
            "name": "search_books",
            "description": "Search books by genre and maximum price.",
            "kind": "read",
            "parameters": [
                {"name": "genre", "type": "string", "enum": ["fiction", "science", "history"], "required": False},
                {"name": "max_price", "type": "number", "minimum": 0, "required": False},
            ],
            "returns": {"query": "SELECT * FROM books WHERE (:genre IS NULL OR genre = :genre) AND "
                                 "(:max_price IS NULL OR price <= :max_price) ORDER BY id", "mode": "many",
                        "table": "books"},
        },
        {
            "name": "place_order",
            "description": "Place an order for a book; stock is reserved.",
            "kind": "write",
            "parameters": [
                {"name": "customer_id", "type": "string", "column": "customers.id"},
                {"name": "book_id", "type": "string", "column": "books.id"},
                {"name": "quantity", "type": "integer", "minimum": 1, "maximum": 10},
                {"name": "note", "type": "string", "required": False},
            ],
            "generated": {"order_id": {"kind": "next_id", "table": "orders", "column": "id", "prefix": "O",
                                       "width": 3},
                          "now": {"kind": "now"}},
            "preconditions": [
                {"sql": "SELECT 1 FROM customers WHERE id = :customer_id", "error": "customer_not_found"},
                {"sql": "SELECT 1 FROM books WHERE id = :book_id", "error": "book_not_found"},
                {"sql": "SELECT stock >= :quantity FROM books WHERE id = :book_id", "error": "out_of_stock",
                 "message": "not enough copies of {book_id} in stock"},
            ],
            "effects": [
                "INSERT INTO orders (id, customer_id, book_id, quantity, total, status, note, created_at) "
                "SELECT :order_id, :customer_id, :book_id, :quantity, price * :quantity, 'pending', :note, :now "
                "FROM books WHERE id = :book_id",
                "UPDATE books SET stock = stock - :quantity WHERE id = :book_id",
            ],
            "postconditions": [{"sql": "SELECT stock >= 0 FROM books WHERE id = :book_id",
                                "error": "out_of_stock"}],
            "returns": {"query": "SELECT * FROM orders WHERE id = :order_id", "mode": "one", "table": "orders"},
            "errors": [{"code": "customer_not_found"}, {"code": "book_not_found"}, {"code": "out_of_stock"}],
        },
        {
            "name": "cancel_order",
            "description": "Cancel a pending order and return its stock.",
            "kind": "write",
            "parameters": [{"name": "order_id", "type": "string", "column": "orders.id"}],
            "preconditions": [
                {"sql": "SELECT 1 FROM orders WHERE id = :order_id", "error": "not_found"},
                {"sql": "SELECT status = 'pending' FROM orders WHERE id = :order_id", "error": "invalid_status",
                 "message": "only pending orders can be cancelled"},
            ],
            "effects": [
                "UPDATE books SET stock = stock + (SELECT quantity FROM orders WHERE id = :order_id) "
                "WHERE id = (SELECT book_id FROM orders WHERE id = :order_id)",
                "UPDATE orders SET status = 'cancelled' WHERE id = :order_id",
            ],
            "postconditions": [{"sql": "SELECT status = 'cancelled' FROM orders WHERE id = :order_id",
                                "error": "invalid_status"}],
            "returns": {"query": "SELECT * FROM orders WHERE id = :order_id", "mode": "one"},
            "errors": [{"code": "not_found"}, {"code": "invalid_status"}],
        },
        {
            "name": "refund_payment",
            "description": "Refund part of a payment; refunds never exceed what was paid.",
            "kind": "write",
            "parameters": [
                {"name": "payment_id", "type": "integer", "column": "payments.id"},
                {"name": "amount", "type": "number", "minimum": 0.01},
            ],
            "preconditions": [
                {"sql": "SELECT 1 FROM payments WHERE id = :payment_id", "error": "not_found"},
                {"sql": "SELECT amount - refunded >= :amount FROM payments WHERE id = :payment_id",
                 "error": "refund_exceeds_payment"},
            ],
            "effects": ["UPDATE payments SET refunded = refunded + :amount WHERE id = :payment_id"],
            "postconditions": [{"sql": "SELECT refunded <= amount FROM payments WHERE id = :payment_id",
                                "error": "refund_exceeds_payment"}],
            "returns": {"query": "SELECT * FROM payments WHERE id = :payment_id", "mode": "one"},
            "errors": [{"code": "not_found"}, {"code": "refund_exceeds_payment"}],
        },
        {
            "name": "set_vip",
            "description": "Mark a customer as VIP (implemented in Python over the world API).",
            "kind": "write",
            "parameters": [{"name": "customer_id", "type": "string", "column": "customers.id"},
                           {"name": "vip", "type": "boolean"}],
            "preconditions": [{"sql": "SELECT 1 FROM customers WHERE id = :customer_id", "error": "not_found"}],
            "postconditions": [{"sql": "SELECT vip = :vip FROM customers WHERE id = :customer_id",
                                "error": "not_found"}],
            "implementation": {"kind": "python", "source": (
                "def run(db, args):\n"
                "    db.execute('UPDATE customers SET vip = :v WHERE id = :c',"
                " {'v': int(args['vip']), 'c': args['customer_id']})\n"
                "    return db.query_one('SELECT id, vip FROM customers WHERE id = :c', {'c': args['customer_id']})\n"
            )},
            "errors": [{"code": "not_found"}],
        },
        {
            "name": "count_orders_by_status",
            "description": "Count orders in a given status.",
            "kind": "read",
            "parameters": [{"name": "status", "type": "string", "enum": ["pending", "shipped", "cancelled"]}],
            "returns": {"query": "SELECT COUNT(*) FROM orders WHERE status = :status", "mode": "scalar"},
        },
    ],
}

ROWS = {
    "customers": [
        {"id": "C001", "name": "Ada Lovelace", "email": "ada@example.com", "vip": True, "joined": "2024-01-05",
         "prefs": {"genre": "science"}},
        {"id": "C002", "name": "Alan Turing", "email": "alan@example.com", "vip": False, "joined": "2024-03-11",
         "prefs": None},
    ],
    "books": [
        {"id": "B001", "title": "Dune", "price": 9.5, "stock": 3, "genre": "fiction"},
        {"id": "B002", "title": "A Brief History of Time", "price": 12.0, "stock": 0, "genre": "science"},
        {"id": "B003", "title": "SPQR", "price": 15.25, "stock": 7, "genre": "history"},
    ],
    "orders": [
        {"id": "O001", "customer_id": "C001", "book_id": "B001", "quantity": 1, "total": 9.5, "status": "shipped",
         "note": None, "created_at": "2026-06-01T10:00:00"},
        {"id": "O002", "customer_id": "C002", "book_id": "B003", "quantity": 2, "total": 30.5, "status": "pending",
         "note": "gift wrap", "created_at": "2026-06-02T10:00:00"},
    ],
    "payments": [
        {"id": 1, "order_id": "O001", "amount": 9.5, "refunded": 0},
        {"id": 2, "order_id": "O002", "amount": 30.5, "refunded": 10},
    ],
}


def spec() -> DomainSpec:
    return DomainSpec.model_validate(SPEC)


def world():
    from scaleenv.world import World

    w = World(spec())
    for table in ("customers", "books", "orders", "payments"):
        w.load_rows(table, ROWS[table])
    return w
