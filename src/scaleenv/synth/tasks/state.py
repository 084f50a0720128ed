"""Initial states: the domain's base world plus a patch of rows the task needs (fresh clones of
the chain's entities, distractors, and expansion patches)."""

from __future__ import annotations

import random
import re
import weakref
from collections.abc import Set
from typing import Any

from scaleenv.formats.domain import DomainSpec, Table
from scaleenv.tools.values import EMAIL_DOMAINS, email_key, email_styles, fresh_value, redraw_shape
from scaleenv.utils.dates import clock_side, shift_iso
from scaleenv.world.ddl import quote_ident
from scaleenv.world.invariants import clock_params, violation_query
from scaleenv.world.world import World, _to_sql


def next_id(world: World, table: str, extra: Set[str] = frozenset()) -> str:
    """The next free ``PREFIX-NNNN`` id of ``table`` (also avoiding ``extra``)."""
    pk = world.primary_key(table)
    ids = [r[0] for r in world.conn.execute(f"SELECT {quote_ident(pk)} FROM {quote_ident(table)}")]
    ids += list(extra)
    best, prefix, width = 0, None, 4
    for v in ids:
        m = re.match(r"^(.*?)(\d+)$", str(v))
        if m:
            prefix = prefix or m.group(1)
            width = max(width, len(m.group(2)))
            best = max(best, int(m.group(2)))
    return f"{prefix or table[:3].upper() + '-'}{best + 1:0{width}d}"


_BIRTH = re.compile(r"birth|born|dob")
_CONTACT = re.compile(r"(^|_)(e_?mail|phone|mobile|tel|telephone|cell)($|_)")
# values that identify one person or object by nature, unique or not in the schema: two look-alikes never share one
IDENTIFYING = re.compile(r"(^|_)(passport|passport_number|licen[cs]e_number|licen[cs]e|driver_licen[cs]e|plate|"
                         r"licen[cs]e_plate|vin|isbn|barcode|serial|serial_number|tracking_number|tag_number|"
                         r"card_number|account_number|policy_number|permit_number|ssn|national_id|tax_id|iban|"
                         r"membership_number|member_number|badge_number|imei|mac_address|registration_number)$")


_USERNAME = re.compile(r"(^|_)(user_?name|handle|login|screen_name)$")
_PERSON_TABLE_COLS = {"full_name", "first_name", "last_name", "display_name", "holder_name"}


def _fresh(column: str, like: Any, rng: random.Random, taken: set[Any], row: dict[str, Any],
           lo: float | None = None, hi: float | None = None) -> Any:
    """A fresh value for ``column``; an e-mail also differs from ``like`` in more than word order, a
    user name is another spelling of the person's name (never a full name), and the ``name`` of a
    place or an organisation keeps its kind ("Springfield Branch Library", not "Robin Walsh")."""
    if isinstance(like, str) and _USERNAME.search(column):
        person = next((row[c] for c in ("full_name", "display_name", "holder_name") if isinstance(row.get(c), str)), None)
        styles = [x for x in (email_styles(person) if person else []) if x not in taken and x != like and "_" not in x]
        if styles:
            return styles[rng.randrange(len(styles))]
        return redraw_shape(like, rng) if any(ch.isdigit() for ch in like) else like + rng.choice("abcdefghjkmnpqrstuvwxyz")
    if column == "name" and isinstance(like, str) and len(like.split()) >= 2 and not set(row) & _PERSON_TABLE_COLS:
        column = "label"  # another leading part, the same kind of ending ("<town> FC", "<name> Pharmacy")
    key = email_key(like)
    tried: set[Any] = set()
    v = like
    for _ in range(12):
        v = fresh_value(column, like, rng, taken | tried, row=row, lo=lo, hi=hi)
        if key is None or email_key(v) != key:
            return v
        local = str(v).split("@", 1)[0]
        tried.update(f"{local}@{d}" for d in EMAIL_DOMAINS)  # this spelling on any domain says the same
    return v


def fresh_unique(table: Table, row: dict[str, Any], rng: random.Random, taken: set[Any]) -> dict[str, Any]:
    """Give a cloned row new, realistic values in its unique columns (another spelling of the
    person's e-mail, a redrawn code or phone, another name), never a numeric suffix, and its own
    contact and identifying values (see :func:`set_apart`): no clone shares a phone with its source."""
    out = dict(row)
    for c in table.columns:
        if c.unique and c.name != table.primary_key and isinstance(out.get(c.name), str | int) \
                and not isinstance(out.get(c.name), bool):
            taken.add(out[c.name])  # the original's value: a later look-alike of this clone avoids it too
            out[c.name] = _fresh(c.name, out[c.name], rng, taken, out, lo=c.min, hi=c.max)
            taken.add(out[c.name])
    return set_apart(table, row, out, rng, taken)


def renamed(table: Table, row: dict[str, Any], rng: random.Random, taken: set[Any]) -> dict[str, Any]:
    """``row`` as another person: new person-name columns (a donor's guest copied to another couple
    is someone else, not a namesake); :func:`fresh_unique` then spells the e-mail from the new name."""
    out = dict(row)
    for c in table.columns:
        if c.name in _PERSON_TABLE_COLS and isinstance(out.get(c.name), str) and out[c.name]:
            out[c.name] = fresh_value(c.name, out[c.name], rng, taken, row=out)
    return out


def distractor(table: Table, row: dict[str, Any], rng: random.Random, taken: set[Any], *,
               clock: str = "2026-06-15T09:00:00") -> dict[str, Any]:
    """A complete entity confusable with ``row``: the same names, titles, states and parents (and
    places, unless the e-mail would be the only other identifying difference), but its own e-mail (not the same words reordered) and phone, its own passport, licence, plate or
    other identifying number, a birth date years earlier, its own unique codes, and its other
    dates moved together by a week or two (their order, and their side of the world's ``clock``,
    unchanged), so the look-alike obeys the same rules as the original."""
    out = fresh_unique(table, row, rng, taken)
    dates = [c for c in table.columns if c.type in ("date", "datetime") and isinstance(out.get(c.name), str)
             and c.name != table.primary_key and not c.foreign_key and not c.unique]
    for c in dates:
        if _BIRTH.search(c.name):
            out[c.name] = shift_iso(out[c.name], -(rng.randint(3, 12) * 365 + rng.randint(-40, 40)))
    others = [c for c in dates if not _BIRTH.search(c.name)]

    def side(v: str) -> int:
        return clock_side(v, clock)

    # later, never earlier: a look-alike child still comes after the parent it shares with the original
    for delta in rng.sample([14, 7, 3, 1], 4):
        moved = {c.name: shift_iso(out[c.name], delta) for c in others}
        if all(side(out[c.name]) == side(moved[c.name]) for c in others):
            out.update(moved)
            break
    return out


_STRUCTURAL = re.compile(r"(^|_)(id|count|counts|number|no|rank|position|year|age|seats?|capacity|quantity|qty|stars|"
                         r"level|priority|floor|size|units|people|party|guests|members|limit|max|min)(_|$)")
"""Numeric columns that count or order things (a party's size, a room's floor): a look-alike keeps them."""

_POPULARITY = re.compile(r"^(follower|like|view|share|comment|play|download)s?_count$")
"""Counts of what others did (followers, likes, views): a measure of the record, not a part of it (five
namesake users with 1,701 followers each read as copies; play round 29)."""


def ruled_columns(spec: DomainSpec, table: str, *, own: bool = False) -> set[str]:
    """The columns of ``table`` that one of the domain's invariants names (a derived total, the
    two sides of a check): changing one alone could break the rule. ``own``: only the rules of ``table``
    itself, for a look-alike without rows of its own elsewhere (an account with no orders cannot break a
    rule on orders, whatever its cash)."""
    out: set[str] = set()
    tbl = spec.table(table)
    if tbl is None:
        return out
    names = {c.name for c in tbl.columns}
    for inv in spec.invariants:
        text = " ".join(filter(None, [inv.expr, inv.check, inv.when, *inv.columns]))
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
        if inv.table == table:
            out |= names & (words | {inv.column or ""})
        elif table in words and not own:
            out |= names & words  # a rule of another table that reads this one (a sum over its rows)
    return out


def vary_measures(table: Table, row: dict[str, Any], rng: random.Random, keep: set[str],
                  used: dict[str, set[Any]] | None = None) -> dict[str, Any]:
    """``row`` with its own amounts (a balance, a price, a budget, a weight): each nonzero measure
    not in ``keep`` (the columns a domain rule ties to others) scaled by a factor between 0.4 and 2
    and kept in its column's range, so that a look-alike is no copy of the original's figures and a
    rule that reads them (a wallet that covers a fee, a budget that allows a booking) can decide
    differently for it. ``used`` holds the values namesakes already have, per column: another factor is
    tried before one of them is repeated (and the value taken is added)."""
    out = dict(row)
    for c in table.columns:
        v = out.get(c.name)
        if c.type not in ("integer", "real") or c.name in keep or c.foreign_key or c.unique or c.enum \
                or c.name == table.primary_key or _STRUCTURAL.search(c.name) and not _POPULARITY.match(c.name):
            continue
        if not isinstance(v, int | float) or isinstance(v, bool) or v == 0:
            continue
        seen = used.setdefault(c.name, {v}) if used is not None else {v}
        factors = [0.4, 0.6, 0.8, 1.25, 1.5, 2.0]
        rng.shuffle(factors)
        for factor in factors:
            new: float = v * factor
            if c.min is not None:
                new = max(new, c.min)
            if c.max is not None:
                new = min(new, c.max)
            out[c.name] = int(round(new)) if c.type == "integer" or isinstance(v, int) else round(new, 2)
            if out[c.name] not in seen:
                break
        seen.add(out[c.name])
    return out


_PLACE = re.compile(r"(^|_)(city|town|address|street|street_address|home_city|home_town|district|neighbou?rhood|country|zip_code|postcode|postal_code)$")


def contact_columns(table: Table) -> list[str]:
    """The text columns whose value identifies one person or object (e-mail, phone, passport,
    licence, plate and the other :data:`IDENTIFYING` numbers): no two records share one."""
    return [c.name for c in table.columns if c.type == "text" and c.name != table.primary_key
            and not c.foreign_key and (_CONTACT.search(c.name) or IDENTIFYING.search(c.name))]


_CORRESPONDENT = re.compile(r"^(sender|recipient|to|from|cc|bcc|reply_to|forward_to)_")


def identity_columns(table: Table) -> list[str]:
    """The :func:`contact_columns` that name the row's own person or object (not a message's
    sender or a draft's recipient, whom many rows share): unique across a world."""
    return [c for c in contact_columns(table) if not _CORRESPONDENT.search(c)]


def _differing(table: Table, a: dict[str, Any], b: dict[str, Any]) -> int:
    """How many identifying attributes (unique and contact columns, birth date, place) differ."""
    cols = {c.name for c in table.columns if c.unique and c.name != table.primary_key}
    cols |= set(contact_columns(table))
    cols |= {c.name for c in table.columns if _BIRTH.search(c.name) or _PLACE.search(c.name) and not c.foreign_key}
    return sum(1 for c in cols if a.get(c) is not None and a.get(c) != b.get(c))


def set_apart(table: Table, original: dict[str, Any], row: dict[str, Any], rng: random.Random,
              taken: set[Any]) -> dict[str, Any]:
    """``row`` (a clone or look-alike of ``original``) with its own contact and identifying values
    (phone, passport, licence, plate...), none of them ``taken``; and, where the table describes a
    person, differing from ``original`` in at least two identifying attributes (another town when
    the e-mail is the only other one), so that a look-alike is never a copy but for one value."""
    out = dict(row)
    for name in contact_columns(table):
        v = out.get(name)
        col = table.column(name)
        if isinstance(v, str) and v and col is not None and not col.unique:
            taken.add(v)
            out[name] = _fresh(name, v, rng, taken, out)
            taken.add(out[name])
    person = bool({c.name for c in table.columns} & _PERSON_TABLE_COLS) or bool(contact_columns(table))
    if person and _differing(table, original, out) < 2:
        for c in table.columns:
            v = out.get(c.name)
            if _PLACE.search(c.name) and c.type == "text" and isinstance(v, str) and v and not c.foreign_key \
                    and not c.unique and c.name not in contact_columns(table):  # a town, not an e-mail address
                out[c.name] = _fresh(c.name, v, rng, taken, out)
                break
    return out


# the rows each world's task added through ``mend_rows`` (clones, look-alikes, children): a row is never
# pointed at one of them, since the distractor-free replay of the patch must still load
_TASK_ROWS: weakref.WeakKeyDictionary[World, set[tuple[str, Any]]] = weakref.WeakKeyDictionary()


def mend_rows(world: World, table: str, rows: list[dict[str, Any]], rng: random.Random) -> int:
    """Mend, in place, the rows about to be added to ``table`` so that they obey the domain's
    invariants that say how (``Invariant.fix``): a date moved to the right side of the clock, a
    state's date set or cleared, an allowed value for its key, a fresh value for a per-parent unique
    column. Rows are tried in a savepoint that is rolled back, so the world is left unchanged.
    Returns how many values were changed. Rules without a ``fix`` are only checked, not mended."""
    invs = [i for i in world.spec.invariants if i.table == table and i.kind in ("row", "unique") and i.fix]
    tbl = world.spec.table(table)
    if tbl is not None:
        _TASK_ROWS.setdefault(world, set()).update((table, r.get(tbl.primary_key)) for r in rows)
    if not invs or tbl is None or not rows:
        return 0
    conn, pk, changed = world.conn, tbl.primary_key, 0
    queries = [(inv, violation_query(inv, pk, key=True)) for inv in invs]
    params = clock_params(world.spec)
    conn.execute("SAVEPOINT mend")
    try:
        for row in rows:
            for _round in range(4):
                if not insert_row(conn, tbl, row):
                    break
                bad = [inv for inv, sql in queries
                       if conn.execute(sql, {**{k: v for k, v in params.items() if f":{k}" in sql},
                                             "_key": row.get(pk)}).fetchone()]
                if not bad:
                    break
                conn.execute(f"DELETE FROM {quote_ident(table)} WHERE {quote_ident(pk)} = ?", (row.get(pk),))
                for inv in bad:
                    changed += _apply_fix(world, tbl, inv, row, rng)
    finally:
        conn.execute("ROLLBACK TO mend")
        conn.execute("RELEASE mend")
    return changed


def insert_row(conn: Any, tbl: Table, row: dict[str, Any]) -> bool:
    """Insert ``row`` into ``tbl`` on ``conn`` as it is (no mending); False when the schema refuses it."""
    cols = [c.name for c in tbl.columns if c.name in row]
    try:
        conn.execute(f"INSERT INTO {quote_ident(tbl.name)} ({', '.join(map(quote_ident, cols))}) "
                     f"VALUES ({', '.join('?' * len(cols))})", [_to_sql(row[c]) for c in cols])
    except Exception:  # noqa: BLE001 - a row the schema refuses is the caller's to report
        return False
    return True


def _apply_fix(world: World, tbl: Table, inv: Any, row: dict[str, Any], rng: random.Random) -> int:
    fix = inv.fix or {}
    col = fix.get("column")
    column = tbl.column(col) if isinstance(col, str) else None
    if column is None or not isinstance(col, str):
        return 0
    clock = world.spec.clock
    today = clock[:10]
    v = row.get(col)
    kind = fix.get("kind")
    new: object
    if kind == "clock" and isinstance(v, str) and v:
        # the row's own time of day is kept; the date becomes today (the nearest date on the right side),
        # but a past state's time is not later than the clock ("completed at 14:45" when it is 09:00)
        new = today + v[10:] if len(v) > 10 else today
        if fix.get("side") == "past" and len(v) > 10 and clock_side(str(new), clock) > 0:
            new = clock
    elif kind == "set_in":
        on = row.get(str(fix.get("state_column", "status"))) in fix.get("states", [])
        if on and v is None and column.foreign_key:  # a link: one of its parent rows
            parent = column.foreign_key.partition(".")[0]
            pkey = quote_ident(world.primary_key(parent))
            ids = [r[0] for r in world.conn.execute(f"SELECT {pkey} FROM {quote_ident(parent)} ORDER BY 1")]
            if not ids:
                return 0
            new = ids[rng.randrange(len(ids))]
        else:
            new = (v or (clock if column.type == "datetime" else today)) if on else None
    elif kind == "choice":
        allowed = fix.get("allowed", {}).get(str(row.get(str(fix.get("key")))))
        if not allowed or v in allowed:
            return 0
        new = allowed[rng.randrange(len(allowed))]
    elif kind == "parent":
        copied = _parents_value(world, fix, row)
        if copied is not None:  # a bill takes its consultation's fee, rather than another consultation
            col, new = copied
            v = row.get(col)
        else:
            new = _obeying_parent(world, tbl, inv, row, col, str(fix.get("table")), rng)
            if new is None:
                return 0
    elif kind == "fresh":
        others = [c for c in inv.columns if c != col]
        cond = " AND ".join(f"{quote_ident(c)} IS ?" for c in others) or "1"
        used = {r[0] for r in world.conn.execute(
            f"SELECT {quote_ident(col)} FROM {quote_ident(tbl.name)} WHERE {cond}", [row.get(c) for c in others])}
        new = fresh_value(col, v, rng, used, row=row, lo=column.min, hi=column.max)
    else:
        return 0
    if new == v:
        return 0
    row[col] = new
    return 1


def _parents_value(world: World, fix: dict[str, Any], row: dict[str, Any]) -> tuple[str, Any] | None:
    """(column, value) that makes ``row`` obey a rule comparing a column of it with its parent's (``=``,
    ``<=``, ``>=``): the parent's own value; None where the rule says no such column or the parent has none."""
    value = fix.get("value")
    if not isinstance(value, dict) or value.get("op") not in ("=", "<=", ">="):
        return None
    mine, theirs, parent = value.get("column"), value.get("parent_column"), fix.get("table")
    if not all(isinstance(x, str) for x in (mine, theirs, parent)) or row.get(str(fix.get("column"))) is None:
        return None
    ptbl = world.spec.table(str(parent))
    pcol = ptbl.column(str(theirs)) if ptbl is not None else None
    if ptbl is None or pcol is None or pcol.type in ("date", "datetime"):  # a date's form may differ: not copied
        return None
    got = world.conn.execute(f"SELECT {quote_ident(str(theirs))} FROM {quote_ident(str(parent))} "
                             f"WHERE {quote_ident(ptbl.primary_key)} = ?", (row.get(str(fix.get("column"))),)).fetchone()
    return (str(mine), got[0]) if got is not None and got[0] is not None else None


def _obeying_parent(world: World, tbl: Table, inv: Any, row: dict[str, Any], col: str, parent: str,
                    rng: random.Random) -> Any:
    """Another row of ``parent`` for ``row[col]`` under which ``row`` obeys ``inv`` (None if none of
    up to 40 tried does): a row of the base world, never one the task added. Called inside
    ``mend_rows``' savepoint, so the trial inserts are undone."""
    ptbl = world.spec.table(parent)
    if ptbl is None:
        return None
    conn, pk = world.conn, tbl.primary_key
    ids = [r[0] for r in conn.execute(f"SELECT {quote_ident(ptbl.primary_key)} FROM {quote_ident(parent)} "
                                      f"ORDER BY 1")]
    added = _TASK_ROWS.get(world, set())
    ids = [i for i in ids if (parent, i) not in added]
    rng.shuffle(ids)
    sql = violation_query(inv, pk, key=True)
    params = {k: v for k, v in clock_params(world.spec).items() if f":{k}" in sql}
    for cand in ids[:40]:
        if cand == row.get(col) or not insert_row(conn, tbl, {**row, col: cand}):
            continue
        bad = conn.execute(sql, {**params, "_key": row.get(pk)}).fetchone()
        conn.execute(f"DELETE FROM {quote_ident(tbl.name)} WHERE {quote_ident(pk)} = ?", (row.get(pk),))
        if not bad:
            return cand
    return None
