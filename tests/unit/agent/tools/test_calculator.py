"""The calculator tool: exact arithmetic, and refusal of anything that is not arithmetic."""

from __future__ import annotations

import pytest

from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext
from agent.tools.calculator import CALCULATOR, evaluate

CTX = ToolContext(session_id="s1", tenant_id="t1", run_id="r1")


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("7 / 2", "3.5"),
        ("7 // 2", "3"),
        ("-7 % 3", "2"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("-(3 - 5)", "2"),
        ("+4", "4"),
        ("1.5e3 + 0.25", "1500.25"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("2 ** 0.5", "1.4142135623730951"),
        ("  12  ", "12"),
    ],
)
def test_arithmetic(expression: str, result: str) -> None:
    """Numbers and + - * / // % ** with parentheses and unary signs give Python's exact result."""
    assert CALCULATOR.invoke(CTX, {"expression": expression}) == result


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('true')", "not supported"),
        ("x + 1", "names"),
        ("abs(-1)", "function calls"),
        ("2 ^ 3", "use \\*\\*"),
        ("1 < 2", "Compare"),
        ("[1, 2]", "List"),
        ("'a' * 3", "Constant"),
        ("True + 1", "Constant"),
        ("1j * 1j", "Constant"),
        ("(1).real", "Attribute"),
        ("lambda: 1", "Lambda"),
        ("1 +", "not a valid"),
        ("", "not a valid"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("9 ** 9 ** 9", "exponent"),
        ("10 ** 5000", "too large"),
        ("2.0 ** 5000", "too large"),
        ("(-8) ** 0.5", "complex"),
        ("1e308 * 10", "finite"),
        ("1" * 1001, "longer than"),
    ],
)
def test_refused_expressions(expression: str, message: str) -> None:
    """Anything beyond bounded arithmetic is a ToolError saying why."""
    with pytest.raises(ToolError, match=message):
        evaluate(expression)


def test_huge_intermediate_product_is_bounded() -> None:
    """Repeated multiplication cannot build an unbounded integer."""
    with pytest.raises(ToolError, match="bits"):
        evaluate("2 ** 2000 * 2 ** 2000 * 2 ** 2000")


def test_calculator_is_read_only() -> None:
    """The calculator declares itself read_only, so it can be re-run after a crash."""
    assert CALCULATOR.effect == "read_only" and CALCULATOR.name == "calculator"
