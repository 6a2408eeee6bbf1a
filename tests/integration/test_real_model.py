"""A real model end to end: llama.cpp's OpenAI-compatible server on the bundled SmolLM2-135M GGUF.

The server is started once for the module on a free loopback port (`agent.loop.local_llm`). A
135M model writes prose where JSON was asked, calls tools with broken arguments or not at all:
whatever it writes, every turn must end COMPLETED or FAILED with a named finish reason, leave a
valid event log and a resumable checkpoint, and pass the doctor. Skipped only when the local-llm
extra is not installed (`pip install -e '.[dev,local-llm]'`; scripts/test installs it).
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.core.events import EVENT_TYPES
from agent.core.results import RunEvent
from agent.loop.local_llm import LocalLlamaServer, missing_extra
from agent.loop.tool_pairs import assert_tool_pairs
from agent.runner import AgentRunner
from checkpointing.entry_log import EventLog
from tests.support.crash import child_env, run_cli, start_cli, wait_for
from tests.support.runners import ROOT

pytestmark = pytest.mark.real_model

# The finish reasons a run may end with (nodes/refining.py); anything else is a bug.
NAMED_FINISHES = {"completed", "max_iterations", "too_many_failures", "context_exhausted", "rejected"}
TURNS = [
    "What is 6 times 7? Use the calculator tool.",
    "Now add 8 to that result.",
    "Thanks. Say goodbye in one short sentence.",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLlamaServer]:
    """llama.cpp's server on the bundled model, for the whole module."""
    problem = missing_extra()
    if problem:
        pytest.skip(problem)
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LocalLlamaServer(n_ctx=2048, threads=1, log=log) as srv:
        yield srv


def make_config(tmp_path: Path, base_url: str, **model: Any) -> Path:
    """configs/local-llm.yaml on `base_url`, small outputs and tight guards so the tests stay quick."""
    data = yaml.safe_load((ROOT / "configs" / "local-llm.yaml").read_text())
    data["model"].update({"base_url": base_url, "max_output_tokens": 40, "max_retries": 0, **model})
    data["tools"] = {"builtins": ["calculator", "list_files"]}
    data["loop"].update({"max_iterations": 3, "max_consecutive_failures": 2, "max_replans": 0, "planning": "auto"})
    data["persistence"]["base_dir"] = str(tmp_path / "agentrt")
    data["persistence"]["database_url"] = None
    data["persistence"]["mode"] = "JSONL_ONLY"
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def resumed_result(proc: Any) -> dict[str, Any]:
    """The `agentrt resume --json` result: a named ending, exit code 0 for COMPLETED and 1 for FAILED."""
    assert proc.stdout.strip(), proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    assert result["status"] in ("COMPLETED", "FAILED") and result["finish_reason"] in NAMED_FINISHES, result
    assert proc.code == (0 if result["status"] == "COMPLETED" else 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return result


def finished(events: list[RunEvent]) -> dict[str, Any]:
    """The final result of a streamed turn, checked to be an ending with a named reason."""
    assert events and events[-1].kind == "final", [e.kind for e in events[-3:]]
    result = events[-1].data
    assert result["status"] in ("COMPLETED", "FAILED"), result
    assert result["finish_reason"] in NAMED_FINISHES, result
    return result


def test_three_turns_with_tools_end_cleanly_and_leave_a_sound_session(server: LocalLlamaServer, tmp_path: Path) -> None:
    """Three turns with tools: named endings, tokens streamed, valid log, pairs kept, resumable, doctor OK."""
    cfg = make_config(tmp_path, server.base_url)
    runner = AgentRunner.from_config(cfg)
    sid = "s-real-model"
    results, all_events = [], []
    for n, text in enumerate(TURNS):
        which = {"session_id": sid} if n else {"new_session_id": sid}  # the first turn creates it
        events = list(runner.stream(text, **which))
        results.append(finished(events))
        all_events += events
    tokens = [e for e in all_events if e.kind == "token"]
    assert len(tokens) >= 3, "the server's stream did not reach runner.stream() token by token"
    calls = [e.data for e in all_events if e.kind == "model_call"]
    assert calls and all(c["finish_reason"] in ("stop", "length", "tool_calls") for c in calls)
    assert all(c["usage_source"] in ("server", "estimate") and c["usage"]["input_tokens"] > 0 for c in calls)

    state = runner.state(sid)
    assert_tool_pairs(state["messages"])  # the server would reject broken pairs
    log = EventLog(runner.settings.base_dir, "default", sid)  # loading checks every record's checksum
    types = [e.type for e in log.entries()]
    assert set(types) <= EVENT_TYPES
    assert types.count("run_start") == 3
    assert types.count("run_end") + types.count("run_fail") == 3

    env = child_env(tmp_path / "counter")
    resumed = resumed_result(run_cli(["resume", sid, "--config", str(cfg), "--json"], env, timeout=120))
    assert (resumed["status"], resumed["finish_reason"]) == (results[-1]["status"], results[-1]["finish_reason"])
    doctor = run_cli(["doctor", sid, "--config", str(cfg), "--json"], env, timeout=120)
    report = json.loads(doctor.stdout)
    failing = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert not failing, failing


def test_finish_reason_length_on_the_real_server_ends_with_a_named_reason(
    server: LocalLlamaServer, tmp_path: Path
) -> None:
    """max_tokens=3 cuts every reply: `length` is seen, compressed and retried, then the guard ends the run."""
    runner = AgentRunner.from_config(make_config(tmp_path, server.base_url, max_output_tokens=3))
    events = list(runner.stream("Explain in detail how a bicycle works."))
    result = finished(events)
    finishes = [e.data["finish_reason"] for e in events if e.kind == "model_call" and e.data["node"] == "reasoning"]
    assert "length" in finishes
    if all(f == "length" for f in finishes):
        assert result["status"] == "FAILED" and result["finish_reason"] in ("too_many_failures", "context_exhausted")
    issues = [i["issue"] for e in events if e.kind == "model_call" for i in e.data["issues"]]
    assert "truncated" in issues
    assert_tool_pairs(runner.state(result["session_id"])["messages"])


class RecordingProxy:
    """A loopback proxy in front of the server that keeps every (request, response) body it relays."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[tuple[dict[str, Any], bytes]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                req = urllib.request.Request(
                    proxy.upstream + self.path.removeprefix("/v1"),
                    data=body,
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=300) as resp:
                    data, ctype = resp.read(), resp.headers.get("Content-Type", "application/json")
                proxy.exchanges.append((json.loads(body), data))
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> RecordingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_recorded_token_counts_are_the_servers_when_it_reports_them(server: LocalLlamaServer, tmp_path: Path) -> None:
    """Plain requests: usage is the server's, figure for figure. Streamed: llama.cpp sends none, and the
    event says its figures are an estimate."""
    with RecordingProxy(server.base_url) as proxy:
        runner = AgentRunner.from_config(make_config(tmp_path / "plain", proxy.base_url, streaming=False))
        result = finished(list(runner.stream("What is 2 plus 2?")))
    served = [json.loads(raw)["usage"] for _, raw in proxy.exchanges]
    log = EventLog(runner.settings.base_dir, "default", result["session_id"])
    recorded = [e.payload for e in log.entries() if e.type == "model_call"]
    assert len(recorded) == len(served) >= 1
    for event, usage in zip(recorded, served, strict=True):
        assert event["usage_source"] == "server"
        assert (event["usage"]["input_tokens"], event["usage"]["output_tokens"]) == (
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )
    # The run's totals sum the replies kept in `messages` (reasoning's; the plan is not a message).
    kept = [u for e, u in zip(recorded, served, strict=True) if e["node"] == "reasoning"]
    assert result["input_tokens"] == sum(u["prompt_tokens"] for u in kept) > 0
    assert result["output_tokens"] == sum(u["completion_tokens"] for u in kept)

    streamed = AgentRunner.from_config(make_config(tmp_path / "stream", server.base_url, streaming=True))
    events = list(streamed.stream("What is 2 plus 2?"))
    finished(events)
    calls = [e.data for e in events if e.kind == "model_call"]
    assert all(c["usage_source"] == "estimate" for c in calls)
    assert all("no_usage" in [i["issue"] for i in c["issues"]] for c in calls)


def _run_killed_within(cfg: Path, env: dict[str, str], sid: str, window_s: float) -> int:
    """Start `agentrt run` and SIGKILL it at a random instant within `window_s` of its streamed call.

    Returns the exit code: -SIGKILL when the kill landed, 0 when the turn ended on its own first.
    """
    proc = start_cli(["run", "--config", str(cfg), "--new-session", sid, TURNS[0]], env)
    shown: list[str] = []  # the CLI's progress output (stderr), as it arrives
    reader = threading.Thread(target=lambda: shown.extend(iter(lambda: proc.stderr.read(1), "")), daemon=True)  # type: ignore[union-attr]
    reader.start()

    def streaming() -> bool:
        # The progress names the reasoning node before its streamed call: the model is answering.
        return "node reasoning" in "".join(shown)

    try:
        assert wait_for(streaming, timeout_s=180), "".join(shown)[-2000:]
        wait_for(lambda: proc.poll() is not None, timeout_s=random.uniform(0.0, window_s))  # a random instant
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        reader.join(timeout=10)
    assert proc.returncode in (0, -signal.SIGKILL), "".join(shown)[-2000:]
    return proc.returncode


def test_a_run_killed_mid_stream_resumes(server: LocalLlamaServer, tmp_path: Path) -> None:
    """SIGKILL of `agentrt run` while the CLI shows the model's tokens; `agentrt resume` ends the turn.

    The instant is random within the first half second of the streamed call. A fast CPU can finish the
    whole turn inside that window, so a run that ended first is tried again with a shorter window (the
    last try kills as soon as the call starts): the kill always lands, at a random instant when it can.
    """
    cfg = make_config(tmp_path, server.base_url, max_output_tokens=48)
    env = child_env(tmp_path / "counter")
    for attempt, window_s in enumerate((0.5, 0.1, 0.0)):
        sid = f"s-killed-{attempt}"
        if _run_killed_within(cfg, env, sid, window_s) == -signal.SIGKILL:
            break
    else:
        raise AssertionError("every run ended before it could be killed, even at the start of its model call")
    resumed_result(run_cli(["resume", sid, "--config", str(cfg), "--json"], env, timeout=300))
    runner = AgentRunner.from_config(cfg)
    assert_tool_pairs(runner.state(sid)["messages"])
