"""Rows written with SQLAlchemy Core, for a turn's hot writes.

The ORM's unit of work (identity map, attribute events, flush ordering) costs
about half a millisecond for a transaction that adds a row or two; the hot
writes of a turn know exactly which rows they add. They build the SQLModel
instance as usual (defaults applied), insert its columns with one Core
statement and set the primary key on the instance themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import repeat
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlmodel import SQLModel

T = TypeVar("T")


def padded(values: Sequence[T]) -> list[T]:
    """``values`` with its last repeated up to the next power of two in length, for an ``IN`` of an
    expanding parameter: each length of the list is another statement that SQLite prepares and a
    connection caches (128 each, in SQLite's heap, released by nothing but the cache's turnover),
    so lists of any length up to 200 make 9 statements instead of 200. Empty stays empty."""
    if not values:
        return []
    size = 1 << (len(values) - 1).bit_length()
    return [*values, *repeat(values[-1], size - len(values))]


def table_of(model: type[SQLModel]) -> sa.Table:
    table: sa.Table = model.__table__  # type: ignore[attr-defined]
    return table


@cache
def columns_of(model: type[SQLModel]) -> tuple[tuple[str, str], ...]:
    """(attribute, column) pairs: an attribute may be stored under another name (``meta``)."""
    mapper = sa.inspect(model)
    return tuple((prop.key, prop.columns[0].key) for prop in mapper.column_attrs)


def row_values(row: SQLModel) -> dict[str, Any]:
    """``row``'s columns by column name, as a Core statement takes them."""
    return {column: getattr(row, attribute) for attribute, column in columns_of(type(row))}


def insert_row(conn: Connection, row: SQLModel) -> int:
    """Insert ``row`` (its ``id`` unset) and give it the id it got."""
    values = {column: value for column, value in row_values(row).items() if column != "id"}
    row_id = insert_values(conn, table_of(type(row)), values)
    row.id = row_id  # type: ignore[attr-defined]
    return row_id


def insert_values(conn: Connection, table: sa.Table, values: dict[str, Any]) -> int:
    """Insert one row of ``table`` from its column ``values`` (no ``id``); the id it got.

    The statement is built once per table and the values go in as parameters: a statement with
    the values baked in (``insert(table).values(...)``) is coerced and given a cache key anew on
    every call, which cost more than the insert itself.
    """
    result = conn.execute(_insert(table), values)
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


@cache
def _insert(table: sa.Table) -> sa.Insert:
    return sa.insert(table)
