"""`persistence:` settings reach the format-2 saver; ignored and bad ones are handled as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.config import load_settings
from agent.core.errors import ConfigError
from agent.runner.services import jsonl_saver


def _saver(tmp_path: Path, **persistence: object):  # type: ignore[no-untyped-def]
    overrides = {"persistence.base_dir": str(tmp_path), **{f"persistence.{k}": v for k, v in persistence.items()}}
    return jsonl_saver(load_settings(None, overrides))


def test_checkpoint_fsync_and_item_size_reach_the_saver(tmp_path: Path) -> None:
    """`checkpoint_fsync: checkpoint` and `item_min_bytes` are what the saver runs with."""
    saver = _saver(tmp_path, checkpoint_fsync="checkpoint", item_min_bytes=256)
    assert saver.fsync == "checkpoint" and saver.docs.item_min == 256


def test_checkpoint_fsync_defaults_to_fsync(tmp_path: Path) -> None:
    """Without `checkpoint_fsync` the saver follows `persistence.fsync`; the default is crash-safe."""
    assert _saver(tmp_path).fsync == "always"
    assert _saver(tmp_path, fsync="batch").fsync == "batch"


def test_keyframe_every_is_accepted_and_ignored(tmp_path: Path) -> None:
    """Old config files that set keyframe_every still load; the saver has no such setting."""
    saver = _saver(tmp_path, keyframe_every=3)
    assert not hasattr(saver, "keyframe_every")


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [("item_min_bytes", 8, "at least 16"), ("checkpoint_fsync", "sometimes", "checkpoint_fsync")],
)
def test_bad_saver_setting_is_one_clear_line(tmp_path: Path, key: str, value: object, words: str) -> None:
    """A bad value names the key in one line (and nothing is written)."""
    with pytest.raises(ConfigError) as err:
        _saver(tmp_path, **{key: value})
    assert "\n" not in str(err.value) and f"persistence.{key}" in str(err.value) and words in str(err.value)
    assert not any(tmp_path.iterdir())
