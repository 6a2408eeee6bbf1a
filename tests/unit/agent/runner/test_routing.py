"""Which queue a submitted turn goes to: the shared one for a session without a run, else the queue
of the graph version of the session's latest run (read from its event log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.config import load_settings
from agent.core.errors import ConfigError
from agent.doctor.index import store_report
from agent.runner.routing import session_graph_version, turn_queue, version_queue
from graph.build import GRAPH_VERSION
from tests.support.runners import make_runner


def test_a_session_goes_to_its_graph_versions_queue_once_it_has_run(tmp_path: Path) -> None:
    """No run yet: the shared queue; after a turn: `<queue>.<graph version>`; nothing written by the reads."""
    runner = make_runner(tmp_path)
    settings, tenant = runner.settings, runner.settings.session.tenant_id
    assert session_graph_version(settings, tenant, "s-new") is None
    assert turn_queue(settings, tenant, "s-new") == settings.workers.queue == "agentrt"
    assert not (settings.base_dir / "tenants").exists() or not list((settings.base_dir / "tenants").rglob("s-new"))
    sid = runner.run("count", new_session_id="s-ran").session_id
    before = {p: p.read_bytes() for p in runner.session_dir(tenant, sid).rglob("*") if p.is_file()}
    assert session_graph_version(settings, tenant, sid) == GRAPH_VERSION
    assert turn_queue(settings, tenant, sid) == f"agentrt.{GRAPH_VERSION}"
    after = {p: p.read_bytes() for p in runner.session_dir(tenant, sid).rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize("bad", ["", "g1-", "../agentrt", "g1-0123456789abcdef.x", "G1-0123456789ABCDEF", "g1 x"])
def test_only_a_graph_version_becomes_part_of_a_queue_name(tmp_path: Path, bad: str) -> None:
    """Anything else read from a session's log is refused, never made into a queue name."""
    settings = make_runner(tmp_path).settings
    assert version_queue(settings, "g1-0123456789abcdef") == "agentrt.g1-0123456789abcdef"
    with pytest.raises(ValueError, match="not a graph version"):
        version_queue(settings, bad)


def test_an_adopted_graph_version_must_be_one() -> None:
    """`workers.adopt_graph_versions` takes graph versions only, and says what one looks like."""
    ok = load_settings(None, overrides={"workers.adopt_graph_versions": ["g1-0123456789abcdef"]})
    assert ok.workers.adopt_graph_versions == ["g1-0123456789abcdef"]
    with pytest.raises(ConfigError, match=r"workers.adopt_graph_versions: 'agentrt' is not a graph version \(like g1-"):
        load_settings(None, overrides={"workers.adopt_graph_versions": ["agentrt"]})


def test_the_doctor_says_when_the_broker_does_not_answer(tmp_path: Path) -> None:
    """`agentrt doctor` without a session, with a broker nobody listens at: a WARN naming the setting."""
    workers = {"broker_url": "redis://127.0.0.1:1/0", "result_backend": "redis://127.0.0.1:1/0"}
    check = store_report(make_runner(tmp_path, workers=workers), "default").check("worker_queues")
    assert check.status == "WARN" and check.summary.startswith("the broker did not answer"), check
    assert check.next_step == "check workers.broker_url"
