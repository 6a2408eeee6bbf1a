"""Stable digests over plain data: toolset hash, runtime surface digest, config digest.

Each digest is `sha256:<hex>` of the canonical JSON (sorted keys, compact, UTF-8) of its input,
so it is the same in every process whatever the hash seed. Values that look secret (keys named
like api_key, token, password, secret, credential, authorization...) are never part of a digest,
even when an allowlist names them: a digest may end up in logs, events and documents.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from checkpointing.records import canonical_json

_SECRET_PARTS = frozenset(
    {"apikey", "token", "password", "passwd", "pwd", "secret", "credential", "credentials",
     "authorization", "auth", "cookie", "bearer", "dsn", "passphrase"}
)  # fmt: skip
_SECRET_SUFFIXES = (
    "apikey", "apikeys", "token", "password", "passwd", "passphrase", "secret", "credentials",
    "privatekey", "accesskey", "secretkey", "signingkey", "encryptionkey",
)  # fmt: skip
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """Whether a mapping key names something that must never be digested, logged or stored.

    Matches words like api_key, apiKey, access_token, password, client_secret, authorization;
    not counters such as max_tokens or input_tokens.
    """
    words = _CAMEL.sub("_", key).lower().replace("-", "_")
    if any(part in _SECRET_PARTS for part in words.split("_")):
        return True
    return words.replace("_", "").endswith(_SECRET_SUFFIXES)


def _scrub(value: Any) -> Any:
    """Drop secret-looking keys at any depth; turn sets and tuples into sorted/plain lists."""
    if isinstance(value, Mapping):
        return {str(k): _scrub(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_scrub(v) for v in value), key=lambda x: canonical_json(x))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value) if not hasattr(value, "model_dump") else _scrub(value.model_dump(mode="json"))


def digest_of(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `value` (secret-looking keys removed)."""
    return "sha256:" + hashlib.sha256(canonical_json(_scrub(value))).hexdigest()


def toolset_hash(tools: Iterable[Mapping[str, Any]]) -> str:
    """Hash of a toolset: each tool as {name, args_schema, effect, permissions}, order-independent.

    Any other key of a tool dict is ignored, so descriptions can be reworded without blocking
    recovery; a renamed tool, a changed argument schema, effect class or permission changes it.
    """
    rows = []
    for t in tools:
        perms = t.get("permissions") or []
        rows.append(
            {
                "name": t.get("name"),
                "args_schema": t.get("args_schema"),
                "effect": t.get("effect"),
                "permissions": sorted(str(p) for p in perms),
            }
        )
    rows.sort(key=lambda r: canonical_json(_scrub(r)))
    return digest_of(rows)


def surface_digest(
    *,
    toolset: str | None = None,
    graph_version: str | None = None,
    message_projection: str | None = None,
    model: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Digest of the runtime surface a checkpoint was taken under.

    `toolset` is a `toolset_hash`, `message_projection` names how canonical messages are
    projected for the model, `model` the model settings that shape behaviour (provider, name...);
    a change in any of them is what recovery must notice (seed §5).
    """
    return digest_of(
        {
            "toolset": toolset,
            "graph_version": graph_version,
            "message_projection": message_projection,
            "model": dict(model or {}),
            "extra": dict(extra or {}),
        }
    )


def config_digest(config: Mapping[str, Any], allowlist: Iterable[str]) -> str:
    """Digest of `config` restricted to the allowlisted keys (dotted paths allowed: `a.b`).

    Missing keys are recorded as absent; secret-looking keys are dropped even if allowlisted.
    """
    picked: dict[str, Any] = {}
    for path in sorted(set(allowlist)):
        if any(is_secret_key(part) for part in path.split(".")):
            continue
        cur: Any = config
        found = True
        for part in path.split("."):
            if isinstance(cur, Mapping) and part in cur:
                cur = cur[part]
            else:
                found = False
                break
        if found:
            picked[path] = cur
    return digest_of(picked)


_URL_CRED = re.compile(r"(?P<s>[A-Za-z][A-Za-z0-9+.-]*://)(?P<u>[^:/@\s]*):[^@/\s]+@")
_QUERY_SECRET = re.compile(r"(?i)([?&](?:password|passwd|pwd|sslpassword|token|api[_-]?key|secret)=)[^&#\s]*")
REDACTED_VALUE = "***"


def redact_text(text: str) -> str:
    """Mask credentials inside a string: `scheme://user:***@host`, `?password=***`."""
    return _QUERY_SECRET.sub(r"\1***", _URL_CRED.sub(r"\g<s>\g<u>:***@", text))


def redact(value: Any) -> Any:
    """A copy of `value` with secret-looking keys' values and URL credentials masked, at any depth."""
    if isinstance(value, Mapping):
        return {str(k): REDACTED_VALUE if is_secret_key(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value) if ("://" in value or "=" in value) else value
    return value


def scrub_secrets(value: Any) -> Any:
    """Like `redact`, but secret-looking keys are dropped instead of masked (checkpoint metadata)."""
    if isinstance(value, Mapping):
        return {str(k): scrub_secrets(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, (list, tuple)):
        return [scrub_secrets(v) for v in value]
    if isinstance(value, str):
        return redact_text(value) if ("://" in value or "=" in value) else value
    return value
