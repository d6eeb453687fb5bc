"""The benchmarks still run: each with a tiny load, asserting it produced numbers.

Speed is measured by ``python -m bench.…`` (see bench/README.md), never by timed tests; this only
keeps the scripts from rotting as the code they drive changes.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from bench import (
    chat_memory,
    chats,
    cluster,
    context_build,
    headless_memory,
    latency,
    mailbox,
    rss,
    startup,
    stop_latency,
    throughput,
)
from tests.backends import pg_server_url


async def test_chats_benchmark_measures_both_bots() -> None:
    payload = await chats.run(chats.Options(chats=3, messages=2, llm_ms=30, chunks=3, turn_timeout=20))
    for kind in ("baseline", "agentgram"):
        result = payload["results"][kind]
        assert result["turns"] == 6 and not result["failures"], result
        assert result["end_to_end_ms"]["p50"] >= result["llm_ms"]["p50"] > 0
        assert result["bot_peak_rss_mb"] > 0
        assert result["first_text_ms"]["n"] == 6 and result["end_to_end_first_message_ms"]["n"] == 3
    assert payload["e2e_p50_ratio"]["agentgram"] > 0
    assert "overhead p50 ms" in chats.table(payload)


async def test_latency_benchmark_reports_every_target() -> None:
    tiny = chats.Options(
        chats=3, messages=2, llm_ms=30, chunks=3, think_ms=50, spread_ms=100, turn_timeout=20
    )
    burst = chats.Options(chats=2, messages=2, llm_ms=30, chunks=3, turn_timeout=20)
    payload = await latency.run(latency.Options(human=tiny, burst=burst))
    for name, turns in (("human", 6), ("burst", 4)):
        for kind in ("baseline", "agentgram"):
            result = payload["scenarios"][name]["results"][kind]
            assert result["turns"] == turns and not result["failures"], result
    verdict = payload["verdicts"]["agentgram"]
    assert set(verdict) == set(latency.TARGETS)
    assert all(v["value"] is not None and v["value"] > 0 for v in verdict.values()), verdict
    assert "first visible text" in latency.table(payload)


async def test_mailbox_benchmark_measures_sqlite_and_memory() -> None:
    payload = await mailbox.run(mailbox.Options(envelopes=60, sessions=3))
    assert set(payload["results"]) == {"sqlite (WAL, synchronous=NORMAL)", "memory"}
    for runs in payload["results"].values():
        assert [r["envelopes"] for r in runs] == [60, 60, 60]
        assert all(r["per_s"] > 0 for r in runs)
    assert "sequential" in mailbox.table(payload)


async def test_stop_latency_benchmark_measures_trials() -> None:
    payload = await stop_latency.run(stop_latency.Options(trials=2, timeout=10))
    results = payload["results"]
    assert not results["failures"], results["failures"]
    assert results["stream_closed_ms"]["n"] == 2 and results["stream_closed_ms"]["p50"] > 0
    assert results["acknowledged_ms"]["n"] == 2
    assert "Stopped" in stop_latency.table(payload)


async def test_headless_memory_benchmark_leaves_no_worker_behind() -> None:
    payload = await headless_memory.run(headless_memory.Options(runs=50, sample_every=25))
    assert [s["runs"] for s in payload["samples"]] == [25, 50]
    assert all(s["rss_mb"] > 0 for s in payload["samples"])
    assert payload["workers_at_end"] == 0, "every tic and cron run's worker was evicted"
    assert "RSS" in headless_memory.table(payload)


async def test_context_build_benchmark_measures_both_paths() -> None:
    payload = await context_build.run(context_build.Options(sizes=(60, 300), recent=10, repeats=2))
    for size in ("60", "300"):
        cases = payload["results"][size]
        assert cases["truncated"]["cold"]["n"] == 2 and cases["compacted"]["warm"]["p50"] > 0
        assert cases["compacted"]["messages"] < cases["truncated"]["messages"] or size == "60"
    assert "compacted" in context_build.table(payload)


async def test_context_build_and_mailbox_benchmarks_compare_postgres_with_sqlite() -> None:
    """``--pg-url``: the same cases on a fresh PostgreSQL database, with the ratio to SQLite."""
    context = await context_build.run(
        context_build.Options(sizes=(60,), recent=10, repeats=2, pg_url=pg_server_url())
    )
    for case in ("truncated", "compacted"):
        on_pg, on_sqlite = context["postgresql"]["60"][case], context["results"]["60"][case]
        assert on_pg["messages"] == on_sqlite["messages"] and on_pg["cold"]["n"] == 2, (on_pg, on_sqlite)
        assert context["ratio_postgresql_sqlite"]["60"][case]["cold_p50"] > 0
    assert "pg/sqlite" in context_build.table(context)
    box = await mailbox.run(mailbox.Options(envelopes=30, sessions=3, pg_url=pg_server_url()))
    assert [r["envelopes"] for r in box["results"]["postgresql"]] == [30, 30, 30]
    assert all(value and value > 0 for value in box["ratio_postgresql_sqlite"].values()), box
    assert "PostgreSQL / SQLite" in mailbox.table(box)


async def test_cluster_benchmark_runs_two_instances_behind_the_proxy() -> None:
    """Issue 27's benchmark: two instance processes on a fresh PostgreSQL database, in webhook mode
    behind the round-robin proxy, share the chats and answer every one; each instance's CPU and RSS
    are read, and each chat's owner from the leases."""
    opts = cluster.Options(
        instances=(2,), pacing=("off",), chats=4, messages=1, llm_ms=30, chunks=3, turn_timeout=20,
        pg_url=pg_server_url(),
    )  # fmt: skip
    payload = await cluster.run(opts)
    (result,) = payload["runs"]
    assert result["turns"] == 4 and not result["failures"], result
    assert result["lead"] == "node-a" and result["exit_codes"] == {"node-a": 0, "node-b": 0}
    assert result["end_to_end_ms"]["p50"] >= result["llm_ms"]["p50"] > 0
    assert all(s > 0 for s in result["cpu_s"].values()) and all(
        mb > 0 for mb in result["peak_rss_mb"].values()
    )
    assert {name: statuses.get(200, 0) > 0 for name, statuses in result["proxy"].items()} == {
        "node-a": True,
        "node-b": True,
    }, "both instances took POSTs"
    owned = result["chats_owned"]
    assert sum(owned.values()) == 4 and result["chats_unowned"] == 0, result
    assert all(n > 0 for n in owned.values()), f"both instances run chats: {owned}"
    assert result["chats_claimed_logged"] == owned, "each claim logged once, none moved"
    assert result["load_posts"] == 4 and 0 <= result["relayed_posts"] <= 4
    assert result["telegram"]["send_message"] == 4 and result["telegram"]["send_message_max_per_1s"] >= 1
    (summed,) = payload["summary"]
    assert summed["messages_per_s"] > 0 and summed["chats_owned_range"] == [
        min(owned.values()),
        max(owned.values()),
    ]
    assert summed["utilisation_max"] >= summed["utilisation_min"] > 0
    assert "msgs/s" in cluster.table(payload)


async def test_throughput_benchmark_reports_turns_and_cpu_of_both_bots() -> None:
    """Issue 31 req. 4–5: the 0 ms model, closed-loop chats, pacing off; both bots in one run."""
    payload = await throughput.run(throughput.Options(chats=3, seconds=1.0, settle=0.2, rounds=1))
    for kind in (throughput.BASELINE, throughput.AGENTGRAM):
        (result,) = payload["runs"][kind]
        assert result["turns"] > 0 and not result["failures"], result
        assert result["turns_per_s"] > 0 and result["cpu_ms_per_turn"] > 0, result
    verdict = payload["verdicts"][throughput.AGENTGRAM]
    assert set(verdict) == set(throughput.TARGETS)
    assert all(v["value"] is not None and v["value"] > 0 for v in verdict.values()), verdict
    assert "CPU ms/turn" in throughput.table(payload)


async def test_startup_benchmark_times_the_first_poll_of_both_bots() -> None:
    """Issue 31 req. 6: spawn → the first getUpdates, agentgram (fresh, restart) and the baseline."""
    payload = await startup.run(startup.Options(repeats=1, bytecode=False))
    for kind in startup.KINDS:
        (start,) = payload["starts"][kind]
        assert start["first_poll_s"] > 0 and start["cpu_s"] > 0 and start["rss_mb"] > 0, start
    assert "getMe" in payload["starts"]["agentgram"][0]["requests_before"]
    assert payload["version_s"][0] > 0 and payload["python_floor_s"][0] > 0
    assert set(payload["verdicts"]) == set(startup.TARGETS)
    assert payload["verdicts"]["first_poll_ratio"]["value"] > 0
    assert "first getUpdates" in startup.table(payload)


async def test_chat_memory_benchmark_measures_idle_active_and_long_run() -> None:
    """Issue 31 req. 3: idle chats' workers evicted, active chats' kept, RSS sampled over a run."""
    opts = chat_memory.Options(
        idle_chats=6, active_chats=4, batches=2, messages=1, long_chats=4, long_turns=16, sample_every=8,
        warmup=8, idle_timeout=0.1,
    )  # fmt: skip
    payload = await chat_memory.run(opts)
    idle, active = payload["idle"], payload["active"]
    assert not (idle["failures"] or active["failures"] or payload["long"]["failures"]), payload
    assert [s["chats"] for s in idle["samples"]] == [0, 3, 6] and idle["workers_at_end"] == 0, idle
    assert active["workers_at_end"] == chat_memory.WARM_CHATS + 4, "an active chat keeps its worker"
    assert idle["rss_kib_per_chat"] is not None and active["py_blocks_per_chat"] is not None
    long = payload["long"]
    assert [s["load_turns"] for s in long["samples"]] == [0, 8, 16]
    assert long["reference_turns"] == 8 and long["growth"] is not None
    assert "growth after warm-up" in chat_memory.table(payload)


async def test_rss_benchmark_samples_the_bot_ready_and_loaded(tmp_path: Path) -> None:
    """Issue 31 req. 1: RSS split at ready and after the load; allocations grouped by package
    (in this process: a traced bot takes half a minute to import)."""
    result = await rss.run("agentgram", 3, 0, tmp_path)
    assert result["turns"] == 6 and not result["failures"], result
    for sampled in (result["ready"], result["end"]):
        assert sampled["rss_mib"] > sampled["anon_mib"] > 0 and sampled["threads"] >= 1, sampled
        assert sampled["modules_by_package"]["agentgram"] > 0
    assert "peak_rss_mib" in rss.run_table(result)
    assert rss.package_of("/v/lib/python3.11/site-packages/sqlalchemy/orm/query.py") == "sqlalchemy"
    assert rss.package_of("/repo/agentgram/runtime/app.py") == "agentgram"
    tracemalloc.start(1)
    try:
        kept = [bytes(1000) for _ in range(100)]
        assert rss.traced_by_package()["traced_mib"] >= 0 and kept
    finally:
        tracemalloc.stop()
    assert rss.imports_table(rss.imports(None, alone=("yaml",), start=("yaml",))).count("yaml") == 2
