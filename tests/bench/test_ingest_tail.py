"""``bench.ingest_tail`` still runs: both ways of measuring update → model request, a tiny load.

Speed is measured by ``python -m bench.ingest_tail`` (bench/README.md); this only keeps the harness
from rotting: the fakes and the users in processes of their own, every figure from the fakes' logs.
"""

from __future__ import annotations

from pathlib import Path

from bench import ingest_tail


async def test_the_fakes_logs_time_update_to_model_for_both_bots(tmp_path: Path) -> None:
    opts = ingest_tail.Options(
        chats=3, messages=2, think_ms=50, spread_ms=100, llm_ms=30, chunks=3, turn_timeout=20, logs=tmp_path,
    )  # fmt: skip
    payload = await ingest_tail.run(opts)
    for kind in ("baseline", "agentgram"):
        second = payload["second_way"][kind]
        assert second["turns"] == 6 and not second["failures"] and not second["users_failures"], second
        assert second["end_to_end_ms"]["p50"] > second["update_to_model_ms"]["p50"] > 0
        assert second["update_to_poll_ms"]["n"] == second["poll_to_model_ms"]["n"] == 6
        assert second["bot_imports_agentgram_from"].endswith("agentgram")
    assert (tmp_path / "second" / "agentgram" / "telegram.jsonl").stat().st_size > 0
    verdict = payload["verdicts"]["second_way"]["agentgram"]
    assert all(v["value"] is not None and v["value"] > 0 for v in verdict.values()), verdict
    assert "update→model p99 ms" in ingest_tail.table(payload)


def test_the_first_way_is_judged_on_its_own_name_for_the_figure() -> None:
    """``--first-way``: bench.chats calls update → model ``before_llm_ms``; the same targets apply."""
    results = {
        "baseline": {
            "before_llm_ms": {"p50": 5.0, "p99": 9.0},
            "end_to_end_ms": {"p50": 400.0, "p99": 500.0},
        },
        "agentgram": {
            "before_llm_ms": {"p50": 20.0, "p99": 120.0},
            "end_to_end_ms": {"p50": 410.0, "p99": 700.0},
        },
    }
    verdict = ingest_tail.verdict(results, "agentgram", "first_way")
    assert {name: v["met"] for name, v in verdict.items()} == {
        "update_to_model_p50_ms": True, "update_to_model_p99_ms": False, "e2e_p50_ratio": True, "e2e_p99_ratio": False,
    }  # fmt: skip
    assert verdict["e2e_p99_ratio"]["value"] == 1.4


def test_figures_come_from_the_logs_alone() -> None:
    """One turn, written by hand as the two fakes log it: each figure is a difference of their times."""
    telegram = [
        {"ev": "queued", "key": [2001, 0], "update_id": 7, "t": 10.000},
        {"ev": "api", "method": "getUpdates", "t": 10.001},
        {"ev": "delivered", "update_id": 7, "t": 10.002},
        {"ev": "first_shown", "key": [2001, 0], "t": 10.100},
        {"ev": "complete", "key": [2001, 0], "t": 10.400},
        {"ev": "queued", "key": [ingest_tail.WARM_USER, 0], "update_id": 6, "t": 9.0},  # not measured
    ]
    model = [
        {"ev": "llm", "key": [2001, 0], "t": 10.020, "read": 10.021, "first_token": 10.050, "end": 10.350}
    ]
    figures = ingest_tail.analyse(iter(telegram), iter(model))
    assert figures["turns"] == 1 and not figures["failures"]
    assert figures["update_to_model_ms"]["p50"] == 20.0
    assert (figures["update_to_poll_ms"]["p50"], figures["poll_to_model_ms"]["p50"]) == (2.0, 18.0)
    assert figures["end_to_end_ms"]["p50"] == 400.0 and figures["llm_ms"]["p50"] == 330.0
    assert figures["model_to_visible_ms"]["p50"] == 50.0 and figures["first_text_ms"]["p50"] == 50.0
    assert figures["telegram_requests_in_load"] == {"getUpdates": 1}
