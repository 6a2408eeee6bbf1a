"""`runs.join_stream` on a server that does not hold the run, two `agentrt serve` processes over one
store (the embedded files store, and PostgreSQL): a run the other server is running is read as it
goes, from its first event or from after a `Last-Event-ID`, to its end; a run the other server
finished is replayed whole or from a `Last-Event-ID`, as its holder replays it; a client going away
with `cancel_on_disconnect` stops the run on the server holding it. `threads.prune` skips a thread
a run of the other server holds (and does not count it), as LangGraph's server skips a thread it
could not delete."""

from __future__ import annotations

from typing import Any

from langgraph_sdk import get_sync_client

from tests.integration.serve.test_serve_two_servers import TERMINAL, A, _status_within, slow_pair
from tests.support.serve import Server

__all__ = ["slow_pair"]

MODES = ["values", "updates"]


def _parts(stream: Any) -> list[tuple[str, Any, Any]]:
    return [(p.id, p.event, p.data) for p in stream]


def test_a_run_of_another_server_is_joined_and_resumed_after_its_last_event_id(
    slow_pair: tuple[Server, Server],
) -> None:
    one, other = slow_pair
    here, there = get_sync_client(url=one.url), get_sync_client(url=other.url)
    tid = there.threads.create()["thread_id"]
    run = there.runs.create(tid, A, input={"user_input": "rest"}, stream_mode=MODES)
    rid = run["run_id"]
    first: list[tuple[str, Any, Any]] = []
    for part in here.runs.join_stream(tid, rid):  # opened while the run is pending or running
        first.append((part.id, part.event, part.data))
        if len(first) == 3:
            break
    assert here.runs.get(tid, rid)["status"] in {"pending", "running"}
    resumed = _parts(here.runs.join_stream(tid, rid, last_event_id=first[-1][0]))
    assert _status_within(there, tid, rid, TERMINAL) == "success"

    held = _parts(there.runs.join_stream(tid, rid))  # as the server holding it replays it
    assert held[: len(first)] == first
    assert resumed == held[len(first) :]  # exactly the events after that id, to the end
    assert [m["content"] for m in resumed[-1][2]["messages"]][-1] == "Rested four times."
    # Finished: this server replays it whole, or after an id, as the holder does.
    assert _parts(here.runs.join_stream(tid, rid)) == held
    assert _parts(here.runs.join_stream(tid, rid, last_event_id=held[4][0])) == held[5:]
    assert _parts(here.runs.join_stream(tid, rid, stream_mode="updates")) == [p for p in held if p[1] != "values"]


def test_leaving_a_join_with_cancel_on_disconnect_stops_the_run_on_the_other_server(
    slow_pair: tuple[Server, Server],
) -> None:
    one, other = slow_pair
    here, there = get_sync_client(url=one.url), get_sync_client(url=other.url)
    tid = there.threads.create()["thread_id"]
    rid = there.runs.create(tid, A, input={"user_input": "rest"}, stream_mode=MODES)["run_id"]
    _status_within(there, tid, rid, {"running"})
    for _ in here.runs.join_stream(tid, rid, cancel_on_disconnect=True):
        break  # the client goes away after the first event

    assert _status_within(there, tid, rid, TERMINAL) == "interrupted"
    said = [m["content"] for m in there.threads.get_state(tid)["values"].get("messages") or []]
    assert "Rested four times." not in said  # stopped before its last step


def test_prune_skips_a_thread_a_run_of_the_other_server_holds(slow_pair: tuple[Server, Server]) -> None:
    one, other = slow_pair
    here, there = get_sync_client(url=one.url), get_sync_client(url=other.url)
    held, idle = (there.threads.create()["thread_id"] for _ in range(2))
    rid = there.runs.create(held, A, input={"user_input": "rest"})["run_id"]
    _status_within(there, held, rid, {"running"})

    assert here.threads.prune([held, idle]) == {"pruned_count": 1}

    assert here.threads.get(held)["thread_id"] == held
    assert _status_within(there, held, rid, TERMINAL) == "success"  # the run went on
    said = [m["content"] for m in there.threads.get_state(held)["values"]["messages"]]
    assert said[-1] == "Rested four times."
