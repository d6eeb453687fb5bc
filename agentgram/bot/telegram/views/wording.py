"""How the runtime's typed values read in a chat, in the user's language.

The scheduler and the approval gate hand the adapter values — an instant, a
:data:`~runtime.scheduler.schedule.Schedule`, a
:class:`~runtime.scheduler.schedule.ScheduleError`, a bypass scope — and each
is worded here, in one function, from the locale files. Their English
counterparts (``describe``, ``str(error)``) stay what the model reads.

Every time shown carries its zone, ``2026-03-30 09:00 (Europe/Berlin)``
(``time-in-zone``), so nobody has to guess which clock a time is on. The
results are Telegram HTML with outside text escaped, except
:func:`scope_text`, which is plain text because it also goes into toasts.
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from agentgram.bot.telegram.views.render import escape
from agentgram.runtime.infra.i18n import Translator
from agentgram.runtime.scheduler.schedule import (
    CronSchedule,
    IntervalSchedule,
    OnceSchedule,
    Schedule,
    ScheduleError,
    Span,
)

_SPAN_UNITS = (("span-days", 86400), ("span-hours", 3600), ("span-minutes", 60), ("span-seconds", 1))


def zone_name(tz: tzinfo | None, moment: datetime | None = None) -> str:
    """The IANA name when the zone has one (``Europe/Berlin``), else its abbreviation."""
    key = getattr(tz, "key", None)
    if key:
        return str(key)
    name = tz.tzname(moment) if tz is not None else None
    return name or "UTC"


def local_time(
    t: Translator, lang: str | None, moment: datetime, tz: tzinfo | None = None, *, date: bool = True
) -> str:
    """``2026-03-30 09:00 (Europe/Berlin)`` (or ``09:00 (…)``): ``moment`` in ``tz``, default its own zone."""
    local = moment.astimezone(tz) if tz is not None else moment
    shown = f"{local:%Y-%m-%d %H:%M}" if date else f"{local:%H:%M}"
    return t.t(lang, "time-in-zone", time=shown, zone=zone_name(local.tzinfo, local))


def span_text(t: Translator, lang: str | None, seconds: float) -> str:
    """``5400`` → ``1 h 30 min`` / ``1 ч 30 мин``; fractions of a second are dropped."""
    rest = int(seconds)
    parts = []
    for key, size in _SPAN_UNITS:
        count, rest = divmod(rest, size)
        if count:
            parts.append(t.t(lang, key, count=count))
    return " ".join(parts) or t.t(lang, "span-seconds", count=0)


def schedule_text(t: Translator, lang: str | None, schedule: Schedule, tz: tzinfo) -> str:
    """``every 45 min``, ``<code>0 9 * * 1-5</code> (cron, Europe/Berlin)``, ``once, 2026-12-01 09:00 (…)``."""
    match schedule:
        case CronSchedule(expr=expr):
            return t.t(lang, "schedule-cron", expr=escape(expr), zone=escape(zone_name(tz)))
        case IntervalSchedule(seconds=seconds):
            return t.t(lang, "schedule-every", span=span_text(t, lang, seconds))
        case OnceSchedule(at=at):
            return t.t(lang, "schedule-once", when=local_time(t, lang, at, tz))


def schedule_error(t: Translator, lang: str | None, error: ScheduleError) -> str:
    """What was wrong with a schedule, in the user's language (the model gets ``str(error)``)."""
    params: dict[str, str | int] = {}
    for name, value in error.params.items():
        match value:
            case Span(seconds=seconds):
                params[name] = span_text(t, lang, seconds)
            case datetime():
                params[name] = local_time(t, lang, value)
            case int():
                params[name] = value
            case _:
                params[name] = escape(value)
    return t.t(lang, error.key, **params)


def scope_text(t: Translator, lang: str | None, scope: str) -> str:
    """What a bypass scope covers, as plain text: ``all``, ``@shell`` → "shell commands", a tool name."""
    if scope == "all":
        return t.t(lang, "scope-all")
    key = f"scope-{scope.removeprefix('@')}"
    if scope.startswith("@") and key in t.keys(t.default):
        return t.t(lang, key)
    return t.t(lang, "scope-tool", tool=scope.removeprefix("@"))
