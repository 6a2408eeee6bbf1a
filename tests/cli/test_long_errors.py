"""Long input gives a short answer: every `agentrt: error:` line stays under 300 characters, keeps
what happened and what to do, and says how to see the whole message. Through the installed
console script, in a fresh directory."""

from __future__ import annotations

from pathlib import Path

from agent.cli.main import brief
from tests.cli.console import agentrt

MAX_ERROR_CHARS = 300
LONG_DIR = "d" * 400  # longer than a file name may be (255 bytes)


def test_a_config_path_too_long_to_open_is_a_config_error_naming_its_end(tmp_path: Path):
    """`--config` with a 415-character path: exit 2 (not "the disk failed"), the path's start and
    file name, the reason, and what to check; no store is made."""
    ran = agentrt("show", "s-1", "--config", f"/tmp/{LONG_DIR}/mine.yaml", cwd=tmp_path)
    assert ran.code == 2, ran.both
    line = ran.error_line()
    assert len(line) < MAX_ERROR_CHARS, line
    assert "cannot read config file /tmp/ddd" in line and "d/mine.yaml (415 characters)" in line, line
    assert "File name too long; check --config" in line
    assert list(tmp_path.iterdir()) == []


def test_a_model_script_path_too_long_names_the_key_to_fix(tmp_path: Path):
    """A config whose model.script is a 405-character name: exit 2 naming model.script."""
    (tmp_path / "long.yaml").write_text(f"model:\n  provider: scripted\n  script: {LONG_DIR}.yaml\n")
    ran = agentrt("run", "--config", "long.yaml", "hi", cwd=tmp_path)
    assert ran.code == 2, ran.both
    line = ran.error_line()
    assert len(line) < MAX_ERROR_CHARS and line.endswith("File name too long; check model.script"), line


def test_a_long_message_is_cut_keeping_its_start_and_its_end(tmp_path: Path):
    """Twelve misspelled 40-character keys: the line keeps the first key and the last, says it was
    shortened and how to see it all; AGENTRT_DEBUG=1 then shows every key."""
    keys = [f"{chr(ord('a') + i) * 40}_{i}" for i in range(12)]
    (tmp_path / "typos.yaml").write_text("loop:\n" + "".join(f"  {k}: 1\n" for k in keys))
    ran = agentrt("run", "--config", "typos.yaml", "hi", cwd=tmp_path)
    assert ran.code == 2, ran.both
    line = ran.error_line()
    assert len(line) < MAX_ERROR_CHARS, line
    assert line.startswith(f"agentrt: error: invalid config typos.yaml: loop.{keys[0]}: unknown key"), line
    assert f"…; loop.{keys[-1]}: unknown key (check spelling) (shortened: AGENTRT_DEBUG=1 shows all)" in line
    debug = agentrt("run", "--config", "typos.yaml", "hi", cwd=tmp_path, extra_env={"AGENTRT_DEBUG": "1"})
    assert all(k in debug.err for k in keys), debug.err[-2000:]


def test_the_cut_keeps_the_next_step():
    """The repair command after the last `; `, or a closing parenthesis, survives the cut."""
    repair = "; repair it with `agentrt doctor s-1 --repair`"
    cut = brief("checkpoints.jsonl of s-1 ends in a torn record " + "x" * 500 + repair)
    assert cut.startswith("checkpoints.jsonl of s-1 ends in a torn record xxx") and repair in cut
    assert len("agentrt: error: " + cut) < MAX_ERROR_CHARS
    bug = brief("KeyError: " + "k" * 900 + " (a bug: run again with AGENTRT_DEBUG=1 for the traceback)")
    assert bug.endswith(
        "k… (a bug: run again with AGENTRT_DEBUG=1 for the traceback) (shortened: AGENTRT_DEBUG=1 shows all)"
    )
    assert brief("short; do this") == "short; do this"


def test_a_redis_url_without_a_redis_scheme_is_a_config_error_for_every_command(tmp_path: Path):
    """`persistence.redis_url: localhost:6379` (no scheme): `run` and `show` both stop with exit 2
    naming the key and the schemes it takes, before anything is written (the Redis client itself
    is made only when a command first reads Redis)."""
    (tmp_path / "bad.yaml").write_text("persistence:\n  redis_url: localhost:6379\n")
    for args in (("run", "--config", "bad.yaml", "hi"), ("show", "s-1", "--config", "bad.yaml")):
        ran = agentrt(*args, cwd=tmp_path)
        assert ran.code == 2, ran.both
        line = ran.error_line()
        assert "invalid config bad.yaml: persistence.redis_url:" in line and "redis://" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]
