"""In-memory views of recently active sessions, kept in step with what committed.

The database is the truth; a view is a copy of one session's slice of it
(its unread mail, the tail of its history) so that the hot path of a turn —
one consumer per session, reading what it wrote a moment ago — does not read
it back. The rules that keep a copy exact:

- every change to a session is applied to its view by an
  :func:`~runtime.storage.db.after_commit` hook, so in commit order, never
  for a rolled-back write, and idempotently (a change the view already shows
  is skipped);
- a view is filled from a database read only if no change to that session
  was applied while the read ran (:meth:`SessionViews.ticket`), because the
  read's snapshot may predate it;
- only sessions that were read are cached, least recently used first out,
  once there are more than ``capacity`` of them or, for views that weigh
  theirs (:meth:`SessionViews.weigh`), once they weigh more than ``budget``;
  the newest view stays even if it alone weighs more.

The copy is exact while this process is the only writer of the session,
which the session hub guarantees within a process. Several processes on one
database (the PostgreSQL mode to come) must own disjoint sessions.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, NewType, TypeVar

V = TypeVar("V")
Ticket = NewType("Ticket", tuple[int, int])


class SessionViews(Generic[V]):
    """A bounded map of session id → view, with the fill/change rules above.

    Bounded by count (``capacity``) and, if ``budget`` is given, by weight: the sum of
    :meth:`weigh` over the views, kept in :attr:`weight`. A subclass whose views change size in
    place reports it with :meth:`resized`.
    """

    def __init__(self, capacity: int, budget: int | None = None) -> None:
        self._capacity = capacity
        self._budget = budget
        self.weight = 0
        self._views: OrderedDict[int, V] = OrderedDict()
        self._stamps: dict[int, int] = {}
        self._epoch = 0  # bumped when the stamps are pruned: every ticket out is void

    def weigh(self, view: V) -> int:
        """What ``view`` counts against the budget (nothing unless a subclass says)."""
        return 0

    def get(self, session_id: int) -> V | None:
        view = self._views.get(session_id)
        if view is not None:
            self._views.move_to_end(session_id)
        return view

    def ticket(self, session_id: int) -> Ticket:
        """Taken before a read; :meth:`fill` honours it only if the session did not change since."""
        return Ticket((self._epoch, self._stamps.get(session_id, 0)))

    def fill(self, session_id: int, view: V, ticket: Ticket) -> None:
        if ticket != self.ticket(session_id):
            return
        self._drop(session_id)
        self._views[session_id] = view
        self.resized(self.weigh(view))

    def changed(self, session_id: int) -> V | None:
        """Record a committed change; returns the view to update in place, if the session has one."""
        self._stamps[session_id] = self._stamps.get(session_id, 0) + 1
        if len(self._stamps) > 8 * self._capacity:
            self._stamps.clear()
            self._epoch += 1
        return self._views.get(session_id)

    def forget(self, session_id: int) -> None:
        """A change too awkward to apply: the next read goes to the database."""
        self.changed(session_id)
        self._drop(session_id)

    def resized(self, delta: int) -> None:
        """A view's weight changed by ``delta``: the least recently used go while over a bound."""
        self.weight += delta
        while len(self._views) > self._capacity or (len(self._views) > 1 and self._over_budget()):
            _, view = self._views.popitem(last=False)
            self.weight -= self.weigh(view)

    def _over_budget(self) -> bool:
        return self._budget is not None and self.weight > self._budget

    def _drop(self, session_id: int) -> None:
        view = self._views.pop(session_id, None)
        if view is not None:
            self.weight -= self.weigh(view)
