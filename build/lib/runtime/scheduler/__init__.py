"""Scheduling: tics and cron jobs (issue 5).

The building blocks here are pure or sit behind an injected clock:

* :mod:`.clock` — ``Clock`` protocol, ``SystemClock``, ``FakeClock``;
* :mod:`.schedule` — schedule text → typed ``Schedule`` → APScheduler trigger, next runs;
* :mod:`.quiet` — quiet hours as DST-correct spans of instants;
* :mod:`.misfire` — what to do about fire times missed while down;
* :mod:`.tic` — when a tic runs, what it is told, when its reply is silence;
* :mod:`.models`, :mod:`.jobs`, :mod:`.tic_store` — the durable rows;
* :mod:`.plan`, :mod:`.commands`, :mod:`.held` — the service's pure decisions, ``/cron add``
  text, results held in quiet hours;
* :mod:`.service` — the running scheduler: APScheduler fires, runs are posted as mail;
  it composes :mod:`.engine` (APScheduler and its tasks), :mod:`.headless` (a run's
  turn), :mod:`.cron_runner`, :mod:`.tic_runner` and :mod:`.delivery`, which share
  :mod:`.part` (runtime, engine, clock, translator).

Importing :mod:`.models` registers the tables; the migration creates them.
"""
