"""The doctor's checks detect what they claim, run as a user runs them (`agentrt doctor ID --json`)."""

from __future__ import annotations

import json
from pathlib import Path

from checkpointing.records import decode_record, encode_record
from tests.cli.console import ROOT, agentrt

LONG = str(ROOT / "configs" / "long-task.yaml")


def _checks(work: Path, sid: str) -> tuple[int, dict[str, dict[str, object]]]:
    ran = agentrt("doctor", sid, "--config", LONG, "--json", cwd=work)
    return ran.code, {c["name"]: c for c in json.loads(ran.out)["checks"]}


def _drop_entries(events: Path, kind: str) -> int:
    """Delete every `kind` entry, re-linking its children to its parent (a log that reads cleanly)."""
    records = [decode_record(line) for line in events.read_bytes().splitlines() if line]
    gone = {r["id"]: r.get("parent_id") for r in records if r.get("type") == kind}
    kept = []
    for r in records:
        if r.get("id") in gone:
            continue
        parent = r.get("parent_id")
        while parent in gone:
            parent = gone[parent]
        if "parent_id" in r:
            r["parent_id"] = parent
        kept.append(r)
    events.write_bytes(b"".join(encode_record(r) for r in kept))
    return len(gone)


def test_model_context_is_not_ok_without_compression_events(tmp_path: Path) -> None:
    """The long task compresses; with every compression event deleted, model_context FAILs (exit 1)."""
    ran = agentrt("run", "--config", LONG, "--json", "read the log", cwd=tmp_path)
    assert ran.code == 0, ran.both
    sid = json.loads(ran.out)["session_id"]
    code, checks = _checks(tmp_path, sid)
    assert code == 0 and checks["model_context"]["status"] == "OK", checks["model_context"]

    events = tmp_path / ".agentrt" / "tenants" / "default" / "sessions" / sid / "events.jsonl"
    assert _drop_entries(events, "compression") > 0
    code, checks = _checks(tmp_path, sid)
    context = checks["model_context"]
    assert context["status"] == "FAIL" and code == 1, context
    assert "no compression event" in json.dumps(context["evidence"])
    assert checks["header"]["status"] == "OK"  # the log itself reads cleanly: only the context check sees it
