"""Stable digests over plain data, and keeping secrets out of what is stored.

`digest_of(value)` is `sha256:<hex>` of the canonical JSON (sorted keys, compact, UTF-8) of
`value`, so it is the same in every process whatever the hash seed. Values under keys that look
secret (named like api_key, token, password, secret, credential, authorization...) are never part
of a digest: a digest may end up in logs and documents. `scrub_secrets` is what the saver applies
to checkpoint metadata; `redact` masks instead of dropping, for text shown to people. What a
caller digests (its tools, its settings) is the caller's business: this module names none of it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
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


def digest_form(value: Any) -> Any:
    """The plain data `digest_of` hashes: secret-looking keys dropped at any depth, tuples as lists,
    sets as sorted lists, pydantic models as their JSON dump, anything else as its repr."""
    if isinstance(value, Mapping):
        return {str(k): digest_form(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, (list, tuple)):
        return [digest_form(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((digest_form(v) for v in value), key=lambda x: canonical_json(x))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value) if not hasattr(value, "model_dump") else digest_form(value.model_dump(mode="json"))


def digest_of(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `value` (secret-looking keys removed)."""
    return "sha256:" + hashlib.sha256(canonical_json(digest_form(value))).hexdigest()


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
