"""Submitting without workers configured is a clear error that records nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.config import load_settings
from agent.core.errors import ConfigError
from agent.runner.submit import submit_turn
from agent.session.inbox import Inbox


def test_submit_without_a_broker_says_what_to_set_and_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No workers.broker_url: one line naming the setting; no turn lands in the inbox."""
    monkeypatch.delenv("AGENTRT_BROKER_URL", raising=False)
    settings = load_settings(None, overrides={"persistence.base_dir": str(tmp_path)})
    assert not settings.workers.enabled
    with pytest.raises(ConfigError, match=r"workers\.broker_url"):
        submit_turn(settings, "hello", "s1")
    assert Inbox(settings.base_dir, settings.session.tenant_id, "s1").turns() == []


def test_submit_refuses_bad_ids_and_empty_text_before_sending(tmp_path: Path) -> None:
    """Path-unsafe session ids and blank texts fail before anything reaches the broker."""
    settings = load_settings(
        None,
        overrides={
            "persistence.base_dir": str(tmp_path),
            "workers.broker_url": "redis://127.0.0.1:1/0",
            "workers.result_backend": "redis://127.0.0.1:1/0",
        },
    )
    with pytest.raises(ConfigError, match="invalid session id"):
        submit_turn(settings, "hello", "../etc")
    with pytest.raises(ConfigError, match="empty input"):
        submit_turn(settings, "   ", "s1")
    assert not (tmp_path / "tenants").exists() or not list((tmp_path / "tenants").rglob("*.json"))
