"""Every config shipped under configs/ runs with the installed `agentrt`, from a fresh directory.

The embedded ones need nothing; production.yaml runs against the real Redis and PostgreSQL, in a
schema and a tenant of its own (dropped / deleted afterwards).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from tests.cli.console import ROOT, agentrt

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
PG = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"


def _real_model(config: Path) -> bool:
    return (yaml.safe_load(config.read_text()).get("model") or {}).get("provider") == "openai"


@pytest.fixture
def model_server() -> Iterator[dict[str, str]]:
    """The bundled model on llama.cpp's server (the local-llm extra), for a config with a real model."""
    from agent.loop.local_llm import LocalLlamaServer, missing_extra

    problem = missing_extra()
    if problem:
        pytest.skip(problem)
    with LocalLlamaServer(n_ctx=2048, threads=1) as srv:
        yield {"AGENTRT_MODEL_BASE_URL": srv.base_url}


def _uses_servers(config: Path) -> bool:
    p = yaml.safe_load(config.read_text()).get("persistence") or {}
    return bool(p.get("redis_url")) or str(p.get("database_url", "")).startswith("postgresql")


def _psql(sql: str) -> None:
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-qc", sql], check=True)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[dict[str, str], str]]:
    """The environment for a server config: a fresh schema, a volume in tmp_path, a fresh tenant."""
    tag = uuid.uuid4().hex[:10]
    schema, tenant = f"cli_cfg_{tag}", f"t-cli-{tag}"
    _psql(f"CREATE SCHEMA {schema}")
    extra = {
        "AGENTRT_DATABASE_URL": f"{PG}?options=-csearch_path%3D{schema}",
        "AGENTRT_REDIS_URL": REDIS,
        "AGENTRT_BASE_DIR": str(tmp_path / "volume"),
    }
    try:
        yield extra, tenant
    finally:
        _psql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        client = redis.Redis.from_url(REDIS)
        keys = list(client.scan_iter(match=f"*{tenant}*", count=500))
        if keys:
            client.delete(*keys)


def test_every_config_is_covered() -> None:
    """The shipped configs the docs name are all here (a new one is picked up by the glob)."""
    assert {c.name for c in CONFIGS} >= {"default.yaml", "long-task.yaml", "read-back.yaml", "production.yaml"}


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_config_runs_to_a_result(config: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """`agentrt run --config F` ends COMPLETED or PAUSED; a pause is approved to COMPLETED; doctor is clean."""
    work = tmp_path / "work"
    work.mkdir()
    extra: dict[str, str] = {}
    tenant_args: list[str] = []
    text = "Summarise the sales"
    if _real_model(config):  # its own example task, on the bundled model
        extra = request.getfixturevalue("model_server")
        text = "What is 6 times 7? Use the calculator."
    if _uses_servers(config):
        more, tenant = request.getfixturevalue("servers")
        extra = {**extra, **more}
        init = agentrt("db", "init", "--config", str(config), cwd=work, extra_env=extra)
        assert init.code == 0 and "schema revision" in init.out, init.both
        tenant_args = ["--tenant", tenant]
    ran = agentrt("run", "--config", str(config), *tenant_args, "--json", text, cwd=work, extra_env=extra)
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] in ("COMPLETED", "PAUSED"), result
    # A turn started by `agentrt run` is resumed in place even when workers are configured (only a
    # submitted turn is continued by the workers).
    if result["status"] == "PAUSED":
        assert result["pending_approval"], result
        done = agentrt(
            "resume",
            result["session_id"],
            "--config",
            str(config),
            *tenant_args,
            "--approve",
            "--json",
            cwd=work,
            extra_env=extra,
        )
        assert done.code == 0, done.both
        result = json.loads(done.out)
    assert result["status"] == "COMPLETED", result
    listed = agentrt("sessions", "--config", str(config), *tenant_args, cwd=work, extra_env=extra)
    assert listed.code == 0 and result["session_id"] in listed.out, listed.both
    doctor = agentrt("doctor", result["session_id"], "--config", str(config), *tenant_args, cwd=work, extra_env=extra)
    assert doctor.code == 0 and "[FAIL]" not in doctor.out, doctor.both
    if not _uses_servers(config):
        assert (work / ".agentrt").is_dir()  # base_dir ./.agentrt is relative to where you run it
