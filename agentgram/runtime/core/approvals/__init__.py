"""Approvals: which tool calls need a person's yes, and the decisions.

Owns the allow/require/deny rules (:mod:`.rules`), the session's timed
bypasses (:mod:`.bypass`), the pending requests and their one decision each
(:mod:`.manager`), and what "trust for 15 min" / "always" would allow
(:mod:`.trust`). The turn's gate (:mod:`runtime.turn.gate`) asks it; the
adapter reaches it only through the :class:`runtime.app.Runtime` facade.
"""
