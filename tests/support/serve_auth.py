"""A pluggable auth function for the `agentrt serve` tests (config `serve.auth`)."""

from __future__ import annotations

from collections.abc import Mapping


def by_bearer(headers: Mapping[str, str]) -> dict[str, str] | None:
    """`Authorization: Bearer <tenant>.<user>` (a stand-in for a real token check)."""
    auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
    if not auth.startswith("Bearer ") or "." not in auth:
        return None
    tenant, user = auth.removeprefix("Bearer ").split(".", 1)
    return {"tenant_id": tenant, "user_id": user}
