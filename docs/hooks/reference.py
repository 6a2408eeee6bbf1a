"""MkDocs hook: the CLI and config reference pages, generated at build time from the code.

`<!-- generated: cli -->` in a page becomes every command's `--help` (from `agent.cli.main.build_parser`
and `agent.cli.serve.build_parser`); `<!-- generated: config -->` becomes a table per section of
`agent.core.config.AgentSettings` (type, default, environment override, the field's docstring or comment);
`<!-- generated: doctor -->` becomes the doctor's checks in the order they run (`agent.doctor`).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import textwrap
import types
import typing
from typing import Any

from pydantic import BaseModel

CLI_MARK = "<!-- generated: cli -->"
CONFIG_MARK = "<!-- generated: config -->"
DOCTOR_MARK = "<!-- generated: doctor -->"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Fill the generated parts of a page (mkdocs calls this for every page)."""
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if CONFIG_MARK in markdown:
        markdown = markdown.replace(CONFIG_MARK, config_reference())
    if DOCTOR_MARK in markdown:
        markdown = markdown.replace(DOCTOR_MARK, doctor_reference())
    return markdown


def _help(parser: argparse.ArgumentParser) -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: the same width on every build
    return parser.format_help().rstrip()


def cli_reference() -> str:
    """Markdown: `agentrt --help`, then a section per command with its `--help`."""
    from agent.cli.commands import COMMANDS
    from agent.cli.main import build_parser
    from agent.cli.serve import build_parser as serve_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    out = ["## agentrt", "", "```text", _help(parser), "```", ""]
    for cmd in COMMANDS:
        sub = serve_parser() if cmd.passthrough else subs[cmd.name]
        out += [f"## agentrt {cmd.name}", "", cmd.help[:1].upper() + cmd.help[1:] + ".", ""]
        out += ["```text", _help(sub), "```", ""]
    return "\n".join(out)


def _field_notes(cls: type) -> dict[str, str]:
    """Each field's attribute docstring, else the comment on its line."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    notes: dict[str, str] = {}
    for i, node in enumerate(body.body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        nxt = body.body[i + 1] if i + 1 < len(body.body) else None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            notes[node.target.id] = " ".join(nxt.value.value.split())
        elif "  # " in lines[node.end_lineno - 1 if node.end_lineno else node.lineno - 1]:
            notes[node.target.id] = lines[(node.end_lineno or node.lineno) - 1].split("  # ", 1)[1].strip()
    return notes


def _type_name(annotation: Any) -> str:
    if annotation is None or annotation is type(None):
        return "null"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in typing.get_args(annotation))}]"
    return getattr(annotation, "__name__", str(annotation))


def _default(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return f"{len(value)} entries (the demo's)"
    text = json.dumps(value, default=str)
    return "`" + (text if len(text) <= 60 else text[:57] + "...") + "`"


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text).replace("|", "\\|")


def config_reference() -> str:
    """Markdown: one table per section of the settings, top-level keys first."""
    from agent.core.config import _ENV, AgentSettings

    env = {path: var for var, path in _ENV.items()}
    out: list[str] = []

    def table(cls: type[BaseModel], section: str | None) -> None:
        notes = _field_notes(cls)
        title = f"`{section}:`" if section else "Top-level keys"
        doc = " ".join((cls.__doc__ or "").split())
        out.extend(
            [f"## {title}", "", doc, "", "| key | type | default | environment | meaning |", "|---|---|---|---|---|"]
        )
        nested: list[tuple[type[BaseModel], str]] = []
        for name, field in cls.model_fields.items():
            if field.exclude:
                continue
            key = f"{section}.{name}" if section else name
            ann = field.annotation
            inner = [a for a in typing.get_args(ann) if a is not type(None)] or [ann]  # `Model | None`
            if len(inner) == 1 and isinstance(inner[0], type) and issubclass(inner[0], BaseModel):
                nested.append((inner[0], key))
            default = "required" if field.is_required() else _default(field.get_default(call_default_factory=True))
            var = env.get(tuple(key.split(".")), "")  # type: ignore[arg-type]
            out.append(
                f"| `{name}` | {_cell(_type_name(ann))} | {_cell(default)} | {f'`{var}`' if var else ''} "
                f"| {_cell(notes.get(name, ''))} |"
            )
        out.append("")
        for sub, key in nested:
            table(sub, key)

    table(AgentSettings, None)
    return "\n".join(out)


def _first_line(fn: Any) -> str:
    return " ".join((inspect.getdoc(fn) or "").split("\n\n")[0].split())


def doctor_reference() -> str:
    """Markdown: the checks of `agentrt doctor ID`, then those of `agentrt doctor` without an id."""
    from agent.doctor.behind import outbox_check
    from agent.doctor.checks import CHECKS
    from agent.doctor.index import NAME as INDEX
    from agent.doctor.index import index_check
    from agent.doctor.items_check import NAME as ITEMS
    from agent.doctor.items_check import items_check
    from agent.doctor.queue_check import NAME as QUEUE
    from agent.doctor.queue_check import queues_check

    out = ["### `agentrt doctor ID`", "", "| check | what it looks at |", "|---|---|"]
    for name, fn in CHECKS:
        out.append(f"| `{name}` | {_cell(_first_line(index_check if name == INDEX else fn))} |")
    out += ["", "### `agentrt doctor` (no session id)", "", "| check | what it looks at |", "|---|---|"]
    for name, fn in ((INDEX, index_check), ("outbox", outbox_check), (ITEMS, items_check), (QUEUE, queues_check)):
        out.append(f"| `{name}` | {_cell(_first_line(fn))} |")
    return "\n".join(out) + "\n"
