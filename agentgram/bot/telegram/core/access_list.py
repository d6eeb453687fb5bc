"""Who may use the bot: ``telegram.allowed_user_ids`` plus the users the owner let in by pairing.

With ``telegram.pairing`` on, a stranger's first private message opens a
:class:`PairingRequest` (a one-time code, shown to the stranger and to the
owner); the owner's Approve stores the user as approved, Deny keeps the
request as denied so the stranger cannot ask again and again (a denied
user can still be added to the config). Both live in
the database's key-value store, so they survive a restart; the approved ids
are also kept in memory, because the access gate asks on every update.

The owner is the first configured user: the one tics report to as well.
Only configured users decide requests; an approved user may talk to the
agent but cannot let others in. Stored values are JSON with a schema
version (``v``), so a later release can read what this one wrote.
"""

from __future__ import annotations

import enum
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from agentgram.runtime.infra.log import get_logger

log = get_logger("telegram.access")

APPROVED_PREFIX = "telegram.access.approved:"
REQUEST_PREFIX = "telegram.access.request:"
SCHEMA_VERSION = 1
MAX_OPEN_REQUESTS = 10
"""Pending requests at once; past it strangers get the plain refusal, so nobody can flood the owner."""
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud or retyped
CODE_LENGTH = 6


class ValueStore(Protocol):
    """The slice of the runtime's key-value store this needs (``Runtime.values`` has it)."""

    async def get_value(self, key: str) -> str | None: ...
    async def set_value(self, key: str, value: str) -> None: ...
    async def values_with_prefix(self, prefix: str) -> dict[str, str]: ...


class RequestStatus(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"


@dataclass(slots=True, frozen=True)
class PairingRequest:
    user_id: int
    code: str
    who: str
    """How the owner is shown the stranger: ``@name``, else their first name (plain text)."""
    lang: str | None
    """The stranger's Telegram language, to answer them in it when the owner decides."""
    status: RequestStatus = RequestStatus.PENDING

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": SCHEMA_VERSION,
                "code": self.code,
                "who": self.who,
                "lang": self.lang,
                "status": self.status,
            }
        )

    @classmethod
    def from_json(cls, user_id: int, text: str) -> PairingRequest | None:
        """``None`` for a value this release cannot read (fail closed: no request, no access)."""
        try:
            data = json.loads(text)
            return cls(
                user_id, str(data["code"]), str(data["who"]), data["lang"], RequestStatus(data["status"])
            )
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable pairing request for user %d ignored", user_id)
            return None


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


class AccessList:
    """The one answer to "may this user use the bot?", and the pairing requests behind it."""

    def __init__(self, configured: Sequence[int], store: ValueStore) -> None:
        self.configured = tuple(configured)
        self._store = store
        self._approved: set[int] = set()
        self._loaded = False

    @property
    def owner(self) -> int:
        return self.configured[0]

    async def load(self) -> None:
        """Read the approved users once; cheap to call on every update."""
        if self._loaded:
            return
        stored = await self._store.values_with_prefix(APPROVED_PREFIX)
        self._approved |= {int(key.removeprefix(APPROVED_PREFIX)) for key in stored}
        self._loaded = True

    def allowed(self, user_id: int | None) -> bool:
        return user_id is not None and (user_id in self.configured or user_id in self._approved)

    def decides(self, user_id: int | None) -> bool:
        """Whether ``user_id`` may approve or deny pairing requests."""
        return user_id is not None and user_id in self.configured

    async def request(self, user_id: int) -> PairingRequest | None:
        text = await self._store.get_value(REQUEST_PREFIX + str(user_id))
        return None if text is None else PairingRequest.from_json(user_id, text)

    async def new_request(self, user_id: int, who: str, lang: str | None) -> PairingRequest | None:
        """A new pending request, not yet saved (:meth:`save` it once the owner was told);
        ``None`` when too many are open already."""
        stored = await self._store.values_with_prefix(REQUEST_PREFIX)
        open_now = sum(
            1
            for key, text in stored.items()
            if (found := PairingRequest.from_json(int(key.removeprefix(REQUEST_PREFIX)), text))
            and found.status == RequestStatus.PENDING
        )
        if open_now >= MAX_OPEN_REQUESTS:
            log.warning(
                "pairing: %d requests are open already; user %d gets the plain refusal", open_now, user_id
            )
            return None
        return PairingRequest(user_id, new_code(), who, lang)

    async def save(self, request: PairingRequest) -> None:
        await self._store.set_value(REQUEST_PREFIX + str(request.user_id), request.to_json())

    async def pending(self, user_id: int, code: str) -> PairingRequest | None:
        """The request a button names, if it is still waiting for the owner."""
        request = await self.request(user_id)
        if request is None or request.status != RequestStatus.PENDING or request.code != code:
            return None
        return request

    async def approve(self, request: PairingRequest, by: int) -> None:
        record = {"v": SCHEMA_VERSION, "by": by, "at": datetime.now(UTC).isoformat(), "code": request.code}
        await self._store.set_value(APPROVED_PREFIX + str(request.user_id), json.dumps(record))
        self._approved.add(request.user_id)
        await self.save(
            replace(request, status=RequestStatus.APPROVED)
        )  # after the grant: a crash repeats it
        log.info("pairing: user %d (%s) approved by %d", request.user_id, request.who, by)

    async def deny(self, request: PairingRequest, by: int) -> None:
        await self.save(replace(request, status=RequestStatus.DENIED))
        log.info("pairing: user %d (%s) denied by %d", request.user_id, request.who, by)
