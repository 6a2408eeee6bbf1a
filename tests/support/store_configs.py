"""Config files over each record store, for CLI and `agentrt serve` tests parametrized over
`files` and `postgres`.

- `files`: configs/default.yaml, the embedded set-up (JSONL files under base_dir, the SQLite
  index, the file lease);
- `postgres`: configs/production.yaml as deployed (`persistence.store: postgres`): the records, the
  session table and the lease in a PostgreSQL database of this setup's own (made as
  `agentrt db init` makes it, on the first config written; dropped by `close`), Redis as L2, and
  `agentrt serve` running its API runs itself (no Celery workers in these tests).

`config(where, responses, **sections)` writes `where/config.yaml` as `make_config` does; several
configs of one setup share its database (each its own base_dir unless `persistence.base_dir` says).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.runners import make_config

KINDS = ("files", "postgres")
REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379") + "/0"
L2_PREFIX = "agentrt"


@dataclass
class StoreSetup:
    """Configs over one store of kind `kind` (see the module doc)."""

    kind: str
    database: str | None = None
    configs: list[Path] = field(default_factory=list)

    def config(self, where: Path, responses: list[dict[str, Any]] | None = None, **sections: Any) -> Path:
        """A config file in `where` over this setup's store, with `sections` merged in."""
        where.mkdir(parents=True, exist_ok=True)
        if self.kind == "files":
            path = make_config(where, responses, **sections)
        else:
            from tests.support.celery_drill import database_url

            first = self.database is None
            if first:
                self.database = f"agentrt_iso_{uuid.uuid4().hex[:10]}"
            persistence = {"database_url": database_url(self.database), "redis_url": REDIS_URL}
            sections["persistence"] = {**persistence, **sections.get("persistence", {})}
            sections["serve"] = {"runs_on": "server", **sections.get("serve", {})}
            path = make_config(where, responses, base="production.yaml", **sections)
            if first:
                from agent.core.config import load_settings
                from agent.session.db_cli import db_init

                db_init(load_settings(path))
        self.configs.append(path)
        return path

    def close(self) -> None:
        """Drop the database and the Redis copies of its sessions (postgres)."""
        if self.database is None:
            return
        import psycopg
        import redis

        from tests.support.celery_drill import database_url, drop_database

        with psycopg.connect(database_url(self.database), autocommit=True) as conn:
            rows = conn.execute("SELECT tenant_id, session_id FROM sessions").fetchall()
        client = redis.Redis.from_url(REDIS_URL)
        keys = [f"{L2_PREFIX}:{tenant}:session:{sid}" for tenant, sid in rows]
        if keys:
            client.delete(*keys)
        client.close()
        drop_database(self.database)
