"""Benchmarks: chat overhead vs. a minimal baseline bot, mailbox throughput, /stop latency.

Run them as modules from the repository root (``python -m bench.chats``); see ``bench/README.md``.
They are not part of the test suite; ``tests/bench/test_bench_smoke.py`` only checks they still run.
"""
