"""The shared options before the command as after it, and the shell completion script."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.console import ROOT, agentrt

CONFIG = str(ROOT / "configs" / "default.yaml")
TASK = "Summarise the 2026 sales by region"


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A folder where user u2 of tenant acme ran the demo, every option given before `run`."""
    work = tmp_path_factory.mktemp("acme")
    before = ("--config", CONFIG, "--tenant", "acme", "--user", "u2", "--json")
    ran = agentrt(*before, "run", "--approve-all", TASK, cwd=work)
    assert ran.code == 0, ran.both
    result = json.loads(ran.out)
    assert result["status"] == "COMPLETED", result
    return work, str(result["session_id"])


def listed(work: Path, *args: str) -> list[str]:
    """The session ids `agentrt ARGS` lists as JSON."""
    ran = agentrt(*args, cwd=work)
    assert ran.code == 0, ran.both
    return [row["session_id"] for row in json.loads(ran.out)]


def test_options_before_the_command_mean_what_they_mean_after_it(acme: tuple[Path, str]) -> None:
    work, sid = acme
    after = listed(work, "sessions", "--config", CONFIG, "--tenant", "acme", "--user", "u2", "--json")
    before = listed(work, "--config", CONFIG, "--tenant", "acme", "--user", "u2", "--json", "sessions")
    assert before == after == [sid]
    assert listed(work, "--tenant=acme", "--json", "sessions") == [sid]  # the --opt=value form
    assert listed(work, "--ten", "acme", "--json", "sessions") == [sid]  # a unique prefix, as argparse takes
    # Another user and the default tenant see nothing of it.
    assert listed(work, "--tenant", "acme", "--user", "u3", "--json", "sessions") == []
    assert listed(work, "--json", "sessions") == []
    shown = agentrt("--tenant", "acme", "--json", "show", sid, cwd=work)
    assert shown.code == 0, shown.both
    assert json.loads(shown.out)["session"]["tenant_id"] == "acme"
    assert agentrt("--json", "show", sid, cwd=work).code == 3  # not in the default tenant


def test_a_value_after_the_command_wins_over_one_before_it(acme: tuple[Path, str]) -> None:
    work, sid = acme
    assert listed(work, "--tenant", "acme", "sessions", "--tenant", "default", "--json") == []
    assert listed(work, "--tenant", "default", "sessions", "--tenant", "acme", "--json") == [sid]


def test_an_option_the_command_does_not_take_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    ran = agentrt("--tenant", "acme", "db", "init", cwd=tmp_path)
    assert ran.code == 2
    assert "--tenant does not apply to this command" in ran.err and "agentrt db -h" in ran.err
    missing = agentrt("--config", cwd=tmp_path)
    assert missing.code == 2
    assert "--config needs a value" in missing.err
    flag = agentrt("--json=yes", "sessions", cwd=tmp_path)
    assert flag.code == 2 and "--json takes no value" in flag.err
    assert list(tmp_path.iterdir()) == []


def test_serve_takes_the_config_given_before_it(tmp_path: Path) -> None:
    """serve parses its own options: a --config before it reaches that parser (checked by a bad path)."""
    ran = agentrt("--config", str(tmp_path / "nope.yaml"), "serve", "--port", "1", cwd=tmp_path)
    assert ran.code == 2, ran.both
    assert "nope.yaml" in ran.err


def _complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of `words` after loading the completion `script`."""
    shell = (
        f"source {script}; COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; "
        f"COMP_LINE='{' '.join(words)}'; COMP_POINT=${{#COMP_LINE}}; _shtab_agentrt; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=30, check=True).stdout
    return out.split()


def test_bash_completion_offers_commands_and_their_options(tmp_path: Path) -> None:
    ran = agentrt("completion", "bash", cwd=tmp_path)
    assert ran.code == 0, ran.both
    script = tmp_path / "agentrt.bash"
    script.write_text(ran.out)
    assert _complete(script, "agentrt", "ses") == ["sessions"]
    assert "--status" in _complete(script, "agentrt", "sessions", "--st")
    assert "--approve-all" in _complete(script, "agentrt", "resume", "--appr")


def test_zsh_completion_and_an_unknown_shell(tmp_path: Path) -> None:
    zsh = agentrt("completion", "zsh", cwd=tmp_path)
    assert zsh.code == 0 and zsh.out.startswith("#compdef agentrt"), zsh.both
    fish = agentrt("completion", "fish", cwd=tmp_path)
    assert fish.code == 2 and "invalid choice: 'fish'" in fish.err
