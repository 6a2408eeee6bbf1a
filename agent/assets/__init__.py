"""The files agentrt ships for its built-in defaults: the scripted demo, its datasets and skills.

    scripts/   model scripts the scripted provider replays (demo.yaml: the default; long-task.yaml;
               drill.yaml: the crash drills' task)
    datasets/  the demo's sample datasets (sales.csv, regions.json; scripts/generate_sales.py)
    skills/    the demo's skills (data-analyst.yaml)

A config names one with the `builtin:` prefix (`script: builtin:scripts/demo.yaml`), so it is found
wherever the config file sits; the files are package data, read through `importlib.resources`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

BUILTIN = "builtin:"
"""The prefix of a path in a config that names a file shipped here."""

DEMO_DATASETS: tuple[dict[str, str], ...] = (
    {
        "name": "sales",
        "path": "builtin:datasets/sales.csv",
        "format": "csv",
        "description": "200 orders of 2026 (order_id, order_date, region, product, channel, units, unit_price, "
        "discount, revenue)",
    },
    {
        "name": "regions",
        "path": "builtin:datasets/regions.json",
        "format": "json",
        "description": "the four sales regions with their manager and revenue target",
    },
)
"""The `datasets:` of the built-in defaults (configs/default.yaml lists the same)."""


def is_builtin(value: str) -> bool:
    """Whether a path from a config names a shipped file (`builtin:...`)."""
    return value.startswith(BUILTIN)


def builtin_path(value: str) -> Path:
    """The file a `builtin:` path names, as a path on disk.

    Raises ValueError when nothing is shipped under that name (the message lists what is).
    """
    root = files(__name__)
    if not isinstance(root, Path):
        raise ValueError(f"{value}: agentrt's shipped files are not on disk here; install agentrt unzipped")
    name = value.removeprefix(BUILTIN).strip("/")
    found = root.joinpath(*name.split("/"))
    if not name or ".." in name.split("/") or name.startswith("_") or not found.exists():
        raise ValueError(f"{value} is not shipped with agentrt; shipped: {', '.join(shipped())}")
    return found


def shipped() -> list[str]:
    """The shipped files as `builtin:` names take them (`scripts/demo.yaml`; their folders work too)."""
    root = files(__name__)
    folders = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")), key=lambda p: p.name)
    return [f"{folder.name}/{f.name}" for folder in folders for f in sorted(folder.iterdir(), key=lambda f: f.name)]
