"""Scheduling: tics and cron jobs (issue 5).

The building blocks here are pure or sit behind an injected clock:

* :mod:`.clock` — ``Clock`` protocol, ``SystemClock``, ``FakeClock``;
* :mod:`.schedule` — schedule text → typed ``Schedule`` → APScheduler trigger, next runs;
* :mod:`.quiet` — quiet hours as DST-correct spans of instants;
* :mod:`.misfire` — what to do about fire times missed while down;
* :mod:`.tic` — when a tic runs, what it is told, when its reply is silence;
* :mod:`.jobs`, :mod:`.tic_store` — the durable side, over the tables in
  :mod:`runtime.storage.scheduler_rows` (:mod:`.models` re-exports them);
* :mod:`.values` — what crosses the edge: ``JobSpec`` in, ``Job``/``TicRecord``/``HomeChat`` out;
* :mod:`.plan`, :mod:`.commands`, :mod:`.held` — the service's pure decisions, ``/cron add``
  text, results held in quiet hours;
* :mod:`.ports` — the narrow services the scheduler is given (stores, the hub's few
  methods, ``publish``, the chat's session, zone, settings sections), never the runtime;
* :mod:`.service` — the running scheduler: APScheduler fires, runs are posted as mail;
  it composes :mod:`.engine` (APScheduler and its tasks), :mod:`.headless` (a run's
  turn), :mod:`.cron_runner`, :mod:`.tic_runner` and :mod:`.delivery`, which share
  :mod:`.part` (ports, engine, clock);
* :mod:`.tools` — the agent's ``schedule_job``/``list_jobs``/``update_job``/``delete_job``.

It words nothing for the user: results leave as structured
:class:`~runtime.events.Report` events, which the adapter renders.
"""
