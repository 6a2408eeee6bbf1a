"""A one-shot read command loads redis-py without the OpenTelemetry SDK's metrics, and the SDK
still imports afterwards for any code that wants it. Each case runs in a fresh interpreter, as a
command does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.runners import ROOT

_PROBE = """
import sys
from agent.session.stores.redis import METRICS_SDK, RedisSessionStore, load_redis_without_metrics
store = RedisSessionStore(url="redis://127.0.0.1:6379/0")
print("after store:", "redis" in sys.modules)
load_redis_without_metrics()
print("after load:", "redis" in sys.modules, METRICS_SDK in sys.modules)
import importlib
importlib.import_module(METRICS_SDK)
print("sdk imports:", METRICS_SDK in sys.modules)
"""


def test_redis_is_loaded_on_first_use_and_without_the_metrics_sdk() -> None:
    pytest.importorskip("opentelemetry.sdk.metrics")  # without the SDK there is nothing to keep out
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()
    assert out == ["after store: False", "after load: True False", "sdk imports: True"], out
