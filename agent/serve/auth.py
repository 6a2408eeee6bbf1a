"""Who is calling: API keys (header `x-api-key`) or a pluggable function map a request to a tenant and user.

Without configured keys or function the server is for this machine only: it binds to loopback
(`check_bind` refuses anything else) and every caller is the default tenant. The page at `/` also
accepts the key from the `agentrt_key` cookie its login form sets (browsers cannot send headers
on navigation).
"""

from __future__ import annotations

import hmac
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.core.config import AgentSettings
from agent.core.errors import ConfigError
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id

KEY_HEADER = "x-api-key"
KEY_COOKIE = "agentrt_key"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})

AuthFunction = Callable[[Mapping[str, str]], Any]


@dataclass(frozen=True)
class Principal:
    """The tenant (and optionally the one user) a request acts as; every read and write is scoped to it."""

    tenant_id: str
    user_id: str | None = None


class Unauthorized(Exception):
    """The request carries no valid credentials (HTTP 401)."""


class Authenticator:
    """Maps request headers (and the page's cookie) to a `Principal`."""

    def __init__(self, settings: AgentSettings) -> None:
        self.default = Principal(settings.session.tenant_id)
        self._keys = [(e.key.encode(), _principal(e.tenant_id, e.user_id)) for e in settings.serve.api_keys]
        self._func = load_auth_function(settings.serve.auth) if settings.serve.auth else None

    @property
    def open(self) -> bool:
        """No keys and no function: loopback only, everyone is the default tenant."""
        return not self._keys and self._func is None

    def authenticate(self, headers: Mapping[str, str], cookies: Mapping[str, str] | None = None) -> Principal:
        """The caller's principal; raises `Unauthorized`."""
        if self.open:
            return self.default
        key = headers.get(KEY_HEADER) or (cookies or {}).get(KEY_COOKIE)
        if key and self._keys:
            given = key.encode()
            for stored, principal in self._keys:
                if hmac.compare_digest(stored, given):
                    return principal
        if self._func is not None:
            merged = dict(headers)
            if key and KEY_HEADER not in merged:
                merged[KEY_HEADER] = key
            out = self._func(merged)
            if out is not None:
                return _coerce(out)
        raise Unauthorized("missing or unknown API key: send header x-api-key")


def load_auth_function(path: str) -> AuthFunction:
    """Import `module:callable` named in the config (the user's own code, as for tools)."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"serve.auth must be 'module:callable', got {path!r}")
    try:
        func = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"serve.auth {path!r} cannot be loaded ({err}); check the module path") from err
    if not callable(func):
        raise ConfigError(f"serve.auth {path!r} is not callable")
    return func


def check_bind(host: str, auth: Authenticator) -> None:
    """Refuse to listen beyond loopback when nobody has to authenticate."""
    if auth.open and host not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"refusing to serve on {host} without authentication: add serve.api_keys (or serve.auth) "
            "to the config, or bind to 127.0.0.1"
        )


def _principal(tenant_id: str, user_id: str | None) -> Principal:
    try:
        return Principal(validate_id(tenant_id, "tenant id"), validate_id(user_id, "user id") if user_id else None)
    except InvalidIdError as err:
        raise ConfigError(f"serve: {err}") from None


def _coerce(out: Any) -> Principal:
    if isinstance(out, Principal):
        return out
    if isinstance(out, Mapping) and out.get("tenant_id"):
        return _principal(str(out["tenant_id"]), str(out["user_id"]) if out.get("user_id") else None)
    raise ConfigError("serve.auth must return {'tenant_id': ..., 'user_id': ...} or None")
