"""`agentrt serve` parts without a server: auth, run requests, stream translation, JSON encoding."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessageChunk
from langgraph.types import Interrupt

from agent.core.config import load_settings
from agent.core.errors import ConfigError
from agent.core.results import RunEvent, jsonable
from agent.runner import GRAPH_EVENT
from agent.runner.live import encode_event
from agent.serve.auth import Authenticator, Principal, Unauthorized, check_bind
from agent.serve.run_requests import input_text, resume_decision
from agent.serve.serve_context import ServeContext
from agent.serve.streams import StreamTranslator, normalize_modes, sse

KEY = "k" * 20


def _auth(**serve: object) -> Authenticator:
    return Authenticator(load_settings(None, overrides={f"serve.{k}": v for k, v in serve.items()}))


def test_open_server_is_the_default_tenant_and_binds_to_loopback_only():
    auth = _auth()
    assert auth.authenticate({}) == Principal("default")
    check_bind("127.0.0.1", auth)
    with pytest.raises(ConfigError, match=r"refusing to serve on 0\.0\.0\.0 without authentication"):
        check_bind("0.0.0.0", auth)


def test_keys_map_to_tenant_and_user_and_anything_else_is_refused():
    auth = _auth(api_keys=[{"key": KEY, "tenant_id": "acme", "user_id": "alice"}])
    check_bind("0.0.0.0", auth)
    assert auth.authenticate({"x-api-key": KEY}) == Principal("acme", "alice")
    assert auth.authenticate({}, {"agentrt_key": KEY}) == Principal("acme", "alice")
    for headers in ({}, {"x-api-key": KEY + "x"}, {"x-api-key": KEY[:-1]}):
        with pytest.raises(Unauthorized):
            auth.authenticate(headers)


def test_bad_key_config_and_bad_auth_path_fail_with_one_line():
    with pytest.raises(ConfigError, match=r"serve\.api_keys"):
        _auth(api_keys=[{"key": "short", "tenant_id": "acme"}])
    with pytest.raises(ConfigError, match="tenant id"):
        _auth(api_keys=[{"key": KEY, "tenant_id": "../etc"}])
    with pytest.raises(ConfigError, match="module:callable"):
        _auth(auth="no_colon")
    with pytest.raises(ConfigError, match="cannot be loaded"):
        _auth(auth="no_such_module_xyz:f")


def test_input_text_from_user_input_messages_or_string():
    assert input_text({"user_input": "hi"}) == "hi"
    assert input_text({"messages": [{"role": "user", "content": "a"}, {"role": "ai", "content": "b"}]}) == "a"
    assert input_text({"messages": [{"type": "human", "content": [{"type": "text", "text": "x"}]}]}) == "x"
    assert input_text("plain") == "plain"
    assert input_text(None) is None
    with pytest.raises(ConfigError, match="user_input"):
        input_text({"other": 1})


def test_resume_values_become_approval_decisions():
    assert resume_decision({"resume": {"approved": True}}) == {"approved": True, "reason": None}
    assert resume_decision({"resume": "reject"})["approved"] is False
    assert resume_decision({"resume": {"abc123": {"approved": True}}})["approved"] is True
    assert resume_decision({"resume": True, "goto": ()})["approved"] is True
    with pytest.raises(ConfigError, match="goto"):
        resume_decision({"resume": True, "goto": "reasoning"})


def test_translator_emits_only_requested_modes_and_interrupts_last():
    assert normalize_modes(["debug", "tasks"]) == {"debug", "tasks"}  # every mode the SDK knows streams
    tr = StreamTranslator(normalize_modes(["updates", "values", "no-such-mode"]), "r1")
    assert tr.modes == {"updates", "values"}
    ev = RunEvent(GRAPH_EVENT, {"mode": "updates", "chunk": {"__interrupt__": (Interrupt(value={"q": 1}, id="i1"),)}})
    assert list(tr.translate(ev)) == [("updates", {"__interrupt__": [{"value": {"q": 1}, "id": "i1"}]})]
    cp = RunEvent(GRAPH_EVENT, {"mode": "checkpoints", "chunk": {"values": {"a": 1}}})
    assert list(tr.translate(cp)) == [("values", {"a": 1})]
    msg = RunEvent(GRAPH_EVENT, {"mode": "messages", "chunk": (AIMessageChunk(content="t"), {"langgraph_node": "n"})})
    assert list(tr.translate(msg)) == []
    assert list(tr.closing([{"value": 1, "id": "i"}])) == [
        ("values", {"a": 1, "__interrupt__": [{"value": 1, "id": "i"}]})
    ]
    assert list(tr.translate(RunEvent("node", {"node": "x"}))) == []


def test_messages_and_events_modes():
    tr = StreamTranslator(normalize_modes("messages-tuple"), "r1")
    msg = RunEvent(GRAPH_EVENT, {"mode": "messages", "chunk": (AIMessageChunk(content="t"), {"langgraph_node": "n"})})
    [(event, data)] = list(tr.translate(msg))
    assert event == "messages" and data[0]["content"] == "t" and data[1] == {"langgraph_node": "n"}
    events = StreamTranslator(normalize_modes("events"), "r1")
    model = {"langgraph_node": "n", "ls_model_type": "chat", "ls_model_name": "m"}
    token = RunEvent(GRAPH_EVENT, {"mode": "messages", "chunk": (AIMessageChunk(content="t", id="m1"), model)})
    got = list(events.translate(token))
    assert {event for event, _ in got} == {"events"}
    assert [d["event"] for _, d in got] == ["on_chain_start", "on_chat_model_start", "on_chat_model_stream"]
    assert got[0][1]["run_id"] == "r1" and got[0][1]["name"] == "LangGraph"
    assert got[2][1]["data"]["chunk"]["content"] == "t" and got[2][1]["name"] == "m"
    # A message a node put in the state (no model metadata) is no model call.
    assert list(events.translate(msg)) == []


def test_sse_framing_and_jsonable_fallbacks():
    assert sse("values", {"a": "é"}) == 'event: values\ndata: {"a":"é"}\n\n'.encode()

    class Odd:
        def __repr__(self) -> str:
            return "<odd>"

    assert jsonable({"x": (1, Odd()), 2: b"b"}) == {"x": [1, "<odd>"], "2": "b"}


def test_jsonable_of_nested_values_is_plain_json():
    """Dicts and lists in dicts and lists, keys that are not strings, enums, messages and
    interrupts come out as plain JSON types at every depth."""
    import enum

    from langchain_core.messages import AIMessage

    class Color(enum.StrEnum):
        RED = "red"

    msg = AIMessage("hi", id="m1", tool_calls=[{"id": "c1", "name": "t", "args": {"k": [1, {"x": None}]}}])
    value = {"a": [1, {"b": None, 3: [True, 2.5, Color.RED]}], "m": [msg], "i": [Interrupt("ok?", id="i1")]}
    out = jsonable(value)
    assert out == {
        "a": [1, {"b": None, "3": [True, 2.5, "red"]}],
        "m": [msg.model_dump()],
        "i": [{"value": "ok?", "id": "i1"}],
    }
    assert json.loads(json.dumps(out)) == out


async def test_a_follower_gets_the_backlog_heartbeats_then_live_events_until_the_end():
    import asyncio
    import threading

    from agent.serve.engine import ApiRunStatus, RunRecord

    rec = RunRecord(thread_id="t", tenant_id="default", assistant_id="a", metadata={}, kwargs={})
    rec.push(RunEvent("started", {"run_id": "r"}))

    def later() -> None:
        rec.push(RunEvent("node", {"node": "init"}))
        rec.finish(ApiRunStatus.SUCCESS)

    threading.Timer(0.3, later).start()
    seen = [ev.kind if ev is not None else None async for ev in rec.follow(heartbeat_s=0.05)]
    assert seen[0] == "started" and seen[-1] == "node" and None in seen
    assert [ev.kind async for ev in rec.follow() if ev is not None] == ["started", "node"]  # replay after the end
    await asyncio.wait_for(rec.wait(), 1)


def test_runs_go_to_the_workers_when_a_broker_is_named_or_when_asked():
    default = load_settings(None)
    assert default.serve.on_workers(default.workers) is False  # the embedded default: in the server
    brokered = load_settings(None, overrides={"workers.broker_url": "redis://127.0.0.1:6379/0"})
    assert brokered.serve.on_workers(brokered.workers) is True
    pinned = load_settings(None, overrides={"workers.broker_url": "redis://x/0", "serve.runs_on": "server"})
    assert pinned.serve.on_workers(pinned.workers) is False
    asked = load_settings(None, overrides={"serve.runs_on": "workers"})
    assert asked.serve.on_workers(asked.workers) is True
    with pytest.raises(ConfigError, match="no task broker configured"):
        ServeContext(asked)
    no_redis = load_settings(
        None,
        overrides={"serve.runs_on": "workers", "workers.broker_url": "amqp://x//", "workers.result_backend": "rpc://"},
    )
    with pytest.raises(ConfigError, match="stream their events through Redis"):
        ServeContext(no_redis)


def test_worker_events_read_back_as_json_translate_like_in_process_ones():
    """What a worker publishes (encoded to JSON) gives the client the same stream as the live objects."""
    chunks = [
        ("updates", {"__interrupt__": (Interrupt(value={"q": 1}, id="i1"),)}),
        ("messages", (AIMessageChunk(content="t"), {"langgraph_node": "n"})),
        ("checkpoints", {"values": {"a": 1}}),
        ("custom", {"event": "tool_call", "name": "x"}),
    ]
    modes = normalize_modes(["updates", "values", "messages", "custom", "events"])
    live, wire = StreamTranslator(modes, "r1"), StreamTranslator(modes, "r1")
    for mode, chunk in chunks:
        ev = RunEvent(GRAPH_EVENT, {"mode": mode, "chunk": chunk})
        kind, data = encode_event(ev)
        assert list(live.translate(ev)) == list(wire.translate(RunEvent(kind, json.loads(json.dumps(data)))))
