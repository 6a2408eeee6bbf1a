"""A PgBouncer in transaction pooling mode in front of the test database, as a pytest fixture.

Import `pgbouncer` into a test module to use it; skipped where pgbouncer is not installed
(scripts/services installs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.integration.test_stores_support import free_port
from tests.support.savers import DATABASE_URL


@pytest.fixture
def pgbouncer() -> Iterator[str]:
    """A PgBouncer in transaction pooling mode (2 server connections) in front of the test
    database; its URL."""
    exe = shutil.which("pgbouncer")
    if exe is None:
        pytest.skip("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    info = conninfo_to_dict(DATABASE_URL)
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    work.chmod(0o755)  # read by the unprivileged user pgbouncer switches to when started as root
    (work / "users.txt").write_text(f'"{info.get("user", "postgres")}" ""\n')
    (work / "pgbouncer.ini").write_text(
        f"[databases]\n* = host={info.get('host', '127.0.0.1')} port={info.get('port', 5432)}\n"
        f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\n"
        f"auth_file = {work / 'users.txt'}\npool_mode = transaction\ndefault_pool_size = 2\n"
        "max_client_conn = 50\nlogfile =\npidfile =\nunix_socket_dir =\n"
    )
    for p in work.iterdir():
        p.chmod(0o644)
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    proc = subprocess.Popen([exe, *user, str(work / "pgbouncer.ini")], stderr=subprocess.DEVNULL)
    url = f"postgresql://{info.get('user', 'postgres')}@127.0.0.1:{port}/{info.get('dbname', 'test')}"
    try:
        for _ in range(100):
            try:
                psycopg.connect(url, connect_timeout=1).close()
                break
            except psycopg.OperationalError:
                time.sleep(0.05)
        else:
            pytest.fail(f"pgbouncer did not start on port {port}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
