"""Shared fixtures. No test may reach a network address outside loopback (the LLM is always fake)."""

from __future__ import annotations

import ipaddress
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"

_real_connect = socket.socket.connect

TOP_FOLDERS = ("unit", "cli", "integration", "e2e", "docs")
"""The folders under tests/ whose name is also the marker of every test in them (pyproject.toml)."""


def pytest_configure(config: pytest.Config) -> None:
    """Let the Ctrl-C tests' processes be interrupted however the suite was started.

    A non-interactive shell starts a background job (`scripts/test > log &`) with SIGINT ignored and
    every child inherits that, so a SIGINT sent to `agentrt` did nothing and the Ctrl-C tests saw a
    finished run. A Python handler here is reset to the default at exec: children start as under a
    terminal.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its top folder: `-m unit` runs tests/unit, `-m "not integration"` leaves
    out tests/integration (before `-m` deselects: tryfirst)."""
    tests = Path(__file__).resolve().parent
    for item in items:
        try:
            folder = item.path.resolve().relative_to(tests).parts[0]
        except ValueError:
            continue
        if folder in TOP_FOLDERS:
            item.add_marker(folder)


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            ip = None
        if ip is not None and not ip.is_loopback:
            raise OSError(f"tests may not reach {host}: only loopback is allowed")
        if ip is None and host not in ("localhost",):
            raise OSError(f"tests may not resolve {host}: only loopback is allowed")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AGENTRT_CRASH_AT", raising=False)
    yield


@pytest.fixture
def base_dir(tmp_path: Path) -> Path:
    """A fresh persistence root."""
    d = tmp_path / "agentrt"
    d.mkdir()
    return d


def write_script(path: Path, responses: list[dict[str, Any]]) -> Path:
    """Write a scripted-model YAML file."""
    import yaml

    path.write_text(yaml.safe_dump({"responses": responses}, sort_keys=False), encoding="utf-8")
    return path


def write_config(path: Path, data: dict[str, Any]) -> Path:
    """Write a config YAML file."""
    import yaml

    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(params=["files", "postgres"])
def saver_kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Savers over a fresh store of each backend (`tests.support.savers.SaverKit`): a folder in
    tmp_path, or a schema of its own in the test PostgreSQL database, dropped after the test."""
    from tests.support.savers import SaverKit

    kit = SaverKit.open(request.param, tmp_path)
    yield kit
    kit.close()
