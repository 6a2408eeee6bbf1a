"""Hostile bodies against a real `agentrt serve`: a wrong type, an unknown enum value or a body that
is not JSON answers 422 naming the field, never a 500 or a dropped connection, and a refused request
creates nothing (no thread, no session folder). Then every route of the OpenAPI schema fuzzed with
schemathesis: a bounded, fixed sample here, the full run with `AGENTRT_FUZZ_ALL=1`
(`AGENTRT_FUZZ_EXAMPLES=N` sets the examples per route). The sample leaves out the negative
examples schemathesis cannot make (see `negatable`: they would send no request); the full run tries
them all.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.support.drills import switch
from tests.support.runners import make_config
from tests.support.serve import Server, serving

FUZZ_ALL = switch("AGENTRT_FUZZ_ALL")
EXAMPLES = int(os.environ.get("AGENTRT_FUZZ_EXAMPLES") or (100 if FUZZ_ALL else 2))
"""Examples per route, generation mode (positive, negative) and thread (random, real); the full run
(`AGENTRT_FUZZ_ALL=1`, random seeds) sends about 7,000 requests in some 20 minutes."""
A = "agentrt"
FOLLOWED_UNTIL_CLOSED = {"/threads/{thread_id}/stream", "/threads/{thread_id}/stream/events"}
"""Thread streams that last until the client goes away (test_serve_thread_stream.py checks their refusals)."""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    tmp = tmp_path_factory.mktemp("hostile")
    with serving(make_config(tmp), tmp) as server:
        yield server, tmp / "agentrt"


def objects(server: Server, base: Path) -> tuple[int, frozenset[str]]:
    """What a request could have created: the thread count, and every folder under the base dir."""
    count = httpx.post(f"{server.url}/threads/count", json={}, timeout=30).json()
    return count, frozenset(str(p.relative_to(base)) for p in base.rglob("*") if p.is_dir())


def negatable(operation: Any, fixed: dict[str, Any] | None) -> bool:
    """Whether schemathesis can make a request of `operation` invalid with the path parameters
    `fixed`. Not while every path parameter it generates may be any string (every string is a valid
    segment: each example is thrown away, and after some 450 the run ends Unsatisfiable, having sent
    nothing), nor when the operation takes nothing at all."""
    raw = operation.definition.raw
    params = [p for p in raw.get("parameters", []) if not (p["in"] == "path" and fixed and p["name"] in fixed)]
    in_path = [p.get("schema", {}) for p in params if p["in"] == "path"]
    if in_path and all(s.get("type") == "string" and not set(s) - {"type", "title"} for s in in_path):
        return False
    return bool(params or raw.get("requestBody"))


def bad_requests(tid: str) -> list[tuple[str, str, Any, str]]:
    """(method, path, JSON body or raw text, the field the answer must name)."""
    new = str(uuid.uuid4())
    run = {"assistant_id": A}
    return [
        ("POST", "/threads/search", {"limit": "x"}, "limit"),
        ("POST", "/threads/search", {"limit": -1}, "limit"),
        ("POST", "/threads/search", {"status": "sleepy"}, "status"),
        ("POST", "/threads/search", {"sort_by": "colour"}, "sort_by"),
        ("POST", "/threads/search", {"sort_order": "up"}, "sort_order"),
        ("POST", "/threads/search", {"metadata": "q3"}, "metadata"),
        ("POST", "/threads/search", {"ids": 5}, "ids"),
        ("POST", "/threads/search", [1, 2], "body"),
        ("POST", "/threads/search", "not json", "body"),
        ("POST", "/threads/search", {"values": {"x": 1}}, "values"),
        ("POST", "/threads/search", {"extract": {"last": "values.messages[-1]"}}, "extract"),
        ("POST", "/threads/count", {"status": 3}, "status"),
        ("POST", "/threads", {"metadata": [1]}, "metadata"),
        ("POST", "/threads", {"if_exists": "maybe"}, "if_exists"),
        ("POST", "/threads", {"metadata": {"n": 2**70}}, "64 bits"),
        ("POST", "/threads/search", {"metadata": {"": 1}}, "metadata"),
        ("POST", "/threads/count", {"metadata": {'a"b': 1}}, "metadata"),
        ("POST", "/threads", {"thread_id": 5}, "thread_id"),
        ("POST", "/threads", {"thread_id": "../../etc"}, "thread id"),
        ("PATCH", f"/threads/{tid}", {"metadata": "x"}, "metadata"),
        ("POST", f"/threads/{tid}/history", {"limit": "lots"}, "limit"),
        ("POST", f"/threads/{tid}/history", {"limit": 0}, "limit"),
        ("POST", f"/threads/{tid}/history", {"before": 3}, "before"),
        ("POST", f"/threads/{tid}/state/checkpoint", {"checkpoint": "x"}, "checkpoint"),
        ("POST", f"/threads/{tid}/state", {"values": 3}, "values"),
        ("POST", f"/threads/{tid}/runs/stream", {**run, "stream_mode": "shouting"}, "stream_mode"),
        ("POST", f"/threads/{tid}/runs", {**run, "multitask_strategy": "race"}, "multitask_strategy"),
        ("POST", f"/threads/{tid}/runs", {**run, "after_seconds": -1}, "after_seconds"),
        ("POST", f"/threads/{tid}/runs", {**run, "after_seconds": "soon"}, "after_seconds"),
        ("POST", f"/threads/{new}/runs", {**run, "if_not_exists": "create", "after_seconds": 10**9}, "after_seconds"),
        ("POST", f"/threads/{tid}/runs/wait", {**run, "interrupt_after": "some"}, "interrupt_after"),
        (
            "POST",
            f"/threads/{new}/runs",
            {**run, "if_not_exists": "create", "interrupt_after": ["y"]},
            "interrupt_after",
        ),
        ("POST", "/runs/wait", {**run, "command": {"resume": True}}, "command"),
        ("POST", f"/threads/{tid}/runs/wait", {**run, "command": "go"}, "command"),
        ("POST", f"/threads/{new}/runs", {**run, "if_not_exists": "create", "interrupt_before": ["x"]}, "interrupt"),
        ("POST", f"/threads/{new}/runs/wait", {**run, "if_not_exists": "create", "input": 5}, "input"),
        ("POST", "/runs/wait", {**run, "input": 5}, "input"),
        ("POST", "/runs", {**run, "input": {"messages": [{"role": "ai", "content": "hi"}]}}, "input"),
        ("POST", "/runs/stream", {**run, "webhook": "http://x"}, "webhook"),
        ("POST", "/runs", {"assistant_id": 7}, "assistant_id"),
        ("POST", "/runs/stream", {}, "assistant_id"),
        ("POST", "/runs", {**run, "on_completion": "shred"}, "on_completion"),
        ("POST", "/runs/cancel", {"status": "x"}, "status"),
        ("POST", "/assistants/search", {"limit": "ten"}, "limit"),
        ("POST", "/assistants/count", {"graph_id": 1}, "graph_id"),
        ("POST", "/assistants", {"graph_id": "agentrt", "context": {"tools": ["os:system"]}}, "context.tools"),
        ("POST", "/assistants", {"graph_id": "agentrt", "assistant_id": "../x"}, "assistant_id"),
        ("POST", "/assistants", {"graph_id": "agentrt", "metadata": {"k": "a\x00b"}}, "NUL"),
        ("POST", f"/assistants/{A}/latest", {"version": "first"}, "version"),
        ("POST", f"/threads/{tid}/runs", {**run, "config": {"configurable": {"module": "os"}}}, "configurable.module"),
        ("GET", f"/threads/{tid}/runs?status=bogus", None, "status"),
        ("GET", f"/threads/{tid}/runs?limit=x", None, "limit"),
        ("GET", f"/threads/{tid}/history?limit=x", None, "limit"),
        ("GET", f"/assistants/{A}/graph?xray=maybe", None, "xray"),
        ("POST", f"/threads/{tid}/runs/x/cancel?action=explode", None, "action"),
    ]


def test_malformed_bodies_answer_422_naming_the_field_and_create_nothing(demo):
    server, base = demo
    tid = httpx.post(f"{server.url}/threads", json={"metadata": {"k": "v"}}, timeout=30).json()["thread_id"]
    before = objects(server, base)
    wrong = []
    for method, path, body, field in bad_requests(tid):
        kwargs: dict[str, Any] = {"content": body} if isinstance(body, str) else {"json": body}
        if isinstance(body, str):
            kwargs["headers"] = {"content-type": "application/json"}
        res = httpx.request(method, server.url + path, timeout=60, **kwargs)
        if res.status_code != 422 or field not in res.text:
            wrong.append(f"{method} {path} {body!r}: {res.status_code} {res.text[:200]}")
    assert wrong == []
    assert objects(server, base) == before
    # the SDK's own bodies, extra fields included, are still accepted
    ok = httpx.post(f"{server.url}/threads/search", json={"limit": 5, "offset": 0, "shiny_new_field": 1}, timeout=30)
    assert ok.status_code == 200 and tid in {t["thread_id"] for t in ok.json()}


def test_fuzzed_routes_never_answer_5xx_and_refusals_create_nothing(demo):
    """Every operation of /openapi.json, positive and negative examples: no 5xx, no dropped
    connection, and a 4xx leaves the thread count and the session folders as they were."""
    server, base = demo
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    failures: list[str] = []
    tried = 0
    codes: dict[int, int] = {}
    # What a refusal left, as it left it: the next request's "before" (taken again after anything else).
    left: list[tuple[int, frozenset[str]]] = []

    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in FOLLOWED_UNTIL_CLOSED:
            continue
        left.clear()
        # On a thread's routes, half the examples name a real thread (a random id only meets the 404).
        fixed: list[dict[str, Any] | None] = [None]
        if "{thread_id}" in operation.path:
            tid = httpx.post(f"{server.url}/threads", json={"metadata": {"fuzz": True}}, timeout=30).json()
            fixed.append({"thread_id": tid["thread_id"]})
        for mode, path_parameters in itertools.product((GenerationMode.POSITIVE, GenerationMode.NEGATIVE), fixed):
            if mode is GenerationMode.NEGATIVE and not FUZZ_ALL and not negatable(operation, path_parameters):
                continue

            @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=not FUZZ_ALL,
                suppress_health_check=list(HealthCheck),
            )
            def probe(case: schemathesis.Case) -> None:
                nonlocal tried
                tried += 1
                before = left.pop() if left else objects(server, base)
                try:
                    res = case.call(base_url=server.url, timeout=60)
                except Exception as err:  # a dropped connection or a timeout
                    failures.append(f"{case.operation.label} {case.body!r}: {type(err).__name__} {err}")
                    return
                codes[res.status_code // 100] = codes.get(res.status_code // 100, 0) + 1
                if res.status_code >= 500:
                    failures.append(f"{case.operation.label} {case.body!r}: {res.status_code} {res.text[:200]}")
                elif 400 <= res.status_code < 500:
                    after = objects(server, base)
                    if after != before:
                        failures.append(f"{case.operation.label} {case.body!r}: {res.status_code} but created objects")
                    else:
                        left.append(after)

            try:
                probe()
            except Unsatisfiable:  # nothing to make invalid (a route without parameters or body)
                assert mode is GenerationMode.NEGATIVE, operation.label
    print(f"fuzzed {tried} requests; answers by class: {codes}")
    assert tried > 20 and codes.get(2, 0) > 10  # some requests got through, not only refusals
    print("\n".join(failures))
    assert failures == []
