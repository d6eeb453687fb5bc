"""Schedule text typed in a chat command, where the schedule runs straight into the prompt.

``/cron add every 2h check the build`` carries no delimiter between the
schedule and the prompt, so :func:`split_schedule` tries the longest run of
leading words (at most five, a crontab's length) that parses as a schedule.
``every 90 seconds ping`` keeps "90 seconds"; ``at 18:30 call Anna`` stops
before "call". The prompt keeps its own spacing and line breaks.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

from agentgram.runtime.scheduler.schedule import MIN_INTERVAL, USAGE, ScheduleError, parse_schedule

MAX_SCHEDULE_WORDS = 5
_WORD = re.compile(r"\S+")
_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")


def split_schedule(
    text: str, tz: tzinfo, now: datetime, *, min_interval: float = MIN_INTERVAL
) -> tuple[str, str]:
    """``(schedule, prompt)``; :class:`ScheduleError` saying what is wrong otherwise."""
    words = list(_WORD.finditer(text))
    if not words:
        raise ScheduleError(f"a schedule and a prompt are required: {USAGE}", "nothing")
    natural = _natural_size([w.group() for w in words])
    error: ScheduleError | None = None
    for size in range(min(len(words), MAX_SCHEDULE_WORDS), 0, -1):
        candidate = " ".join(w.group() for w in words[:size])
        try:
            parse_schedule(candidate, tz, now, min_interval=min_interval)
        except ScheduleError as exc:
            if size == min(natural, len(words)) or error is None:
                error = exc
            continue
        prompt = text[words[size - 1].end() :].strip() if size < len(words) else ""
        if not prompt:
            raise ScheduleError(
                f"after the schedule {candidate!r}, write what to do", "no-prompt", spec=candidate
            )
        return candidate, prompt
    assert error is not None
    raise error


def _natural_size(words: list[str]) -> int:
    """How many words the schedule most likely has, to pick the error worth showing."""
    first = words[0].lower()
    if first in ("every", "in"):
        return 2
    if first == "at":
        return 3 if len(words) > 1 and _DATE.match(words[1]) else 2
    if first.startswith("@"):
        return 1
    return MAX_SCHEDULE_WORDS
