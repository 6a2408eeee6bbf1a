"""`agentrt serve` in front of a Celery cluster: what the serve-on-workers tests share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.support.celery_drill import Cluster, open_cluster
from tests.support.serve import Server, serving


@contextmanager
def served_cluster(
    tmp_path: Path, script: list[dict[str, Any]], key: str, **cluster: Any
) -> Iterator[tuple[Cluster, Server]]:
    """A cluster (unique queue, Redis prefixes, PG schema; `cluster` passed to `open_cluster`, e.g.
    `store=`) with one worker, and a server on its config whose API key `key` acts as the cluster's
    own tenant. Everything is stopped on the way out."""
    opened = open_cluster(tmp_path, "redis", script, **cluster)
    try:
        data = yaml.safe_load(opened.config.read_text())
        data["serve"] = {"api_keys": [{"key": key, "tenant_id": opened.tenant}]}
        opened.config.write_text(yaml.safe_dump(data, sort_keys=False))
        opened.start_worker("w1", concurrency=1)
        with serving(opened.config, tmp_path) as server:
            yield opened, server
    finally:
        opened.close()
