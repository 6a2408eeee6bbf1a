"""The session lifecycle through the console script: ENDED and EXPIRED stay so; fork is the way on."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from tests.cli.console import ROOT, Ran, agentrt


def _json(ran: Ran) -> dict[str, object]:
    assert ran.code == 0, ran.both
    data: dict[str, object] = json.loads(ran.out)
    return data


def _refused(ran: Ran, *words: str) -> str:
    """Exit 4 (conflict) with one `agentrt: error:` line containing `words`."""
    assert ran.code == 4, ran.both
    line = ran.error_line()
    for w in words:
        assert w in line, line
    return line


def _status(work: Path, sid: str, *config: str) -> str:
    return str(_json(agentrt("show", sid, "--json", *config, cwd=work))["session"]["status"])  # type: ignore[index]


def _config(work: Path, **session: object) -> Path:
    """The shipped configs/default.yaml, copied, with `session` settings changed."""
    data = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    data["session"].update(session)
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_ended_paused_session_is_not_resumed_paused_or_run(tmp_path: Path) -> None:
    """A session paused for an approval, then ended: resume, resume --approve, pause, run all refuse."""
    sid = str(_json(agentrt("run", "--json", "Summarise the sales", cwd=tmp_path))["session_id"])
    assert _status(tmp_path, sid) == "PAUSED"
    assert "is ENDED" in agentrt("end", sid, cwd=tmp_path).out
    ended = _json(agentrt("show", sid, "--json", "--last", "500", cwd=tmp_path))["entries"]

    fork_hint = f"agentrt fork {sid} --from ENTRY"
    _refused(agentrt("resume", sid, cwd=tmp_path), f"session {sid} is ENDED and cannot be resumed", fork_hint)
    _refused(agentrt("resume", sid, "--approve", cwd=tmp_path), "is ENDED and cannot be resumed", fork_hint)
    _refused(agentrt("pause", sid, cwd=tmp_path), "is ENDED and cannot be paused", fork_hint)
    _refused(agentrt("run", "--session", sid, "again", cwd=tmp_path), "is ENDED and takes no new turns", fork_hint)
    # pause -> resume -> run: each step refused, the session never comes back to life
    _refused(agentrt("pause", sid, cwd=tmp_path), "ENDED")
    _refused(agentrt("resume", sid, "--approve", cwd=tmp_path), "ENDED")
    _refused(agentrt("run", "--session", sid, "--approve-all", "again", cwd=tmp_path), "ENDED")
    assert _status(tmp_path, sid) == "ENDED"
    # nothing was written by the refused commands: no resume, no approval, no tool run
    assert _json(agentrt("show", sid, "--json", "--last", "500", cwd=tmp_path))["entries"] == ended


def test_end_then_fork_then_run_works_on_the_new_branch(tmp_path: Path) -> None:
    """end -> fork -> run --session: COMPLETED on the new branch; main keeps its entries."""
    sid = str(_json(agentrt("run", "--json", "--approve-all", "Summarise the sales", cwd=tmp_path))["session_id"])
    agentrt("end", sid, cwd=tmp_path)
    before = _json(agentrt("show", sid, "--json", "--last", "500", cwd=tmp_path))
    answer = [e["id"] for e in before["entries"] if e["type"] == "assistant_message"][-1]  # type: ignore[union-attr, index]
    fork = _json(agentrt("fork", sid, "--from", str(answer), "--json", cwd=tmp_path))
    assert fork["status"] == "ACTIVE" and _status(tmp_path, sid) == "ACTIVE"

    again = _json(agentrt("run", "--session", sid, "--approve-all", "--json", "Once more", cwd=tmp_path))

    assert again["status"] == "COMPLETED" and again["session_id"] == sid
    after = _json(agentrt("show", sid, "--json", "--last", "1000", cwd=tmp_path))
    assert after["session"]["current_branch_id"] == fork["branch_id"]  # type: ignore[index]
    assert set(after["branches"]) == {"main", fork["branch_id"]}  # type: ignore[arg-type]
    main_ids = {e["id"] for e in before["entries"] if e["branch_id"] == "main"}  # type: ignore[union-attr, index]
    assert main_ids <= {e["id"] for e in after["entries"]}  # type: ignore[union-attr, index]
    new_turn = [e for e in after["entries"] if e["type"] == "user_turn"][-1]  # type: ignore[union-attr, index]
    assert new_turn["branch_id"] == fork["branch_id"]


def test_expired_session_refuses_run_and_resume_until_forked(tmp_path: Path) -> None:
    """session.expire_minutes: an idle session becomes EXPIRED: run and resume refuse; fork goes on."""
    config = str(_config(tmp_path, expire_minutes=0.05))  # 3 seconds
    sid = str(_json(agentrt("run", "--config", config, "--json", "--approve-all", "Sales", cwd=tmp_path))["session_id"])
    time.sleep(3.5)  # idle past expire_minutes (a precondition, not a timed assertion)

    _refused(agentrt("run", "--config", config, "--session", sid, "again", cwd=tmp_path), "is EXPIRED", "fork")
    _refused(agentrt("resume", sid, "--config", config, cwd=tmp_path), "is EXPIRED", "cannot be resumed", "fork")
    _refused(agentrt("pause", sid, "--config", config, cwd=tmp_path), "is EXPIRED", "cannot be paused")
    assert _status(tmp_path, sid, "--config", config) == "EXPIRED"
    entries = _json(agentrt("show", sid, "--json", "--last", "500", "--config", config, cwd=tmp_path))["entries"]
    answer = [e["id"] for e in entries if e["type"] == "assistant_message"][-1]  # type: ignore[union-attr, index]
    fork = _json(agentrt("fork", sid, "--from", str(answer), "--json", "--config", config, cwd=tmp_path))
    assert fork["status"] == "ACTIVE"  # the new branch starts ACTIVE (it may idle out again: 3 s)
