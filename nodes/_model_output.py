"""What a real model's reply can get wrong, and what the loop does about each case (pure functions).

A real model (llama.cpp, vLLM, Ollama, OpenAI) writes things no script does. Every case below has
one named issue, one defined outcome, and is reported in the `issues` list of the node's
`model_call` event; none of them raises:

| issue               | outcome                                                                        |
|---------------------|--------------------------------------------------------------------------------|
| plan_not_json       | planning: fallback plan from the prose (its list items, else the user's task)  |
| empty_reply         | reasoning: reply not kept, asked again with a hint (bounded by the failure guard) |
| invalid_tool_args   | acting: an error ToolMessage for that call (arguments not a JSON object)       |
| unknown_tool        | acting: an error ToolMessage naming the available tools                        |
| missing_call_id     | reasoning: a fresh id, unique in the session, so the call can be paired        |
| duplicate_call_id   | reasoning: the same                                                            |
| unusable_call_id    | reasoning: the same (an id `is_call_id` refuses: a control character, `/`, ...) |
| truncated           | memory: compress and retry (finish_reason=length; bounded by the failure guard)|
| no_usage            | token estimate used for the event; the context ledger estimates too            |

Arguments that parse but fail the tool's schema are the tool's business: `run_tool` answers them
with an error ToolMessage naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from enum import StrEnum
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from checkpointing.ids import is_call_id


class Issue(StrEnum):
    """Something a model's reply got wrong."""

    PLAN_NOT_JSON = "plan_not_json"
    EMPTY_REPLY = "empty_reply"
    INVALID_TOOL_ARGS = "invalid_tool_args"
    UNKNOWN_TOOL = "unknown_tool"
    MISSING_CALL_ID = "missing_call_id"
    DUPLICATE_CALL_ID = "duplicate_call_id"
    UNUSABLE_CALL_ID = "unusable_call_id"
    TRUNCATED = "truncated"
    NO_USAGE = "no_usage"


class Outcome(StrEnum):
    """What the loop does about an issue."""

    FALLBACK_PLAN = "fallback_plan"
    RETRY_WITH_HINT = "retry_with_hint"
    TOOL_ERROR_TO_MODEL = "tool_error_to_model"
    ID_ASSIGNED = "id_assigned"
    COMPRESS_AND_RETRY = "compress_and_retry"
    TOKEN_ESTIMATE = "token_estimate"


class UsageSource(StrEnum):
    """Where the token counts of a `model_call` event come from."""

    SERVER = "server"
    ESTIMATE = "estimate"


EMPTY = "empty"  # last_iteration_result.finish_reason of an empty reply (not a server finish reason)
EMPTY_REPLY_HINT = "Your last reply was empty. Answer the user's request in plain text, or call one of the tools."
MAX_PLAN_CHARS = 2000
MAX_TODOS = 8


def issue(kind: Issue, outcome: Outcome, **detail: Any) -> dict[str, Any]:
    """One entry of a `model_call` event's `issues` list."""
    return {"issue": kind.value, "outcome": outcome.value, **{k: v for k, v in detail.items() if v is not None}}


def text_of(content: Any) -> str:
    """The text of a message content (a string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else str(b.get("text") or "") for b in content if isinstance(b, str | dict)]
        return "".join(parts)
    return "" if content is None else str(content)


# --- reasoning ---------------------------------------------------------------------------------
def as_ai_message(reply: BaseMessage) -> AIMessage:
    """The reply as a plain AIMessage (a streamed reply arrives as a merged AIMessageChunk)."""
    if type(reply) is AIMessage:
        return reply
    if isinstance(reply, AIMessage):
        return AIMessage(
            content=reply.content,
            id=reply.id,
            tool_calls=list(reply.tool_calls),
            invalid_tool_calls=list(reply.invalid_tool_calls),
            usage_metadata=reply.usage_metadata,
            response_metadata=dict(reply.response_metadata or {}),
            additional_kwargs=dict(reply.additional_kwargs or {}),
        )
    return AIMessage(content=reply.content, id=reply.id)


def answered_ids(prompt: Iterable[BaseMessage]) -> set[str]:
    """Tool-call ids already answered in the prompt (a new call must not reuse one)."""
    return {m.tool_call_id for m in prompt if isinstance(m, ToolMessage)}


def sanitize_reply(reply: BaseMessage, *, prefix: str, seen_ids: Collection[str]) -> tuple[AIMessage, list[dict]]:
    """A reply whose every tool call (valid or not) has its own id, plus the issues found on the way.

    Calls LangChain could not parse stay in `invalid_tool_calls` (where the OpenAI client put them),
    so the message is sent back to the server as it was written; acting answers each with an error.
    """
    msg = as_ai_message(reply)
    issues: list[dict] = []
    seen = set(seen_ids)
    counter = 0

    def fixed(calls: list[Any]) -> tuple[list[dict[str, Any]], bool]:
        nonlocal counter
        out, changed = [], False
        for tc in calls:
            counter += 1
            tid = tc.get("id")
            if not isinstance(tid, str) or not tid or tid in seen or not is_call_id(tid):
                kind = _id_issue(tid, seen)
                new = f"{prefix}-{counter}"
                while new in seen:
                    new += "x"
                issues.append(issue(kind, Outcome.ID_ASSIGNED, name=tc.get("name"), tool_call_id=new, was=tid or None))
                tid, changed = new, True
            seen.add(tid)
            out.append({**tc, "id": tid})
        return out, changed

    calls, c1 = fixed(list(msg.tool_calls))
    invalid, c2 = fixed(list(msg.invalid_tool_calls))
    for tc in invalid:
        issues.append(
            issue(
                Issue.INVALID_TOOL_ARGS,
                Outcome.TOOL_ERROR_TO_MODEL,
                name=tc.get("name"),
                tool_call_id=tc["id"],
                detail=_first_line(tc.get("error")),
            )
        )
    if c1 or c2:
        msg = msg.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid})
    return msg, issues


def _id_issue(tid: Any, seen: Collection[str]) -> Issue:
    if not isinstance(tid, str) or not tid:
        return Issue.MISSING_CALL_ID
    return Issue.DUPLICATE_CALL_ID if tid in seen else Issue.UNUSABLE_CALL_ID


def is_empty(reply: AIMessage) -> bool:
    """No text, no tool call (valid or not): the reply says nothing."""
    return not text_of(reply.content).strip() and not reply.tool_calls and not reply.invalid_tool_calls


def classify(reply: AIMessage, finish_reason: str | None, tool_names: Collection[str]) -> list[dict]:
    """The issues of a sanitized reply that the reasoning node reports (ids are `sanitize_reply`'s)."""
    found: list[dict] = []
    if finish_reason == "length":
        found.append(issue(Issue.TRUNCATED, Outcome.COMPRESS_AND_RETRY))
    elif is_empty(reply):
        found.append(issue(Issue.EMPTY_REPLY, Outcome.RETRY_WITH_HINT))
    if tool_names:
        for tc in reply.tool_calls:
            if tc["name"] not in tool_names:
                found.append(
                    issue(Issue.UNKNOWN_TOOL, Outcome.TOOL_ERROR_TO_MODEL, name=tc["name"], tool_call_id=tc.get("id"))
                )
    if not reply.usage_metadata:
        found.append(issue(Issue.NO_USAGE, Outcome.TOKEN_ESTIMATE))
    return found


def usage_of(reply: AIMessage, prompt: list[BaseMessage]) -> tuple[dict[str, int], UsageSource]:
    """The server's token counts when it sent them, else an estimate (and which one it is)."""
    if reply.usage_metadata:
        return dict(reply.usage_metadata), UsageSource.SERVER  # type: ignore[arg-type]
    tin = count_tokens_approximately(prompt)
    tout = count_tokens_approximately([reply]) if not is_empty(reply) else 0
    return {"input_tokens": tin, "output_tokens": tout, "total_tokens": tin + tout}, UsageSource.ESTIMATE


def with_retry_hint(prompt: list[BaseMessage], last_result: Mapping[str, Any] | None) -> list[BaseMessage]:
    """The prompt, plus a one-off nudge when the previous reply was empty (never stored in the context)."""
    if (last_result or {}).get("finish_reason") == EMPTY:
        return [*prompt, HumanMessage(EMPTY_REPLY_HINT)]
    return prompt


# --- acting --------------------------------------------------------------------------------------
def invalid_call_answers(
    ai: Mapping[str, Any] | None, emit: Callable[[str, dict[str, Any]], None]
) -> list[ToolMessage]:
    """One error ToolMessage for each tool call whose arguments could not be parsed; events for each.

    The model reads why its call was refused and can call again; the pairing stays valid because the
    call (kept in `invalid_tool_calls`) is answered right after its AI message like any other.
    """
    answers = []
    for tc in (ai or {}).get("invalid_tool_calls") or []:
        name, cid = tc.get("name") or "", str(tc.get("id"))
        raw = str(tc.get("args") or "")
        content = (
            f"error: the arguments of your call to {name or '<no name>'!r} are not a JSON object "
            f"({_first_line(tc.get('error')) or 'unparseable'}); received {raw[:200]!r}. "
            "Call the tool again with a JSON object that matches its parameters."
        )
        emit("tool_call", {"tool_call_id": cid, "name": name, "args": raw[:500], "invalid": True})
        emit(
            "tool_result",
            {
                "tool_call_id": cid,
                "name": name,
                "status": "error",
                "size": len(content),
                "replayed": False,
                "content": content,
            },
        )
        answers.append(
            ToolMessage(content=content, tool_call_id=cid, name=name or None, status="error", id=f"tool-{cid}")
        )
    return answers


# --- planning ------------------------------------------------------------------------------------
def has_json_plan(text: str) -> bool:
    """Whether the planner's reply holds the JSON object it was asked for."""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        return False
    try:
        return isinstance(json.loads(text[start : end + 1]), dict)
    except json.JSONDecodeError:
        return False


def checked_plan(text: str, plan: str, titles: list[str], user_input: str | None) -> tuple[str, list[str], list[dict]]:
    """The plan to use: the model's when it wrote JSON, else a bounded fallback built from its prose."""
    titles = [t.strip()[:200] for t in titles if t and t.strip()][:MAX_TODOS]
    if has_json_plan(text) and (plan or titles):
        return plan[:MAX_PLAN_CHARS], titles, []
    task = (user_input or "the user's request").strip()
    if not titles:
        titles = [task[:200]]
    prose = plan.strip()[:MAX_PLAN_CHARS]
    fallback = prose or f"Work on the user's request directly: {task[:300]}"
    kind = Issue.PLAN_NOT_JSON
    return (
        fallback,
        titles,
        [issue(kind, Outcome.FALLBACK_PLAN, detail="empty reply" if not text.strip() else None, todos=len(titles))],
    )


def _first_line(text: Any) -> str | None:
    """The telling line of a parser error (LangChain's starts with a generic one)."""
    if not text:
        return None
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    telling = [ln for ln in lines if ln.startswith("Received ")] or lines
    return telling[0][:200] if telling else None
