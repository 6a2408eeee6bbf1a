"""Digests (agentrt's pins, the generic secret filter): stable across processes and hash seeds,
order-independent where it should be, never over secrets."""

from __future__ import annotations

import os
import subprocess
import sys

from agent.loop.surface import config_digest, surface_digest, toolset_hash
from checkpointing.digest import is_secret_key

TOOLS = [
    {"name": "search", "args_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
     "effect": "read_only", "permissions": ["net", "fs:read"]},
    {"name": "write_file", "args_schema": {"type": "object"}, "effect": "unsafe", "permissions": ["fs:write"]},
]  # fmt: skip


def test_digests_are_the_same_in_processes_with_other_hash_seeds() -> None:
    """toolset_hash and config_digest do not depend on PYTHONHASHSEED or dict order."""
    code = (
        "from agent.loop.surface import toolset_hash, config_digest;"
        f"print(toolset_hash({TOOLS!r}), config_digest({{'b': {{1, 2, 3}}, 'a': 1}}, ['a', 'b']))"
    )
    outs = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        outs.add(run.stdout)
    assert len(outs) == 1
    assert outs.pop().split()[0] == toolset_hash(TOOLS)


def test_toolset_hash_ignores_order_and_descriptions_but_not_effects() -> None:
    """Reordering tools or rewording descriptions keeps the hash; a changed effect class changes it."""
    base = toolset_hash(TOOLS)
    assert toolset_hash(list(reversed(TOOLS))) == base
    assert toolset_hash([{**TOOLS[0], "description": "new words"}, TOOLS[1]]) == base
    assert toolset_hash([{**TOOLS[0], "effect": "unsafe"}, TOOLS[1]]) != base
    assert toolset_hash([{**TOOLS[0], "permissions": ["net"]}, TOOLS[1]]) != base


def test_config_digest_never_includes_secrets_even_if_allowlisted() -> None:
    """A changed api key or password does not change the digest; a changed model does."""
    allow = ["model.name", "model.api_key", "db.password", "temperature"]
    a = {"model": {"name": "m1", "api_key": "sk-1"}, "db": {"password": "p1"}, "temperature": 0.1}
    b = {"model": {"name": "m1", "api_key": "sk-2"}, "db": {"password": "p2"}, "temperature": 0.1, "x": 1}
    assert config_digest(a, allow) == config_digest(b, allow)
    assert config_digest({**a, "model": {"name": "m2"}}, allow) != config_digest(a, allow)


def test_surface_digest_changes_with_toolset_or_projection() -> None:
    """The surface digest moves when the toolset, graph version or message projection moves."""
    base = surface_digest(toolset=toolset_hash(TOOLS), graph_version="g1", message_projection="v1")
    assert base == surface_digest(toolset=toolset_hash(TOOLS), graph_version="g1", message_projection="v1")
    assert base != surface_digest(toolset=toolset_hash(TOOLS[:1]), graph_version="g1", message_projection="v1")
    assert base != surface_digest(toolset=toolset_hash(TOOLS), graph_version="g1", message_projection="v2")
    assert base != surface_digest(
        toolset=toolset_hash(TOOLS), graph_version="g1", message_projection="v1", model={"api_key": "x", "name": "n"}
    )
    assert surface_digest(model={"api_key": "a"}) == surface_digest(model={"api_key": "b"})


def test_secret_key_detection_spares_token_counters() -> None:
    """api_key/apiKey/access_token/password are secrets; max_tokens and input_tokens are not."""
    assert all(is_secret_key(k) for k in ("api_key", "apiKey", "OPENAI_API_KEY", "access_token", "password"))
    assert not any(
        is_secret_key(k)
        for k in ("max_tokens", "input_tokens", "model", "thread_id", "keyframe", "custom_key", "cache_key")
    )
