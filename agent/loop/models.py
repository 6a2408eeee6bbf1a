"""Chat-model factory from config, and the scripted chat model that ships with the package.

`openai`: langchain-openai's `ChatOpenAI` against any OpenAI-compatible `base_url` (OpenAI, vLLM,
llama.cpp, Ollama); the key is read from the environment variable named by `api_key_env`.

`scripted`: `ScriptedChatModel` replays a YAML script, one response per model call:

    responses:
      - content: '{"plan": "...", "todos": ["..."]}'   # planning reply
        usage: {input_tokens: 120, output_tokens: 40} # optional; estimated when absent
        finish_reason: stop                            # optional; stop / tool_calls / length
      - tool_calls:
          - {name: write_file, args: {path: a.txt, content: {$repeat: ["x", 10000]}}}
      - content: "Done."
        expect_in_prompt: "some text"                 # optional: fail unless the prompt has it
        instead_if_prompt_has:                        # optional: the first variant whose text is in
          - {text: "rejected by the human", content: "Not published."}  # this turn's prompt replaces it

What real models get wrong can be scripted too (tests pin the runtime's answer to each):

      - raw_tool_calls:                               # arguments as the server sent them (a string):
          - {name: calculator, arguments: '{"expression": 6*7'}   # not JSON -> invalid_tool_calls
      - tool_calls: [{name: no_such_tool}]
        omit_ids: true                                # tool calls without ids
        omit_usage: true                              # no usage block, as many servers when streaming
      - content: ""                                   # an empty reply

The n-th model call of a session gets response n: the runtime passes the session's persisted call
index, so a resumed run replays the same responses the crashed one would have received. A call
beyond the script raises `ModelCallFailed` (it never invents an answer).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from agent.core.config import ModelSettings
from agent.core.errors import ConfigError, ModelCallFailed
from agent.core.text import shown_path
from agent.core.yaml_errors import yaml_problem


class ScriptedToolCall(BaseModel):
    """One tool call of a scripted response."""

    model_config = ConfigDict(extra="forbid")
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptedRawToolCall(BaseModel):
    """A tool call as an OpenAI-compatible server sends it: `arguments` is a string, maybe not JSON."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    arguments: str = ""
    id: str | None = None


class ScriptedVariant(BaseModel):
    """A response used instead of its parent when `text` occurs in the prompt (e.g. after a rejection)."""

    model_config = ConfigDict(extra="forbid")
    text: str
    content: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    usage: dict[str, int] | None = None


class ScriptedResponse(BaseModel):
    """One scripted model response."""

    model_config = ConfigDict(extra="forbid")
    content: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    raw_tool_calls: list[ScriptedRawToolCall] = Field(default_factory=list)
    usage: dict[str, int] | None = None
    omit_usage: bool = False
    omit_ids: bool = False
    finish_reason: str | None = None
    expect_in_prompt: str | None = None
    instead_if_prompt_has: list[ScriptedVariant] = Field(default_factory=list)

    def for_prompt(self, messages: Sequence[BaseMessage]) -> ScriptedResponse:
        """This response, or the first variant whose text occurs in the current turn's part of the
        prompt (after the last user message, so an earlier turn's words do not count)."""
        if not self.instead_if_prompt_has:
            return self
        users = [i for i, m in enumerate(messages) if m.type == "human"]
        turn = messages[users[-1] + 1 :] if users else messages
        blob = json.dumps([m.content for m in turn], ensure_ascii=False)
        for v in self.instead_if_prompt_has:
            if v.text in blob:
                return ScriptedResponse(content=v.content, tool_calls=v.tool_calls, usage=v.usage or self.usage)
        return self


class ModelScript(BaseModel):
    """A whole script."""

    model_config = ConfigDict(extra="forbid")
    responses: list[ScriptedResponse]
    on_exhausted: Literal["fail", "restart"] = "fail"
    """`fail`: a call past the end raises (the default: tests notice surprises); `restart`: play again."""


def _expand(value: Any) -> Any:
    """Expand `{"$repeat": [text, n]}` so scripts can carry large payloads compactly."""
    if isinstance(value, dict):
        if set(value) == {"$repeat"}:
            text, n = value["$repeat"]
            return str(text) * int(n)
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value


_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_text(text: str) -> Any:
    # Every command builds the model, and a long script is slow even for libyaml's parser (the
    # constructor stays Python): a JSON script (YAML's subset) is read as JSON.
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError:
            pass  # YAML flow style, not JSON: the YAML loader below reads it
    return yaml.load(text, Loader=_SAFE_LOADER)


def load_script(path: str | Path) -> ModelScript:
    """Read and validate a model script file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise ConfigError(f"model script not found: {shown_path(p)} (set model.script in the config)") from err
    except OSError as err:  # e.g. a name too long, a folder
        raise ConfigError(f"cannot read model script {shown_path(p)}: {err.strerror}; check model.script") from err
    try:
        raw = _load_text(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"model script {shown_path(p)} is not valid YAML: {yaml_problem(err, text)}") from err
    try:
        return ModelScript.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(f"model script {p} is invalid: {err.errors()[0]['loc']}: {err.errors()[0]['msg']}") from None


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model: replays scripted responses; fails on an unexpected call."""

    script: ModelScript
    model_name: str = "scripted"
    cursor: int = 0
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _tools: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "agentrt-scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Every prompt this model received, in order."""
        return self._calls

    def seek(self, index: int) -> ScriptedChatModel:
        """Position the script at response `index` (the session's model-call count)."""
        self.cursor = index
        return self

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """Record the tool schemas; the script decides which tools get called."""
        bound = self.model_copy()
        bound._calls = self._calls
        bound._tools = [t if isinstance(t, dict) else {"name": getattr(t, "name", str(t))} for t in tools]
        return bound

    def remaining(self) -> int:
        """How many scripted responses are left after the cursor."""
        return len(self.script.responses) - self.cursor

    def assert_complete(self) -> None:
        """Fail when scripted responses were left unused."""
        if self.remaining() > 0:
            raise ModelCallFailed(f"scripted model: {self.remaining()} responses were never requested")

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        idx = self.cursor
        n = len(self.script.responses)
        if idx >= n and self.script.on_exhausted == "restart" and n:
            resp_idx = idx % n
        elif idx >= n:
            raise ModelCallFailed(
                f"scripted model got an unexpected call #{idx + 1}; the script has only {n} responses "
                "(add responses, or set `on_exhausted: restart` in the script)"
            )
        else:
            resp_idx = idx
        resp = self.script.responses[resp_idx].for_prompt(messages)
        self.cursor += 1
        self._calls.append(list(messages))
        if resp.expect_in_prompt is not None:
            blob = json.dumps([m.content for m in messages], ensure_ascii=False)
            if resp.expect_in_prompt not in blob:
                raise ModelCallFailed(
                    f"scripted call #{idx + 1} expected the prompt to contain {resp.expect_in_prompt!r}"
                )
        tool_calls = [
            {"id": tc.id or f"call_{idx + 1}_{i + 1}", "name": tc.name, "args": _expand(tc.args), "type": "tool_call"}
            for i, tc in enumerate(resp.tool_calls)
        ]
        invalid: list[dict[str, Any]] = []
        for j, raw in enumerate(resp.raw_tool_calls):
            rid = raw.id or f"call_{idx + 1}_{len(resp.tool_calls) + j + 1}"
            parsed = _parse_raw_call(raw.name, raw.arguments, rid)
            (tool_calls if parsed.get("type") == "tool_call" else invalid).append(parsed)
        if resp.omit_ids:
            for tc in [*tool_calls, *invalid]:
                tc["id"] = None
        finish = resp.finish_reason or ("tool_calls" if tool_calls or invalid else "stop")
        usage: dict[str, int] | None
        if resp.omit_usage:
            usage = None
        elif resp.usage is not None:
            usage = {"input_tokens": 0, "output_tokens": 0, **resp.usage}
        else:
            usage = {
                "input_tokens": count_tokens_approximately(messages),
                "output_tokens": max(1, len(resp.content) // 4 + 8 * len(tool_calls)),
            }
        if usage is not None:
            usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        return AIMessage(
            content=resp.content,
            tool_calls=tool_calls,
            invalid_tool_calls=invalid,
            usage_metadata=usage,
            response_metadata={"finish_reason": finish, "model_name": self.model_name},
            id=f"scripted-{idx + 1}",
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        msg = self._next(messages)
        words = msg.content.split(" ") if isinstance(msg.content, str) and msg.content else []
        for i, word in enumerate(words):
            text = word if i == len(words) - 1 else word + " "
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=text, id=msg.id))
            if run_manager:
                run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                id=msg.id,
                tool_call_chunks=[
                    {
                        "id": tc["id"],
                        "name": tc["name"],
                        "args": tc["args"] if isinstance(tc["args"], str) else json.dumps(tc["args"]),
                        "index": i,
                        "type": "tool_call_chunk",
                    }
                    for i, tc in enumerate([*msg.tool_calls, *msg.invalid_tool_calls])
                ],
                usage_metadata=msg.usage_metadata,
                response_metadata=msg.response_metadata,
                chunk_position="last",
            )
        )


def _parse_raw_call(name: str | None, arguments: str, call_id: str) -> dict[str, Any]:
    """Parse a raw call the way langchain-openai does: a JSON object, else an invalid tool call."""
    raw = {"id": call_id, "function": {"name": name, "arguments": arguments}}
    try:
        parsed = parse_tool_call(raw, return_id=True)
    except OutputParserException as err:
        return dict(make_invalid_tool_call(raw, str(err)))
    if parsed is None or not isinstance(parsed.get("args"), dict):
        return dict(make_invalid_tool_call(raw, f"Received arguments that are not a JSON object: {arguments[:80]!r}"))
    return dict(parsed)


def build_chat_model(settings: ModelSettings) -> BaseChatModel:
    """The chat model the config names."""
    if settings.provider == "scripted":
        if not settings.script:
            raise ConfigError("model.provider is 'scripted' but model.script is not set")
        return ScriptedChatModel(
            script=load_script(settings.script), model_name=settings.name, disable_streaming=not settings.streaming
        )
    from langchain_openai import ChatOpenAI

    api_key = os.environ.get(settings.api_key_env)
    if not api_key and settings.base_url is None:
        raise ConfigError(
            f"model.provider is 'openai' but ${settings.api_key_env} is not set; "
            "export it, or set model.base_url for a local OpenAI-compatible server"
        )
    # langchain-openai sends only `max_completion_tokens`; llama.cpp's and Ollama's servers read only
    # `max_tokens` and would generate until the context is full. Other servers take both alike.
    extra_body = (
        {"max_tokens": settings.max_output_tokens}
        if settings.base_url is not None and settings.max_output_tokens is not None
        else None
    )
    return ChatOpenAI(
        model=settings.name,
        extra_body=extra_body,
        base_url=settings.base_url,
        api_key=api_key or "not-needed",  # type: ignore[arg-type]
        temperature=settings.temperature,
        max_completion_tokens=settings.max_output_tokens,
        timeout=settings.timeout_s,
        max_retries=settings.max_retries,
        stream_usage=True,
        disable_streaming=not settings.streaming,
    )
