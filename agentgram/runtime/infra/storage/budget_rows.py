"""The send budget's table: one token bucket, and one pause, per key.

:mod:`runtime.infra.send_budget` owns what the rows mean (a token bucket reserved in the
database's time, pauses every instance honours); this module only declares the table, below it,
so the migration that creates it (revision 0011) needs nothing from above storage. Importing it
registers the table on ``SQLModel.metadata``.

The times are **the database's clock in seconds since the epoch** (a ``DOUBLE PRECISION``), never
a process's: instances on several hosts reserve from one bucket, and only one clock is shared.
Seconds as a number, not a timestamp, because the bucket's arithmetic (a reservation a fraction
of a second ahead, ``1 / rate`` added per token) is plain addition on both backends.
"""

from __future__ import annotations

from sqlalchemy import Double
from sqlmodel import Field, SQLModel


class SendBudgetRow(SQLModel, table=True):
    """One key's bucket (``global``, ``chat:<id>``) and pause; a missing row is a full bucket, unpaused.

    The bucket is kept as its *theoretical arrival time* (GCRA): ``tat`` is when the bucket would
    be full again if nothing more were taken. A token may be reserved at any time ``t`` with
    ``t >= tat - (burst - 1) / rate``; the reservation moves ``tat`` to ``max(tat, t) + 1 / rate``.
    """

    __tablename__ = "send_budget"

    key: str = Field(primary_key=True)
    tat: float = Field(sa_type=Double)
    """The bucket's theoretical arrival time (see the class docstring)."""
    due: float = Field(sa_type=Double)
    """When the latest reservation may send (what the take that made it returned)."""
    paused_until: float = Field(sa_type=Double)
    """No send of this key before this time (a 429's ``retry_after``, recorded by any instance)."""


__all__ = ["SendBudgetRow"]
