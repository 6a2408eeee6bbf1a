"""Token accounting in a fresh process: offline tiktoken encodings with sockets disabled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_fresh_process_counts_offline(tmp_path: Path) -> None:
    """A new Python process with sockets disabled counts gpt-4o tokens with tiktoken, not the estimator."""
    code = (
        "import socket\n"
        "def _no(*a, **k): raise OSError('offline')\n"
        "socket.socket.connect = _no\n"
        "socket.create_connection = _no\n"
        "import agent.loop.token_count as t\n"
        "c = t.TokenCounter('gpt-4o')\n"
        "import tiktoken\n"
        "print(c.method, c.count_text('hello world'), tiktoken.get_encoding('cl100k_base').encode('hello'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["tiktoken:o200k_base", "2", "[15339]"]
