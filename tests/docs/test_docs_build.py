"""`mkdocs build --strict` builds the site from mkdocs.yml: no broken link, no missing page, no warning."""

from __future__ import annotations

from pathlib import Path


def _page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def test_the_site_builds_strict(site: Path) -> None:
    """Every page of the nav is built, production.md included."""
    for name in ("tutorials/first-session", "production", "concepts/recovery", "reference/exit-codes"):
        assert (site / name / "index.html").is_file(), name


def test_the_cli_reference_is_the_parser(site: Path) -> None:
    """The CLI page holds each command's --help, generated from the parser at build time."""
    from agent.cli.commands import COMMANDS

    page = _page(site, "reference/cli")
    assert "generated: cli" not in page
    for cmd in COMMANDS:
        assert f"usage: agentrt {cmd.name}" in page, cmd.name
    assert "--accept-changes" in page and "--host" in page  # resume's options, serve's own parser


def test_the_config_reference_is_the_settings(site: Path) -> None:
    """The config page has a table per settings section with every field, from agent/core/config.py."""
    from agent.core.config import AgentSettings

    page = _page(site, "reference/config")
    assert "generated: config" not in page
    for section, field in AgentSettings.model_fields.items():
        if field.exclude:  # set by the loader (the file's own path), not a key a file may write
            assert f"<code>{section}</code>" not in page
            continue
        assert f"<code>{section}</code>" in page
        sub = field.annotation
        for name in getattr(sub, "model_fields", {}):
            assert f"<code>{name}</code>" in page, f"{section}.{name}"
    assert "AGENTRT_DATABASE_URL" in page


def test_the_python_api_comes_from_the_docstrings(site: Path) -> None:
    """mkdocstrings renders AgentRunner's methods with their docstrings."""
    from agent.runner import AgentRunner

    page = _page(site, "reference/python-api")
    for method in ("run", "resume", "stream", "fork"):
        assert f"AgentRunner.{method}" in page or f'id="agent.runner.AgentRunner.{method}"' in page, method
    assert " ".join((AgentRunner.resume.__doc__ or "").split()[:4]) in " ".join(page.split())


def test_the_doctor_page_lists_every_check(site: Path) -> None:
    """The doctor's page names each check `agentrt doctor ID` runs, generated from agent.doctor."""
    from agent.doctor.checks import CHECKS

    page = _page(site, "reference/doctor")
    assert "generated: doctor" not in page
    for name, _ in CHECKS:
        assert f"<code>{name}</code>" in page, name
