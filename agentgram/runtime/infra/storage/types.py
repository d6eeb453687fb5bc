"""The column types every table uses: UTC-aware datetimes and ``StrEnum`` statuses.

:data:`UTCDateTime` is SQLModel's own type (the default for a ``datetime``
field since SQLModel 0.0.45): it refuses a naive datetime, stores UTC (on
SQLite as the same ``YYYY-MM-DD HH:MM:SS.ffffff`` text as ever, without an
offset) and reads back aware UTC datetimes, so nothing above storage ever
compares a naive datetime with an aware one.
``tests/runtime/storage/test_types.py`` checks that every datetime column of
every table uses it.

:class:`StrEnumType` stores a ``StrEnum`` as its plain value and reads it back
as the enum. SQLAlchemy's ``Enum`` (what SQLModel picks for an enum field)
stores member *names* and sizes the column to the longest value; this keeps
the unbounded ``VARCHAR`` and the very strings databases already hold.
"""

from __future__ import annotations

import enum
from typing import Any, Generic, TypeVar

from sqlalchemy import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import UTCDateTime
from sqlmodel.sql.sqltypes import AutoString

__all__ = ["StrEnumType", "UTCDateTime"]

E = TypeVar("E", bound=enum.StrEnum)


class StrEnumType(TypeDecorator[E], Generic[E]):
    """A ``StrEnum`` column: the value's string in the database, the enum member in Python.

    A string that is not one of the enum's values fails both ways (``ValueError``):
    an unknown status is a bug or a newer release's database, never something to guess at.
    """

    impl = AutoString
    cache_ok = True

    def __init__(self, enum_class: type[E]) -> None:
        super().__init__()
        self.enum_class = enum_class
        # dict lookups: calling the enum costs ~20x as much, on every row of a history read
        self._members: dict[str, E] = {member.value: member for member in enum_class}
        self._values: dict[str, str] = {member.value: member.value for member in enum_class}

    def __repr__(self) -> str:
        return f"StrEnumType({self.enum_class.__name__})"

    @property
    def python_type(self) -> type[E]:
        return self.enum_class

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else _look_up(self._values, value, self.enum_class)

    def process_result_value(self, value: Any, dialect: Dialect) -> E | None:
        return None if value is None else _look_up(self._members, value, self.enum_class)


T = TypeVar("T")


def _look_up(table: dict[str, T], value: Any, enum_class: type[enum.StrEnum]) -> T:
    try:
        return table[value]  # a member hashes and compares as its value
    except (KeyError, TypeError):
        raise ValueError(f"{value!r} is not a valid {enum_class.__name__}") from None
