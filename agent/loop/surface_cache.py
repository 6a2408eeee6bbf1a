"""The current runtime's pins without building it: what only the code knows, kept by a runner.

The pins (`agent.loop.surface.compute_pins`) come from the settings, the skills (read cheaply,
`load_skills`) and two things only the built runtime knows: the graph's version (LangGraph
compiles the graph to tell it) and the toolset's digests (every tool module is loaded).
`agentrt doctor` on the embedded default reads those two here (`pins`), and so loads neither
LangGraph nor the tools; when they are not here it builds a runner, and keeps them (`remember`).
Only the doctor keeps them: a runner a test changed in-process (another graph, another tool) must
not leave its pins for the unchanged code.

An entry is a file `<cache>/surface/<key>.json` (`<cache>`: `$XDG_CACHE_HOME/agentrt`, default
`~/.cache/agentrt`; else `<tmp>/agentrt-cache-<uid>`). The key digests everything the two are
computed from: the tool settings, every Python source file of agentrt's packages (path, size,
modification time) and the installed versions of the libraries that shape them (pydantic: the
tools' argument schemas; LangGraph: the graph's drawing). Changing any of them makes a new key, so
an entry is never stale: a miss (`pins` returns None) only means the doctor builds the runtime,
and keeps the parts for the next time. The cache is best effort: a folder that cannot be
written leaves every read a miss.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import tempfile
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

from agent.core.config import AgentSettings
from agent.loop.skills import load_skills
from agent.loop.surface import SurfacePins, ToolsetDigests, pins_of, skills_digest
from checkpointing.digest import digest_of
from checkpointing.fsyncs import atomic_write
from checkpointing.records import canonical_json

PACKAGES = ("agent", "graph", "nodes", "checkpointing")
"""agentrt's top-level packages: their source files are part of the key."""
LIBRARIES = ("pydantic", "pydantic_core", "langgraph", "langchain_core")
"""The libraries whose installed versions are part of the key."""
KEEP = 16
"""How many entries the cache keeps (the newest)."""
_FORMAT = 1


def pins(settings: AgentSettings) -> SurfacePins | None:
    """The pins a runner built from `settings` has, from the kept parts; None when none are kept."""
    entry = _read(_path(settings))
    if entry is None:
        return None
    try:
        tools = ToolsetDigests(**{**entry["toolset"], "tool_names": tuple(entry["toolset"]["tool_names"])})
        graph_version = str(entry["graph_version"])
    except (KeyError, TypeError):
        return None
    return pins_of(settings, tools, graph_version, skills_digest(load_skills(settings.skills_dir)))


def remember(settings: AgentSettings, found: SurfacePins) -> None:
    """Keep the code-made parts of `found`, the pins of a runner built from `settings` (once per key)."""
    path = _path(settings)
    if path is None or path.exists():
        return
    tools = ToolsetDigests(found.toolset_hash, found.tool_shape_hash, found.permissions_hash, found.tool_names)
    entry = {"format": _FORMAT, "graph_version": found.graph_version, "toolset": asdict(tools)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(entry, sort_keys=True).encode())
        _prune(path.parent)
    except OSError:
        pass  # a cache: the next doctor builds the runtime instead


def _prune(folder: Path) -> None:
    """Keep the `KEEP` newest entries (each code change makes one)."""
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in entries[KEEP:]:
        old.unlink(missing_ok=True)


def _read(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        entry = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and entry.get("format") == _FORMAT else None


def _path(settings: AgentSettings) -> Path | None:
    root = _cache_dir()
    if root is None:
        return None
    key = digest_of({"tools": settings.tools.model_dump(mode="json"), "code": _code_key()})
    return root / "surface" / f"{key.removeprefix('sha256:')}.json"


def _cache_dir() -> Path | None:
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    for root in (Path(xdg) / "agentrt", Path(tempfile.gettempdir()) / f"agentrt-cache-{uid}"):
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(root, os.W_OK):
            return root
    return None


@cache
def _code_key() -> str:
    """agentrt's source files (path, size, mtime) and the libraries' installed versions, digested
    (once per process: neither changes under a running command)."""
    files: list[tuple[str, int, int]] = []
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        folders = list(spec.submodule_search_locations or []) if spec else []
        while folders:  # `os.walk` without following links, and without the bytecode folders
            with os.scandir(folders.pop()) as found:
                for entry in found:
                    if entry.name.endswith(".py"):
                        if entry.is_file():
                            st = entry.stat()
                            files.append((entry.path, st.st_size, st.st_mtime_ns))
                    elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
    # `digest_of` of these (no key looks secret, orjson writes tuples as lists), without its walk
    key = canonical_json({"files": sorted(files), "libraries": _versions()})
    return "sha256:" + hashlib.sha256(key).hexdigest()


def _versions() -> dict[str, list[str]]:
    """Each library's `<dist>-<version>.dist-info` folders beside it (none found: an empty list)."""
    out: dict[str, list[str]] = {}
    listed: dict[str, list[str]] = {}
    for lib in LIBRARIES:
        spec = importlib.util.find_spec(lib)  # locates a top-level package without importing it
        places = list(spec.submodule_search_locations or []) if spec else []
        found: list[str] = []
        for place in places:
            site = os.path.dirname(place)
            if site not in listed:
                try:
                    listed[site] = os.listdir(site)
                except OSError:
                    listed[site] = []
            pattern = re.compile(rf"^{lib}-[^-]+\.dist-info$", re.IGNORECASE)
            found += sorted(n for n in listed[site] if pattern.match(n))
        out[lib] = found
    return out
