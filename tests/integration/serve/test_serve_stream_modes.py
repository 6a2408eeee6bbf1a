"""Stream modes and resumable streams of `agentrt serve`, through `langgraph_sdk`.

Each stream mode alone and in combination gives events shaped as LangGraph's server sends them;
every event has an id; a join with `Last-Event-ID` gets exactly the events after it: while the run
goes on, after it finished, and after the server restarted; another tenant cannot join; a stream
kept longer than `serve.stream_ttl_s` is gone. Replays are checked on both record stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import NotFoundError

from tests.support.runners import make_config
from tests.support.serve import SLOW_SCRIPT, SLOW_TOOLS, Server, serving, start_server
from tests.support.store_configs import StoreSetup

REPORT = {"user_input": "report"}
ALICE, GLOBEX = "alice-key-0123456789", "globex-key-0123456789"
KEYS = [{"key": ALICE, "tenant_id": "acme", "user_id": "alice"}, {"key": GLOBEX, "tenant_id": "globex"}]
Part = tuple[str | None, str, Any]
MODES = ("values", "updates", "messages", "messages-tuple", "events", "debug", "tasks", "checkpoints", "custom")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("modes")
    with serving(make_config(tmp), tmp) as running:
        yield running


def _stream(client: SyncLangGraphClient, mode: str | list[str], **kw: Any) -> list[Part]:
    tid = client.threads.create()["thread_id"]
    return [(p.id, p.event, p.data) for p in client.runs.stream(tid, "agentrt", input=REPORT, stream_mode=mode, **kw)]


def _of(parts: list[Part], event: str) -> list[Any]:
    return [data for _, name, data in parts if name == event]


def _numbered(parts: list[Part]) -> None:
    """Every event has an id, and they count up from 1 with no gap."""
    assert [pid for pid, _, _ in parts] == [str(i) for i in range(1, len(parts) + 1)]


MESSAGE_EVENTS = {"messages/metadata", "messages/partial", "messages/complete"}


def _messages_add_up(parts: list[Part], pairs: list[Any]) -> None:
    """`messages` mode: each message's metadata comes before its first partial, and each partial
    holds the text streamed so far, which ends as the text the tuples streamed for that message."""
    meta_first: set[str] = set()
    so_far: dict[str, str] = {}
    for _, name, data in parts[1:]:
        if name == "messages/metadata":
            ((mid, body),) = data.items()
            assert body["metadata"]["langgraph_node"] and mid not in meta_first
            meta_first.add(mid)
        else:
            (msg,) = data
            assert msg["id"] in meta_first, "a message's metadata comes before its text"
            if name == "messages/partial":
                assert str(msg["content"]).startswith(so_far.get(msg["id"], ""))
                so_far[msg["id"]] = str(msg["content"])
    streamed: dict[str, str] = {}
    for msg, _ in pairs:
        if msg["type"] == "AIMessageChunk":
            streamed[msg["id"]] = streamed.get(msg["id"], "") + str(msg["content"])
    assert streamed and sorted(so_far.values()) == sorted(streamed.values())  # the same script, run twice


def test_each_mode_alone_gives_events_of_its_shape(server: Server) -> None:
    client = get_sync_client(url=server.url)
    seen: dict[str, list[Part]] = {}
    for mode in MODES:
        parts = seen[mode] = _stream(client, mode)
        _numbered(parts)
        assert parts[0][1] == "metadata" and parts[0][2]["run_id"]
        names = {name for _, name, _ in parts[1:]}
        if mode == "messages":  # as LangGraph's server: metadata once per message, then the message so far
            assert {"messages/metadata", "messages/partial"} <= names <= MESSAGE_EVENTS, names
        else:
            assert names == {"messages" if mode == "messages-tuple" else mode}, mode

    values = _of(seen["values"], "values")
    assert values[-1]["__interrupt__"][0]["value"]["name"] == "publish_report"
    assert any(v.get("messages") for v in values)
    assert {"init", "planning", "reasoning"} <= {node for u in _of(seen["updates"], "updates") for node in u}
    pairs = _of(seen["messages-tuple"], "messages")
    assert all(msg["type"] and meta["langgraph_node"] for msg, meta in pairs)
    assert any(msg["type"] == "AIMessageChunk" for msg, _ in pairs)
    _messages_add_up(seen["messages"], pairs)
    for chunk in _of(seen["custom"], "custom"):
        assert chunk["event"]
    for cp in _of(seen["checkpoints"], "checkpoints"):
        assert cp["config"]["configurable"]["checkpoint_id"] and "values" in cp and "next" in cp

    tasks = _of(seen["tasks"], "tasks")
    started = {t["id"]: t["name"] for t in tasks if "input" in t}
    ended = {t["id"]: t["name"] for t in tasks if "result" in t}
    assert list(started.values())[:3] == ["init", "planning", "reasoning"]
    assert set(ended) <= set(started) and len(ended) >= len(started) - 1  # the approval's task stays open
    assert all(t["error"] is None for t in tasks if "result" in t)

    debug = _of(seen["debug"], "debug")
    assert {d["type"] for d in debug} == {"checkpoint", "task", "task_result"}
    for d in debug:
        assert d["step"] is not None and d["timestamp"]
        if d["type"] == "checkpoint":
            ref = d["payload"]["checkpoint"]
            assert ref["checkpoint_id"] == d["payload"]["config"]["configurable"]["checkpoint_id"]
            assert ref["thread_id"] and "parent_checkpoint" in d["payload"]

    events = _of(seen["events"], "events")
    assert (events[0]["event"], events[0]["name"]) == ("on_chain_start", "LangGraph")
    assert (events[-1]["event"], events[-1]["name"]) == ("on_chain_end", "LangGraph")
    combined = _stream(client, ["events", "values"])
    assert combined[-1][1] == "values" and combined[-1][2]["__interrupt__"]  # the interrupt stays last
    kinds = {e["event"] for e in events}
    assert {"on_chain_start", "on_chain_end", "on_chat_model_start", "on_chat_model_end", "on_custom_event"} <= kinds
    for kind in ("on_chain", "on_chat_model"):
        opened = [e["run_id"] for e in events if e["event"] == f"{kind}_start"]
        closed = [e["run_id"] for e in events if e["event"] == f"{kind}_end"]
        assert set(closed) <= set(opened) and len(opened) - len(closed) <= 1, kind
    for e in events:
        if e["event"] == "on_chat_model_end":
            assert e["data"]["output"]["type"] in ("ai", "AIMessage", "AIMessageChunk")
            assert e["metadata"]["langgraph_node"]
        if e["event"] == "on_chat_model_stream":
            assert e["data"]["chunk"]["type"] == "AIMessageChunk"


def test_modes_combined_and_with_subgraphs(server: Server) -> None:
    client = get_sync_client(url=server.url)
    modes = ["values", "updates", "messages-tuple", "events", "debug", "tasks", "checkpoints", "custom"]
    both = _stream(client, modes)
    _numbered(both)
    assert {name for _, name, _ in both} == {"metadata", "values", "updates", "messages", "events", "debug", "tasks",
                                              "checkpoints", "custom"}  # fmt: skip
    alone = _stream(client, "updates")
    assert [list(u) for u in _of(both, "updates")] == [list(u) for u in _of(alone, "updates")]

    nested = _stream(client, ["values", "updates", "debug"], stream_subgraphs=True)
    _numbered(nested)
    # The agent's graph has no subgraph: a subgraph's events would be named `mode|namespace`.
    assert {name.split("|")[0] for _, name, _ in nested} == {"metadata", "values", "updates", "debug"}
    assert len(_of(nested, "updates")) == len(_of(alone, "updates"))


def _join(client: SyncLangGraphClient, tid: str, run_id: str, after: str | None = None, **kw: Any) -> list[Part]:
    return [(p.id, p.event, p.data) for p in client.runs.join_stream(tid, run_id, last_event_id=after, **kw)]


def test_join_replays_the_tail_live_finished_and_after_a_restart(tmp_path: Path, store: StoreSetup) -> None:
    config = store.config(tmp_path, SLOW_SCRIPT, tools=SLOW_TOOLS, serve={"api_keys": KEYS})
    server = start_server(config, tmp_path)
    try:
        alice = get_sync_client(url=server.url, api_key=ALICE)
        tid = alice.threads.create()["thread_id"]
        run = alice.runs.create(tid, "agentrt", input=REPORT, stream_mode=["updates", "custom"])
        # a client reads the start of the live run, loses the connection, comes back with its last id
        head: list[Part] = []
        for p in alice.runs.join_stream(tid, run["run_id"]):
            head.append((p.id, p.event, p.data))
            if len(head) == 3:
                break
        tail = _join(alice, tid, run["run_id"], head[-1][0])
        full = _join(alice, tid, run["run_id"])  # finished now: all of it, from the start
        _numbered(full)
        assert head + tail == full
        assert {name for _, name, _ in full} == {"metadata", "updates", "custom"}

        for k in (1, 4, len(full) - 1, len(full)):
            assert _join(alice, tid, run["run_id"], full[k - 1][0]) == full[k:]
        only = _join(alice, tid, run["run_id"], "2", stream_mode="updates")
        assert only == [p for p in full[2:] if p[1] == "updates"]

        # another tenant: not its thread, not its run
        globex = get_sync_client(url=server.url, api_key=GLOBEX)
        with pytest.raises((NotFoundError, httpx.HTTPStatusError)):
            _join(globex, tid, run["run_id"])
        with pytest.raises((NotFoundError, httpx.HTTPStatusError)):
            _join(globex, tid, run["run_id"], "3")

        server.stop()
        server = start_server(config, tmp_path)
        alice = get_sync_client(url=server.url, api_key=ALICE)
        assert _join(alice, tid, run["run_id"]) == full
        assert _join(alice, tid, run["run_id"], full[5][0]) == full[6:]
        with pytest.raises((NotFoundError, httpx.HTTPStatusError)):
            _join(get_sync_client(url=server.url, api_key=GLOBEX), tid, run["run_id"], "1")
    finally:
        server.stop()


def test_a_stream_kept_past_its_ttl_is_gone(tmp_path: Path) -> None:
    config = make_config(tmp_path, serve={"stream_ttl_s": 0.001})
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        parts = [p.id for p in client.runs.stream(tid, "agentrt", input=REPORT, stream_mode="updates")]
        run_id = client.runs.list(tid)[0]["run_id"]
        assert parts and all(parts)
        [kept] = list((tmp_path / "agentrt").rglob(f"served/{run_id}.jsonl"))
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        with pytest.raises((NotFoundError, httpx.HTTPStatusError)):
            _join(client, tid, run_id, "1")
        assert not kept.exists()
        assert client.threads.get_state(tid)["values"]  # only the stream went, the thread stays
