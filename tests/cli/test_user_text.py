"""What a user reads speaks of what to do, never of our design documents: no "seed" and no "§" in
the doctor's findings and advice (for a session whose files are gone) or in any command's help."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent.cli.commands import COMMANDS
from tests.cli.console import agentrt

SPEC_WORDS = ("seed", "§")


def _spec_words(text: str) -> list[str]:
    return [w for w in SPEC_WORDS if w in text.lower()]


def test_the_doctor_on_a_session_with_missing_files_says_what_to_do_not_where_we_wrote_it(tmp_path: Path):
    """Blobs deleted, then the event log too: the doctor FAILs with advice that names the volume
    to mount, in words a user can act on."""
    ran = agentrt("run", "--approve-all", "--json", "Summarise the 2026 sales by region", cwd=tmp_path)
    assert ran.code == 0, ran.both
    sid = json.loads(ran.out)["session_id"]
    store = tmp_path / ".agentrt"
    shutil.rmtree(store / "blobs")
    for_humans, for_machines = agentrt("doctor", sid, cwd=tmp_path), agentrt("doctor", sid, "--json", cwd=tmp_path)
    assert for_humans.code == 1 and "[FAIL] blobs" in for_humans.out, for_humans.both
    assert "mount the complete blob volume (base_dir/blobs)" in for_humans.out
    assert not _spec_words(for_humans.both) and not _spec_words(for_machines.out), for_humans.out

    (store / "tenants" / "default" / "sessions" / sid / "events.jsonl").unlink()
    gone = agentrt("doctor", sid, cwd=tmp_path)
    assert gone.code == 1 and "[FAIL] header" in gone.out, gone.both
    assert "mount the base_dir volume the session was written to (persistence.base_dir)" in gone.out
    assert not _spec_words(gone.both), gone.out


def test_no_help_text_mentions_the_design_documents(tmp_path: Path):
    """`agentrt --help` and every command's `--help`."""
    pages = [agentrt("--help", cwd=tmp_path)] + [agentrt(c.name, "--help", cwd=tmp_path) for c in COMMANDS]
    for page in pages:
        assert page.code == 0 and page.out, page.both
        assert not _spec_words(page.out), page.out
