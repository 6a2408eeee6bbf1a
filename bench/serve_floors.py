"""The floors of `bench/serve.py`: what `agentrt serve` pays that an in-memory server does not.

`langgraph dev` keeps threads, checkpoints and runs in dicts and writes nothing to disk; agentrt
keeps them durable. Two floors, printed under the table:
  - search reads: what one `POST /threads/search` (`{"limit": 10}`) must read from the durable
    store, taken alone, in this process over the server's own `base_dir` (the index page of the
    newest 10 sessions and, per thread, its head mark: the checkpoint files' ends, so the values
    it keeps are known to be current): CPU ms per request;
  - durable writes: the first-event figures of `agentrt serve` with `persistence.fsync: batch`
    (its writes left to the OS, as an in-memory server never waits for a disk); what agentrt's
    figures exceed these by is the price of `fsync: always`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import yaml

SEARCH_FLOOR = "floor: search's durable reads alone, CPU ms/req"


def search_floor_ms(config: Path, requests: int = 300) -> float:
    """CPU ms per request of a search's durable reads (see the module docstring), run here."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from agent.core.config import load_settings
    from agent.runner.services import build_manager, jsonl_saver
    from checkpointing.saver_marks import head_mark
    from checkpointing.session_index import RowFilter

    settings = load_settings(config)
    manager = build_manager(settings)
    saver = jsonl_saver(settings)
    tenant = settings.session.tenant_id

    def one() -> None:
        rows: Any = manager.search(tenant, RowFilter(), order="activity", descending=True, limit=10, offset=0)
        for row in rows:
            head_mark(saver, {"configurable": {"thread_id": row.session_id, "tenant_id": row.tenant_id}})

    for _ in range(20):
        one()
    t0 = time.process_time()
    for _ in range(requests):
        one()
    return (time.process_time() - t0) * 1000 / requests


def floors(
    tmp: Path,
    config: Path,
    serving: Callable[[Path], AbstractContextManager[tuple[str, int]]],
    first_events: Callable[[httpx.AsyncClient, Any], Awaitable[dict[str, float]]],
    args: Any,
) -> list[tuple[str, float]]:
    """Both floors: the search reads over the `base_dir` of `config` (its threads already made), and
    the first-event figures (`first_events`) of a server (`serving(config)`) on `fsync: batch`."""
    out = [(SEARCH_FLOOR, search_floor_ms(config))]
    folder = tmp / "batch"
    folder.mkdir()
    data = yaml.safe_load(config.read_text())
    data["persistence"]["base_dir"] = str(folder / "agentrt")
    data["persistence"]["fsync"] = "batch"
    batch = folder / "config.yaml"
    batch.write_text(yaml.safe_dump(data, sort_keys=False))

    async def measure(url: str) -> dict[str, float]:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100, keepalive_expiry=3.0)
        async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as http:
            return await first_events(http, args)

    with serving(batch) as (url, _):
        out += [(f"floor: {k}, fsync: batch", v) for k, v in asyncio.run(measure(url)).items()]
    return out
