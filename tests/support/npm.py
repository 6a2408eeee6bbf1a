"""npm packages for the tests, installed from the registry with `npm ci` once per lockfile into
~/.cache/agentrt/js/<name>-<sha256>/node_modules (nothing else is downloaded)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

NPM_BOUND_S = 300
# What npm prints when it cannot reach the registry (the only reason to skip).
OFFLINE = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|network", re.I)


def npm_modules(project: Path) -> Path:
    """node_modules for `project`'s package-lock.json (skip when the registry cannot be reached)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("needs Node.js 20 and npm on PATH")
    digest = hashlib.sha256((project / "package-lock.json").read_bytes()).hexdigest()
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentrt" / "js"
    cache = home / f"{project.name}-{digest}"
    modules = cache / "node_modules"
    if modules.is_dir():
        return modules
    home.mkdir(parents=True, exist_ok=True)
    work = home / f"{cache.name}.{os.getpid()}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for name in ("package.json", "package-lock.json"):
        shutil.copy(project / name, work / name)
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=NPM_BOUND_S,
    )
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        if OFFLINE.search(done.stderr):
            pytest.skip(f"npm cannot reach the registry: {done.stderr.strip()[-300:]}")
        pytest.fail(f"npm ci failed:\n{done.stderr[-3000:]}")
    try:
        work.rename(cache)  # atomic: another session that got there first keeps its copy
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
    return modules
