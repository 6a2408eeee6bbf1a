"""Token accounting that works offline: tiktoken encodings from the install, plus a fallback estimator.

tiktoken loads an encoding's rank file from `$TIKTOKEN_CACHE_DIR/<sha1 of the file's URL>` and checks
its sha256 before use; only when that file is missing does it download. `install_offline_encodings()`
fills such a cache directory from the gzipped rank files that the `bpe-openai` dependency ships
(`cl100k_base`, `o200k_base`; their contents have exactly the hashes tiktoken expects). It decompresses
them, checks their sha256 and writes them atomically, so nothing is ever downloaded.

The cache directory is, in this order: a `TIKTOKEN_CACHE_DIR` (or `DATA_GYM_CACHE_DIR`) the user set,
which is never overridden (it gets the files written into it if they are missing); else
`$XDG_CACHE_HOME/agentrt/tiktoken` (default `~/.cache/agentrt/tiktoken`); else, if that is not
writable, `<tmp>/agentrt-tiktoken-<uid>`. It is exported as `TIKTOKEN_CACHE_DIR` for this process.

Models tiktoken does not know (the scripted model, local models) are counted with the estimator
`langchain_core.messages.utils.count_tokens_approximately`: 4 characters a token plus 3 tokens a
message, tool calls included.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import logging
import math
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent.core.errors import BackendUnavailable
from checkpointing.fsyncs import atomic_write

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

log = logging.getLogger(__name__)

_URL_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
OFFLINE_ENCODINGS: dict[str, str] = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
"""Encodings installed for offline use: name -> sha256 that tiktoken expects of the rank file."""

ESTIMATOR = "approximate"
CHARS_PER_TOKEN = 4.0  # the estimator's ratio (count_tokens_approximately's default)
TOKENS_PER_MESSAGE = 3  # OpenAI's chat framing: <|start|>role ... <|end|>
TOKENS_PER_REPLY = 3  # every reply is primed with <|start|>assistant<|message|>

_lock = threading.Lock()
_installed_dir: Path | None = None


def cache_key(encoding_name: str) -> str:
    """The file name tiktoken looks for in its cache dir: sha1 hex of the encoding file's URL."""
    return hashlib.sha1(f"{_URL_BASE}{encoding_name}.tiktoken".encode()).hexdigest()


def _verified(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _has_all(cache_dir: Path) -> bool:
    return all(_verified(cache_dir / cache_key(n), h) for n, h in OFFLINE_ENCODINGS.items())


def _bundled_rank_file(encoding_name: str) -> bytes:
    # find_spec locates the package without importing it (its __init__ loads every rank file, ~1 s)
    spec = importlib.util.find_spec("bpe_openai")
    try:
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError("the bpe_openai package is not installed")
        gz = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{encoding_name}.tiktoken.gz"
        data = gzip.decompress(gz.read_bytes())
    except OSError as err:
        raise BackendUnavailable(
            f"cannot read {encoding_name} from the bpe-openai package ({err}); "
            "reinstall agentrt's dependencies (pip install -e .) so the encodings come with the install"
        ) from err
    expected = OFFLINE_ENCODINGS[encoding_name]
    if hashlib.sha256(data).hexdigest() != expected:
        raise BackendUnavailable(
            f"bpe-openai's {encoding_name} does not have the sha256 tiktoken expects ({expected}); reinstall bpe-openai"
        )
    return data


def _populate(cache_dir: Path) -> None:
    """Write every missing or corrupt rank file into `cache_dir` (atomic, verified; no network)."""
    for name, sha in OFFLINE_ENCODINGS.items():
        path = cache_dir / cache_key(name)
        if not _verified(path, sha):
            cache_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(path, _bundled_rank_file(name))


def _default_dirs() -> list[Path]:
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return [Path(xdg) / "agentrt" / "tiktoken", Path(tempfile.gettempdir()) / f"agentrt-tiktoken-{uid}"]


def install_offline_encodings() -> Path | None:
    """Make `tiktoken.get_encoding("o200k_base" | "cl100k_base")` work offline; returns the cache dir.

    Idempotent and cheap after the first call in a process (it only checks that the directory it
    chose is still the one exported). Returns None (with a warning) if no directory could be
    prepared; token counting then falls back to the estimator instead of downloading.
    """
    global _installed_dir
    current = os.environ.get("TIKTOKEN_CACHE_DIR")
    if _installed_dir is not None and current == str(_installed_dir):
        return _installed_dir
    with _lock:
        user_dir = current or (os.environ.get("DATA_GYM_CACHE_DIR") if current is None else None)
        candidates = ([Path(user_dir)] if user_dir else []) + _default_dirs()
        for cache_dir in candidates:
            try:
                if not _has_all(cache_dir):
                    _populate(cache_dir)
            except (OSError, BackendUnavailable) as err:
                log.warning("cannot prepare tiktoken encodings in %s: %s", cache_dir, err)
                continue
            os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
            _installed_dir = cache_dir
            return cache_dir
    log.warning("no writable directory for tiktoken encodings; token counts use the estimator")
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(json.dumps(block, sort_keys=True, default=str))
    return "".join(parts)


class MessageCounter(Protocol):
    """Anything that sizes a prompt: a TokenCounter, or a MessageTokenLedger (cached)."""

    def count_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a prompt made of `messages`."""
        ...


class TokenCounter:
    """Counts tokens the way the model `model_name` would, or estimates them if tiktoken can't.

    `method` says which: `tiktoken:<encoding>` or `approximate`. Counts are estimates of the
    chat framing (OpenAI's 3 tokens a message), exact for the text itself.
    """

    def __init__(self, model_name: str | None = None, encoding_name: str | None = None) -> None:
        self.model_name = model_name
        self._encoding: Any = None
        self.method = ESTIMATOR
        try:
            self._encoding = self._resolve(model_name, encoding_name)
        except Exception as err:  # tiktoken raises plain exceptions (ValueError, requests errors)
            log.warning("tiktoken unavailable for %r (%s); using the approximate counter", model_name, err)
        if self._encoding is not None:
            self.method = f"tiktoken:{self._encoding.name}"

    @staticmethod
    def _resolve(model_name: str | None, encoding_name: str | None) -> Any:
        if not model_name and not encoding_name:
            return None
        import tiktoken

        install_offline_encodings()
        if encoding_name:
            return tiktoken.get_encoding(encoding_name)
        names = [model_name, (model_name or "").rsplit("/", 1)[-1]] if model_name else []
        for name in dict.fromkeys(names):
            try:
                enc_name = tiktoken.encoding_name_for_model(name)
            except KeyError:
                continue
            return tiktoken.get_encoding(enc_name)
        return None

    def count_text(self, text: str) -> int:
        """Tokens in `text` (special-token markers in it count as ordinary text)."""
        if self._encoding is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(self._encoding.encode_ordinary(text))

    def count_message(self, msg: BaseMessage) -> int:
        """Tokens `msg` takes in a prompt: framing, role, name, content, tool calls / call id."""
        if self._encoding is None:
            from langchain_core.messages.utils import count_tokens_approximately

            return count_tokens_approximately([msg])
        n = TOKENS_PER_MESSAGE + self.count_text(msg.type) + self.count_text(_text_of(msg.content))
        if msg.name:
            n += 1 + self.count_text(msg.name)
        for tc in getattr(msg, "tool_calls", None) or ():
            args = json.dumps(tc.get("args", {}), ensure_ascii=False, sort_keys=True)
            n += TOKENS_PER_MESSAGE + self.count_text(tc.get("name", "")) + self.count_text(args)
        tool_call_id = getattr(msg, "tool_call_id", None)
        if isinstance(tool_call_id, str):
            n += self.count_text(tool_call_id)
        return n

    def count_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a whole prompt made of `messages` (plus the reply priming)."""
        return sum(self.count_message(m) for m in messages) + TOKENS_PER_REPLY


def _fingerprint(msg: BaseMessage) -> tuple[Any, ...]:
    # str hashes are cached on the object, so repeated lookups of the same message are O(1).
    content = msg.content if isinstance(msg.content, str) else _text_of(msg.content)
    tool_calls = getattr(msg, "tool_calls", None) or ()
    calls = tuple(json.dumps(tc, sort_keys=True, default=str) for tc in tool_calls)
    return (
        msg.type,
        msg.id,
        msg.name,
        getattr(msg, "tool_call_id", None),
        hash(content),
        len(content),
        calls,
    )


def _input_tokens(msg: BaseMessage) -> int | None:
    usage = getattr(msg, "usage_metadata", None)  # only AI messages carry usage
    if usage:
        value = usage.get("input_tokens")
        if isinstance(value, int) and value > 0:
            return value
    return None


class MessageTokenLedger:
    """Incremental prompt-size estimate: the cost of a step is proportional to what was added.

    `prompt_tokens(messages)` = the real `input_tokens` of the last AI response (its usage
    metadata counts the prompt that produced it) + estimates of that response and every message
    after it. Estimates are cached per message (keyed by id, type and content), so a message is
    counted once however often it is looked at. Without any usage (first step, or after a
    resume) every message is counted once. After a compression rewrote messages before the last
    AI response its usage is stale: call `rebase(messages, tokens)` with the new list and its
    estimated size (CompressionResult.tokens_after) and the ledger counts from there instead.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._cache: dict[tuple[Any, ...], int] = {}
        self._rebase_id: str | None = None
        self._rebase_tokens = 0
        self._stale_anchor: str | None = None

    def count(self, msg: BaseMessage) -> int:
        """The cached estimate of one message."""
        key = _fingerprint(msg)
        n = self._cache.get(key)
        if n is None:
            n = self._cache[key] = self.counter.count_message(msg)
        return n

    def prompt_tokens(self, messages: Sequence[BaseMessage]) -> int:
        """Estimated prompt tokens of `messages` (see the class docstring)."""
        added = 0
        for i in range(len(messages) - 1, -1, -1):
            msg = messages[i]
            if self._rebase_id is not None and msg.id == self._rebase_id:
                return self._rebase_tokens + added
            used = _input_tokens(msg)
            if used is not None and msg.id != self._stale_anchor:
                # `used` already holds the reply priming of the prompt that produced `msg`
                return used + self.count(msg) + added
            if used is not None:
                break  # the newest usage predates a compression: count everything
            added += self.count(msg)
        return self.count_messages(messages)

    def count_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Full estimate of a prompt of `messages`, from cached per-message counts."""
        return sum(self.count(m) for m in messages) + TOKENS_PER_REPLY

    def rebase(self, messages: Sequence[BaseMessage], tokens: int | None = None) -> int:
        """Start counting from `messages` (just rewritten by compression); returns their size."""
        if tokens is None:
            tokens = self.count_messages(messages)
        last = messages[-1] if messages else None
        self._rebase_id = last.id if last is not None else None
        self._rebase_tokens = tokens
        self._stale_anchor = next((m.id for m in reversed(messages) if _input_tokens(m) is not None), None)
        return tokens

    def anchor(self) -> dict[str, Any] | None:
        """The rebase point as plain data (kept in graph state so a resumed process counts alike)."""
        if self._rebase_id is None:
            return None
        return {"id": self._rebase_id, "tokens": self._rebase_tokens, "stale": self._stale_anchor}

    def restore_anchor(self, anchor: dict[str, Any] | None) -> None:
        """Adopt a rebase point saved by `anchor()` (None: clear it)."""
        if not anchor:
            self._rebase_id = None
            self._stale_anchor = None
            self._rebase_tokens = 0
            return
        self._rebase_id = anchor.get("id")
        self._rebase_tokens = int(anchor.get("tokens") or 0)
        self._stale_anchor = anchor.get("stale")

    def forget(self) -> None:
        """Drop every cached count (e.g. after the model changed)."""
        self._cache.clear()
        self._rebase_id = None
        self._stale_anchor = None
