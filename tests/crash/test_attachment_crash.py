"""A kill after a file's mail was stored but before its download finished: after the restart the
download runs again, the file lands byte-identical, and the turn that reads it runs once."""

from __future__ import annotations

from pathlib import Path

from tests.crash.harness import crash_rig
from tests.fakes.openai_server import Text

CAPTION = "add up the second column"
CONTENT = b"item,amount\ntea,2\ncake,3\n"


async def test_killed_mid_download_the_download_resumes_after_the_restart(tmp_path: Path) -> None:
    async with crash_rig(tmp_path) as rig:
        rig.tg.hold_downloads()  # the file route records the request, then hangs
        await rig.start()
        update_id = rig.send_document(CONTENT, "bill.csv", "text/csv", caption=CAPTION)

        def stored_and_downloading() -> bool:
            stored = rig.query("SELECT 1 FROM session_mail WHERE envelope_id = ?", f"tg:{update_id}")
            return bool(stored) and len(rig.tg.downloads) == 1

        await rig.wait(stored_and_downloading, "the mail stored and its file being downloaded")
        assert rig.llm.calls == 0, "no turn reads the message before its file is there"
        await rig.kill()

        rig.tg.release_downloads()
        rig.llm.script(Text("The total is 5."))
        await rig.start()
        await rig.wait_text("The total is 5.")
        await rig.wait_settled()
        assert await rig.terminate() == 0

        [saved] = sorted((rig.workdir / "inbox").rglob("bill.csv"))
        assert saved.read_bytes() == CONTENT
        assert list((rig.workdir / "inbox").rglob("*.part")) == [], "no partial download left"
        assert len(rig.tg.downloads) == 2, "downloaded again after the restart, once"
        assert rig.llm.calls == 1 and rig.count("The total is 5.") == 1
        told = [m for m in rig.llm.requests[0]["messages"] if m["role"] == "user"][-1]["content"]
        assert saved.relative_to(rig.workdir).as_posix() in str(told)
        rig.assert_consistent(CAPTION)
