"""The LangGraph JS SDK (`@langchain/langgraph-sdk`, pinned in tests/js/package-lock.json) drives
`agentrt serve` and, as the reference, `langgraph dev` on the same graph and the same demo config.

tests/js/scenarios.mjs runs the same calls on each (threads create/get/search, a stream in the
values, updates, messages-tuple and events modes up to the demo's approval, state and history, the
approval answered with a resume command, runs.wait, runs.list; assistants create/get/update/
versions/set latest/search/count/delete; crons for a thread and stateless, search/count/delete, and
an assistant's crons gone with it) and prints what the SDK returned, ids and times masked. The
payloads must be equal field by field, except for the differences listed (with why) below; the
user-visible facts are asserted on each server too, so both breaking the same way fails. The SDK is
installed once per lockfile with `npm ci` into ~/.cache/agentrt/js/js-<sha256>.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.langgraph_dev import langgraph_dev, needs_langgraph_cli
from tests.support.npm import npm_modules
from tests.support.runners import ROOT, make_config
from tests.support.serve import serving

pytestmark = needs_langgraph_cli

JS_DIR = ROOT / "tests" / "js"
SCENARIOS = JS_DIR / "scenarios.mjs"
PROTOCOL = JS_DIR / "protocol.mjs"
SCRIPT_BOUND_S = 180

# --- Intended differences -------------------------------------------------------------------------
# Each rule is a regex over a field's path (list indices written `[]`) naming a field that only one
# server sends; every other field must be present on both with an equal (masked) value.
REF_ONLY = [
    # langgraph dev stamps the platform it runs on into every run's metadata (checkpoints, stream
    # metadata, the messages' metadata); agentrt is not LangGraph Platform and says nothing of it.
    r".*\.(langgraph_api_url|langgraph_api_version|langgraph_host|langgraph_plan|langgraph_version"
    r"|langgraph_request_id|run_attempt|created_by|ls_integration)",
    # langgraph dev copies the run's metadata (and thread, assistant, graph ids, an empty user id) into
    # each checkpoint's and message's metadata; agentrt keeps run metadata on the run.
    r"(state_\w+|history\[\]|stream_\w+\.messages\[\]\[\])\.metadata\.(suite|scenario|assistant_id|graph_id"
    r"|thread_id|user_id)",
    r"stream_\w+\.messages\[\]\[\]\.(suite|scenario|assistant_id|graph_id|thread_id|user_id)",
    # Legacy duplicates of checkpoint.checkpoint_id / parent_checkpoint.checkpoint_id on a state.
    r"(state_\w+|history\[\])\.(checkpoint_id|parent_checkpoint_id)",
    # Newer Agent Server fields agentrt does not serve (the SDK treats them as optional).
    r"(thread_\w+|search\[\])\.(state_updated_at|config|config\.configurable)",
    r".*__interrupt__\[\]\.response_schema",
    r"\w*runs\[\]\.langsmith_session_name",
    # A run's kwargs echo server internals (auth config, durability, webhooks...): agentrt keeps its own.
    r"\w*runs\[\]\.kwargs\.(checkpoint_during|config|context|durability|feedback_keys|resumable|subgraphs"
    r"|temporary|webhook)",
    # langgraph dev merges the thread's metadata (and assistant, graph) into each run's metadata.
    r"\w*runs\[\]\.metadata\.(assistant_id|graph_id|suite|scenario)",
    # A cron's payload: langgraph dev keeps the whole create request (with the cron's assistant and
    # schedule, which agentrt keeps as the cron's own fields) and adds the cron id to its runs'
    # configurable; agentrt keeps the body of the runs it starts, and names the cron in their metadata
    # (a run's configurable holds only the settings an assistant may change).
    r"cron_\w+(\[\])?\.payload\.(assistant_id|schedule|config)",
    # Newer Agent Server field: agentrt reads every schedule in UTC.
    r"cron_\w+(\[\])?\.timezone",
]
OURS_ONLY = [
    # agentrt's session view of a thread: its branch, session status, error and pending interrupts.
    r"(thread_\w+|search\[\])\.(branch_id|session_status|error|interrupts)",
    # agentrt names the user, and its only graph, on a thread when it is created (langgraph dev adds
    # graph and assistant on the first run, which the thread_done and search payloads then compare).
    r"(thread_\w+|search\[\])\.metadata\.user_id",
    r"thread_(created|got)\.metadata\.(assistant_id|graph_id)",
    # agentrt's checkpoint metadata: its agent, branch and turn; and the (empty) checkpoint_map.
    r"(state_\w+|history\[\])\.metadata\.(agent_id|branch_id|turn)",
    r"(state_\w+|history\[\])\.(checkpoint|parent_checkpoint)\.checkpoint_map",
    # The stream's first event names the thread as well as the run.
    r"stream_\w+\.metadata\[\]\.thread_id",
    # agentrt's own run id and the process that executed the run; kwargs it keeps for scheduling.
    r"\w*runs\[\]\.metadata\.(agentrt_run_id|executed_by)",
    r"\w*runs\[\]\.kwargs\.(after_seconds|on_completion)",
    # A cron's newest firing (its run, status and error): how a cron whose run failed is seen.
    r"cron_\w+(\[\])?\.last_run",
]
# Fields on both whose values may differ.
EITHER = [
    # A thread that has never run: agentrt's values are {}, langgraph dev's null (both "no state").
    r"thread_(created|got)\.values",
    # The modes a run records: agentrt sorts the requested ones and records all it produces for a
    # wait; langgraph dev records what the request said. The streams themselves are compared.
    r"\w*runs\[\]\.kwargs\.stream_mode",
    # set_latest: agentrt makes the version's context current with its config (LangGraph keeps the two
    # equal, and agentrt's runs read them as one); langgraph dev's in-memory server moves the config
    # back and leaves the context at the newest version's.
    r"assistant_(latest|search\[\])\.context",
    # A cron made without a user: agentrt says null (the whole tenant's), langgraph dev "".
    r"cron_\w+(\[\])?\.user_id",
]
# The `events` mode is compared on its projection (`_events_outline`), not event by event:
# agentrt builds it from the run's journal (node tasks, model chunks, its own custom events), while
# langgraph dev runs astream_events: that adds on_chain_stream and the routers' chain events, names
# the root chain after the graph id and the model after its class, and interleaves differently.
STREAMS = ("stream_paused", "stream_resumed")


def _matches(rules: list[str], path: str) -> bool:
    return any(re.fullmatch(rule, path) for rule in rules)


def _differences(ours: Any, ref: Any, path: str) -> list[str]:
    """Every field where the two payloads differ and no rule says why."""
    if _matches(EITHER, path):
        return []
    if isinstance(ours, dict) and isinstance(ref, dict):
        found: list[str] = []
        for key in sorted(set(ours) | set(ref)):
            sub = f"{path}.{key}"
            if key not in ours:
                found += [] if _matches(REF_ONLY, sub) else [f"{sub}: only langgraph dev sends {ref[key]!r:.200}"]
            elif key not in ref:
                found += [] if _matches(OURS_ONLY, sub) else [f"{sub}: only agentrt sends {ours[key]!r:.200}"]
            else:
                found += _differences(ours[key], ref[key], sub)
        return found
    if isinstance(ours, list) and isinstance(ref, list):
        found = [] if len(ours) == len(ref) else [f"{path}: {len(ours)} items != {len(ref)}"]
        for a, b in zip(ours, ref, strict=False):
            found += _differences(a, b, f"{path}[]")
        return found
    return [] if ours == ref else [f"{path}: agentrt {ours!r:.200} != langgraph dev {ref!r:.200}"]


def _parts(out: dict[str, Any], stream: str, event: str) -> list[Any]:
    return [p["data"] for p in out[stream] if p["event"] == event]


def _comparable(out: dict[str, Any]) -> dict[str, Any]:
    """The payloads with each stream split by mode (the modes interleave differently) and without
    `events` (compared on its outline)."""
    flat = {k: v for k, v in out.items() if k not in STREAMS}
    for stream in STREAMS:
        for event in ("metadata", "values", "updates", "messages"):
            flat[f"{stream}.{event}"] = _parts(out, stream, event)
    return flat


def _events_outline(out: dict[str, Any]) -> dict[str, Any]:
    """What a user of the events mode relies on: the nodes in the order they ran, and each model
    call's streamed text in order."""
    events = _parts(out, "stream_paused", "events")
    nodes = [
        e["name"]
        for e in events
        if e["event"] == "on_chain_start" and e.get("metadata", {}).get("langgraph_node") == e["name"]
    ]
    texts: list[str] = []
    for e in events:
        if e["event"] == "on_chat_model_start":
            texts.append("")
        elif e["event"] == "on_chat_model_stream":
            texts[-1] += e["data"]["chunk"]["content"]
    return {
        "first": events[0]["event"],
        "last": events[-1]["event"],
        "nodes": nodes,
        "model_texts": texts,
        "model_ends": sum(e["event"] == "on_chat_model_end" for e in events),
    }


# --- The SDK and the servers ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sdk_modules() -> Path:
    """node_modules for tests/js/package-lock.json, from `npm ci` once per lockfile hash."""
    return npm_modules(JS_DIR)


def _run_scenarios(url: str, modules: Path, where: Path, script: Path = SCENARIOS) -> subprocess.Popen[str]:
    # ESM resolves packages from the script's folder up: the script goes beside a link to the cache.
    where.mkdir()
    shutil.copy(script, where / script.name)
    (where / "node_modules").symlink_to(modules, target_is_directory=True)
    return subprocess.Popen(
        ["node", script.name, url], cwd=where, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _result(proc: subprocess.Popen[str], name: str) -> dict[str, Any]:
    out, err = proc.communicate(timeout=SCRIPT_BOUND_S)
    assert proc.returncode == 0, f"the JS SDK scenarios failed against {name}:\n{err[-3000:]}"
    return dict(json.loads(out))


@pytest.fixture(scope="module")
def results(sdk_modules: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    """The scenarios' payloads from agentrt serve and from langgraph dev, run side by side."""
    ours_dir, ref_dir = tmp_path_factory.mktemp("js-agentrt"), tmp_path_factory.mktemp("js-langgraph-dev")
    with serving(make_config(ours_dir), ours_dir) as server, langgraph_dev(ref_dir, make_config(ref_dir)) as ref_url:
        ours = _run_scenarios(server.url, sdk_modules, ours_dir / "js")
        ref = _run_scenarios(ref_url, sdk_modules, ref_dir / "js")
        yield {"agentrt": _result(ours, "agentrt serve"), "langgraph dev": _result(ref, "langgraph dev")}


# --- The tests ----------------------------------------------------------------------------------------
def test_the_js_sdk_gets_the_same_payloads_from_agentrt_as_from_langgraph_dev(
    results: dict[str, dict[str, Any]],
) -> None:
    ours, ref = _comparable(results["agentrt"]), _comparable(results["langgraph dev"])
    assert set(ours) == set(ref)
    found = [d for key in sorted(ours) for d in _differences(ours[key], ref[key], key)]
    assert not found, "\n".join(found[:40])


def test_the_events_mode_runs_the_same_nodes_and_streams_the_same_model_text(
    results: dict[str, dict[str, Any]],
) -> None:
    ours, ref = _events_outline(results["agentrt"]), _events_outline(results["langgraph dev"])
    assert ours == ref
    assert (ours["first"], ours["last"]) == ("on_chain_start", "on_chain_end")
    assert ours["nodes"][:3] == ["init", "planning", "reasoning"] and ours["nodes"][-1] == "acting"
    assert ours["model_ends"] == len(ours["model_texts"]) >= 2


@pytest.mark.parametrize("server", ["agentrt", "langgraph dev"])
def test_what_a_js_client_sees_the_answer_the_approval_and_the_statuses(
    results: dict[str, dict[str, Any]], server: str
) -> None:
    out = results[server]
    # Threads: created idle with the metadata asked for, interrupted at the approval, idle when done.
    assert out["thread_created"]["status"] == "idle"
    assert out["thread_created"]["metadata"]["scenario"] == "stream"
    assert out["thread_paused"]["status"] == "interrupted"
    assert out["thread_done"]["status"] == "idle"
    assert [t["metadata"]["scenario"] for t in out["search"]] == ["stream", "wait"]

    # The plan streams token by token in messages-tuple, from the planning node.
    chunks = [m for m, meta in _parts(out, "stream_paused", "messages") if meta["langgraph_node"] == "planning"]
    assert len(chunks) > 1 and all(m["type"] == "AIMessageChunk" for m in chunks)
    plan = json.loads("".join(m["content"] for m in chunks))
    assert plan["todos"] == ["Look at the datasets", "Compute revenue by region", "Write the report",
                             "Publish the report"]  # fmt: skip

    # The approval: the interrupt's value in the last values event, the updates and the state.
    approval = {
        "kind": "tool_approval",
        "tool_call_id": "call_6_1",
        "name": "publish_report",
        "args": {"path": "report.md", "channel": "team"},
        "question": "Allow the agent to run publish_report?",
    }
    assert [i["value"] for i in _parts(out, "stream_paused", "values")[-1]["__interrupt__"]] == [approval]
    assert [i["value"] for i in _parts(out, "stream_paused", "updates")[-1]["__interrupt__"]] == [approval]
    assert out["state_paused"]["next"] == ["acting"]
    assert [i["value"] for t in out["state_paused"]["tasks"] for i in t["interrupts"]] == [approval]
    assert [i["value"] for i in out["wait_paused"]["__interrupt__"]] == [approval]

    # Resumed with the decision: the answer, streamed and in the state; the history goes back to the start.
    answer = (
        "Revenue by region for 2026: West 12088.64, East 12014.97, North 11308.28, South 10415.45 "
        "(total 45827.34); every region beat its target. The report is in report.md and was published "
        "to the team outbox."
    )
    resumed = _parts(out, "stream_resumed", "messages")
    streamed = "".join(m["content"] for m, _ in resumed if m["type"] == "AIMessageChunk")
    assert streamed.endswith(answer)
    assert _parts(out, "stream_resumed", "values")[-1]["messages"][-1]["content"] == answer
    for done in (out["state_done"]["values"], out["wait_resumed"]):
        assert done["finish_reason"] == "completed" and done["messages"][-1]["content"] == answer
        assert [t["status"] for t in done["task_todo_list"]] == ["done"] * 4
    assert out["state_done"]["next"] == [] and out["history"][0]["values"] == out["state_done"]["values"]
    assert out["history"][-1]["next"] == ["__start__"]
    assert [r["status"] for r in out["runs"]] == [r["status"] for r in out["wait_runs"]] == ["success", "success"]


@pytest.mark.parametrize("server", ["agentrt", "langgraph dev"])
def test_what_a_js_client_sees_of_assistants_and_crons(results: dict[str, dict[str, Any]], server: str) -> None:
    out = results[server]
    made, updated = out["assistant_created"], out["assistant_updated"]
    assert (made["name"], made["version"], made["context"]) == ("JS bot", 1, {"system_prompt": "First."})
    assert out["assistant_got"] == made
    assert updated["version"] == 2 and updated["context"] == {"system_prompt": "Second."}
    assert updated["metadata"] == {"suite": "<suite>", "scenario": "assistant", "tier": "gold"}  # merged
    assert [v["version"] for v in out["assistant_versions"]] == [2, 1]
    assert [v["version"] for v in out["assistant_gold_versions"]] == [2]
    latest = out["assistant_latest"]
    assert latest["version"] == 1 and latest["config"] == {"configurable": {"system_prompt": "First."}}
    assert [a["name"] for a in out["assistant_search"]] == ["JS bot", "JS helper"]
    assert [a["name"] for a in out["assistant_search_name"]] == ["JS helper"]
    assert (out["assistant_count"], out["assistant_count_gold"]) == (2, 0)  # version 1 has no tier

    for_thread, stateless = out["cron_for_thread"], out["cron_stateless"]
    assert for_thread["schedule"] == stateless["schedule"] == "0 0 1 1 *"
    assert for_thread["thread_id"] == "<id>" and stateless["thread_id"] is None
    assert for_thread["next_run_date"] == "<time>" and for_thread["payload"]["input"] == {
        "user_input": "Summarise the sales"
    }
    assert [c["cron_id"] for c in out["cron_search"]] == [c["cron_id"] for c in out["cron_search_thread"]]
    assert len(out["cron_search"]) == 1 and out["cron_search"][0]["metadata"] == {"suite": "<suite>"}
    assert (out["cron_count"], out["cron_count_helper"], out["cron_count_helper_deleted"]) == (1, 1, 0)
    # Deleting an assistant: it is gone, and so are its crons.
    assert out["assistant_count_deleted"] == 1 and out["assistant_get_deleted"] == 404
    assert out["cron_count_assistant_deleted"] == 0


def test_the_js_thread_stream_lists_checkpoints_forks_injects_and_draws_the_tree(
    sdk_modules: Path, tmp_path: Path
) -> None:
    """agentrt alone: LangGraph's own server does not answer these commands of its protocol."""
    with serving(make_config(tmp_path), tmp_path) as server:
        out = _result(_run_scenarios(server.url, sdk_modules, tmp_path / "js", PROTOCOL), "agentrt serve")
    history = out["history"]
    assert out["tree"] == {"tree": {"namespace": [], "status": "completed", "graph_name": "agentrt"}}
    assert out["state"]["values"] == {"finish_reason": "completed"}
    listed = out["checkpoints"]["checkpoints"]
    assert [c["id"] for c in listed] == [h["checkpoint"]["checkpoint_id"] for h in history]
    # The fork: a new current branch from the planning node's state, whose run pauses at the approval again.
    assert out["fork"]["thread_id"] == out["thread_forked"]["thread_id"]
    assert out["thread_forked"]["branch_id"] != out["branch_before"]
    assert out["thread_forked"]["status"] == "interrupted"
    assert out["tree_forked"]["tree"]["status"] == "interrupted"
    assert "input.respond" in out["inject_refused"]
