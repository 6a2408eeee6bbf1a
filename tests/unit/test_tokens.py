"""Token accounting: offline tiktoken encodings, the estimator fallback, the incremental ledger."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import tiktoken
import tiktoken.registry
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

import agent.loop.token_count as tokens
from agent.loop.token_count import MessageTokenLedger, TokenCounter, cache_key, install_offline_encodings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """No network, no tiktoken cache, a fresh user cache dir; returns the list of attempted downloads."""
    attempts: list[str] = []

    def refuse_connect(self: socket.socket, address: object) -> None:
        attempts.append(f"socket {address}")
        raise OSError("network is unreachable (test)")

    def refuse_get(url: str, *args: object, **kwargs: object) -> None:
        attempts.append(f"requests {url}")
        raise requests.ConnectionError("network is unreachable (test)")

    monkeypatch.setattr(socket.socket, "connect", refuse_connect)
    monkeypatch.setattr(requests, "get", refuse_get)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(tokens, "_installed_dir", None)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    return attempts


def test_both_encodings_load_with_network_unreachable(offline: list[str], tmp_path: Path) -> None:
    """o200k_base and cl100k_base load from verified local files; no download is ever attempted."""
    cache = install_offline_encodings()
    assert cache == tmp_path / "xdg" / "agentrt" / "tiktoken"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(cache)
    for name, sha in tokens.OFFLINE_ENCODINGS.items():
        enc = tiktoken.get_encoding(name)
        assert enc.decode(enc.encode("héllo wörld 🌍")) == "héllo wörld 🌍"
        assert hashlib.sha256((cache / cache_key(name)).read_bytes()).hexdigest() == sha
    assert offline == []


def test_install_is_idempotent(offline: list[str]) -> None:
    """Calling install twice returns the same directory and leaves the files as they were."""
    first = install_offline_encodings()
    assert first is not None
    stamp = (first / cache_key("o200k_base")).stat().st_mtime_ns
    assert install_offline_encodings() == first
    assert (first / cache_key("o200k_base")).stat().st_mtime_ns == stamp


def test_corrupt_cached_file_is_replaced_offline(offline: list[str]) -> None:
    """A damaged rank file in the cache is rewritten from the install instead of re-downloaded."""
    cache = install_offline_encodings()
    assert cache is not None
    (cache / cache_key("cl100k_base")).write_bytes(b"garbage")
    tokens._installed_dir = None
    install_offline_encodings()
    assert tiktoken.get_encoding("cl100k_base").encode("hello") == [15339]
    assert offline == []


def test_user_cache_dir_with_files_is_kept(offline: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TIKTOKEN_CACHE_DIR the user set is honoured: filled if needed, never replaced by ours."""
    user_dir = tmp_path / "mine"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(user_dir))
    assert install_offline_encodings() == user_dir
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(user_dir)
    assert not (tmp_path / "xdg").exists()
    tokens._installed_dir = None
    assert install_offline_encodings() == user_dir
    assert tiktoken.get_encoding("o200k_base").encode("hello") == [24912]


@pytest.mark.integration
def test_fresh_process_counts_offline(tmp_path: Path) -> None:
    """A new Python process with sockets disabled counts gpt-4o tokens with tiktoken, not the estimator."""
    code = (
        "import socket\n"
        "def _no(*a, **k): raise OSError('offline')\n"
        "socket.socket.connect = _no\n"
        "socket.create_connection = _no\n"
        "import agent.loop.token_count as t\n"
        "c = t.TokenCounter('gpt-4o')\n"
        "import tiktoken\n"
        "print(c.method, c.count_text('hello world'), tiktoken.get_encoding('cl100k_base').encode('hello'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["tiktoken:o200k_base", "2", "[15339]"]


def test_known_model_counts_with_its_encoding() -> None:
    """gpt-4o (also with a provider prefix) counts with o200k_base: the text's exact token count."""
    enc = tiktoken.get_encoding("o200k_base")
    for model in ("gpt-4o", "openai/gpt-4o-mini"):
        counter = TokenCounter(model)
        assert counter.method == "tiktoken:o200k_base"
        assert counter.count_text("The quick brown fox") == len(enc.encode("The quick brown fox"))
    assert TokenCounter(None, encoding_name="cl100k_base").method == "tiktoken:cl100k_base"


def test_unknown_model_falls_back_to_estimator() -> None:
    """A model tiktoken does not know is counted with count_tokens_approximately."""
    counter = TokenCounter("my-local-llama")
    msg = HumanMessage("x" * 400)
    assert counter.method == "approximate"
    assert counter.count_message(msg) == count_tokens_approximately([msg])


def test_message_count_includes_tool_calls_and_framing() -> None:
    """An AI message with tool calls costs more than its text alone; every message has framing."""
    counter = TokenCounter("gpt-4o")
    plain = AIMessage("ok")
    calling = AIMessage("ok", tool_calls=[{"id": "c1", "name": "search", "args": {"q": "weather in Paris"}}])
    assert counter.count_message(plain) > counter.count_text("ok")
    assert counter.count_message(calling) > counter.count_message(plain)
    total = counter.count_messages([plain, calling])
    assert total == counter.count_message(plain) + counter.count_message(calling) + tokens.TOKENS_PER_REPLY


class SpyCounter(TokenCounter):
    """Counts how often a message is tokenized."""

    def __init__(self) -> None:
        super().__init__("gpt-4o")
        self.calls = 0

    def count_message(self, msg: BaseMessage) -> int:
        self.calls += 1
        return super().count_message(msg)


def _history(n_steps: int) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [SystemMessage("sys", id="s"), HumanMessage("task", id="h")]
    for i in range(n_steps):
        msgs.append(
            AIMessage(
                "",
                id=f"ai-{i}",
                tool_calls=[{"id": f"c{i}", "name": "t", "args": {"i": i}}],
                usage_metadata={"input_tokens": 100 + i, "output_tokens": 5, "total_tokens": 105 + i},
            )
        )
        msgs.append(ToolMessage(f"result {i} " * 20, tool_call_id=f"c{i}", id=f"tm-{i}"))
    return msgs


@pytest.mark.parametrize("n_steps", [5, 500])
def test_ledger_cost_per_step_is_proportional_to_what_was_added(n_steps: int) -> None:
    """Each new step tokenizes only its own two messages, at 10 or 1,000 messages of history."""
    spy = SpyCounter()
    ledger = MessageTokenLedger(spy)
    msgs = _history(n_steps)
    ledger.prompt_tokens(msgs)
    for step in range(3):
        i = n_steps + step
        msgs.append(
            AIMessage(
                "",
                id=f"ai-{i}",
                tool_calls=[{"id": f"c{i}", "name": "t", "args": {}}],
                usage_metadata={"input_tokens": 5000, "output_tokens": 5, "total_tokens": 5005},
            )
        )
        msgs.append(ToolMessage("new result", tool_call_id=f"c{i}", id=f"tm-{i}"))
        before = spy.calls
        estimate = ledger.prompt_tokens(msgs)
        assert spy.calls - before == 2
        assert estimate == 5000 + spy.count_message(msgs[-2]) + spy.count_message(msgs[-1])


def test_ledger_without_usage_counts_everything_once() -> None:
    """With no model usage yet, the estimate is the full count, and a second look tokenizes nothing."""
    spy = SpyCounter()
    ledger = MessageTokenLedger(spy)
    msgs: list[BaseMessage] = [SystemMessage("sys", id="s"), HumanMessage("hello there", id="h")]
    assert ledger.prompt_tokens(msgs) == TokenCounter("gpt-4o").count_messages(msgs)
    calls = spy.calls
    ledger.prompt_tokens(msgs)
    assert spy.calls == calls


def test_ledger_recounts_a_message_whose_content_changed() -> None:
    """A message rewritten under the same id (an archived tool result) is counted afresh."""
    spy = SpyCounter()
    ledger = MessageTokenLedger(spy)
    big = ToolMessage("x " * 1000, tool_call_id="c1", id="tm-1")
    small = big.model_copy(update={"content": "[archived]"})
    assert ledger.count(big) > ledger.count(small)
    assert spy.calls == 2


def test_ledger_rebase_after_compression_ignores_stale_usage() -> None:
    """After a compression, the estimate starts from the compressed size, not the old input_tokens."""
    ledger = MessageTokenLedger(TokenCounter("gpt-4o"))
    msgs = _history(3)
    compressed = [m if not isinstance(m, ToolMessage) else m.model_copy(update={"content": "[a]"}) for m in msgs]
    ledger.rebase(compressed, 42)
    assert ledger.prompt_tokens(compressed) == 42
    extra = HumanMessage("more", id="h2")
    assert ledger.prompt_tokens([*compressed, extra]) == 42 + ledger.count(extra)
    without_marker = compressed[:-1]
    assert ledger.prompt_tokens(without_marker) == ledger.counter.count_messages(without_marker)
