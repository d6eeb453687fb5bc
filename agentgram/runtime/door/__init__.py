"""The runtime's one door, in parts: what a chat adapter may call.

:mod:`.protocols` says what the adapters depend on (:class:`~.protocols.Door` and its six parts),
:mod:`.values` what crosses it, and one module per part implements it (:mod:`.chat`,
:mod:`.approvals`, :mod:`.calls`, :mod:`.jobs`, :mod:`.sessions`, :mod:`.rollback`). :class:`~runtime.app.Runtime`
builds the parts it wires and, at the end, the door's parts from them; this package never
imports :mod:`runtime.app` (an import-linter layer).
"""
