"""YAML syntax errors as one line of an agentrt error: where (line, column, the line's text) and what."""

from __future__ import annotations

import yaml


def yaml_problem(err: yaml.YAMLError, text: str | None = None) -> str:
    """A YAML error on one line, as YAML reports it: `line 3, column 2: <problem> (<context>), at '<line>'`.

    PyYAML's own text spreads the same over several lines (with a caret under the column); an error
    of agentrt is one line, so the marks are written out instead.
    """
    if not isinstance(err, yaml.MarkedYAMLError) or err.problem_mark is None:
        return " ".join(str(err).split())
    mark = err.problem_mark
    said = f"line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
    if err.context:
        ctx = err.context_mark
        started = f" started at line {ctx.line + 1}, column {ctx.column + 1}" if ctx is not None else ""
        said += f" ({err.context}{started})"
    lines = (text or "").splitlines()
    if mark.line < len(lines) and lines[mark.line].strip():
        shown = lines[mark.line].strip()
        said += f", at {(shown if len(shown) <= 60 else shown[:59] + '…')!r}"
    return said
