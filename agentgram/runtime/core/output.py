"""What must reach the user, recorded before it is sent: the runtime's one output port.

Notices, reports, files and the scheduler's outputs are stored in the outbox
(:mod:`runtime.infra.storage.outbox`) first and only then emitted on the event
bus, where an adapter shows them and marks them shown; a start re-sends what
was stored but never shown. The turn (``TurnDeps.notice``), the scheduler
(``SchedulerPorts.publish``) and ``send_file``
(:class:`~runtime.capabilities.tools.send_file.FileSender`) all go through an
:class:`Output`, so none of them needs the object that built it.
"""

from __future__ import annotations

from pathlib import Path

from agentgram.runtime.infra.errors import ToolError
from agentgram.runtime.infra.events import Address, DurableOutput, EventBus, FileOutput, Notice
from agentgram.runtime.infra.storage.outbox import OutboxStore
from agentgram.runtime.infra.storage.sessions import SessionStore

DEFAULT_UPLOAD_BYTES = 50 * 1024 * 1024
"""The largest file ``send_file`` sends unless the adapter says otherwise (a chat bot's usual 50 MB)."""


class Output:
    """Records output in the outbox, then emits it (see the module docstring)."""

    def __init__(self, outbox: OutboxStore, bus: EventBus, sessions: SessionStore) -> None:
        self._outbox = outbox
        self._bus = bus
        self._sessions = sessions
        self.max_upload_bytes = DEFAULT_UPLOAD_BYTES
        """The largest file ``send_file`` hands the adapter (the adapter's platform says)."""

    async def publish(self, event: DurableOutput) -> None:
        """Emit output that must reach the user, recorded first."""
        self._bus.emit(await self._outbox.record(event))

    async def notice(
        self,
        address: Address,
        key: str,
        params: dict[str, str | int],
        *,
        refers_to_message: int | None = None,
    ) -> None:
        await self.publish(Notice(to=address, key=key, params=params, refers_to_message=refers_to_message))

    async def send_file(self, session_id: int, path: Path, caption: str | None, *, as_photo: bool) -> None:
        """``send_file``'s sender: recorded, then uploaded by the adapter (:class:`FileOutput`)."""
        session = await self._sessions.get(session_id)
        if session is None:
            raise ToolError("this session is gone")
        await self.publish(
            FileOutput(to=Address.of(session), path=str(path), caption=caption, as_photo=as_photo)
        )


__all__ = ["DEFAULT_UPLOAD_BYTES", "Output"]
