"""The simplest bot that does the same job: the yardstick for agentgram's overhead.

One python-telegram-bot ``MessageHandler`` that streams a completion through
the ``openai`` SDK, joins the chunks and sends the text back. Nothing else:
no history, no database, no tools, no streaming edits, no rate limiter, no
durable polling (PTB's own updater). ``concurrent_updates`` is on — the
default (one update at a time) would make every chat wait for every other
chat's LLM call and the comparison meaningless.

``python -m bench.baseline_bot --tg URL --llm URL`` runs it as a process of its own until SIGTERM
or SIGINT (:mod:`bench.startup` times its start from there).
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from openai import AsyncOpenAI
from telegram import Update
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters


def build_baseline(token: str, tg_root: str, llm_url: str, model: str) -> Application:  # type: ignore[type-arg]
    client = AsyncOpenAI(base_url=llm_url, api_key="sk-bench", max_retries=0)

    async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        assert message is not None and message.text is not None
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": message.text}], stream=True
        )
        parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        await context.bot.send_message(message.chat_id, "".join(parts))

    application = (
        ApplicationBuilder()
        .token(token)
        .base_url(f"{tg_root}/bot")
        .base_file_url(f"{tg_root}/file/bot")
        .concurrent_updates(True)
        .build()
    )
    application.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, answer))
    return application


async def start_baseline(application: Application) -> None:  # type: ignore[type-arg]
    await application.initialize()
    assert application.updater is not None
    await application.updater.start_polling(timeout=10)
    await application.start()


async def stop_baseline(application: Application) -> None:  # type: ignore[type-arg]
    assert application.updater is not None
    await application.updater.stop()
    await application.stop()
    await application.shutdown()


async def serve(tg_root: str, llm_url: str, model: str, token: str) -> None:
    """The baseline until SIGTERM or SIGINT."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    application = build_baseline(token, tg_root, llm_url, model)
    await start_baseline(application)
    await stopping.wait()
    await stop_baseline(application)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tg", required=True, help="the Bot API server's root URL")
    parser.add_argument("--llm", required=True, help="the OpenAI-compatible base URL (…/v1)")
    # bench.common's MODEL and TOKEN, not imported from there: it loads agentgram's settings, which
    # would be timed as the baseline's start
    parser.add_argument("--model", default="bench-model")
    parser.add_argument("--token", default="123456:TEST-token")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.tg, args.llm, args.model, args.token))


if __name__ == "__main__":
    main()
