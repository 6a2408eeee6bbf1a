"""The `calculator` tool: arithmetic evaluated by walking the AST, never by `eval`.

Allowed: int and float literals, `+ - * / // % **`, unary `+`/`-` and parentheses. Anything else
(names, calls, attributes, comparisons, bit operators) is refused. Powers are bounded before they
are computed and integer results are capped, so no expression can exhaust memory or CPU.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from pydantic import BaseModel, Field

from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext, ToolSpec

MAX_EXPRESSION_CHARS = 1_000
MAX_RESULT_BITS = 4_096
MAX_EXPONENT = 10_000

_Number = int | float
_BINARY: dict[type[ast.operator], Callable[[_Number, _Number], _Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_HINTS: dict[type[ast.AST], str] = {
    ast.BitXor: "use ** for powers, not ^",
    ast.Name: "names and constants like pi are not supported; write the number",
    ast.Call: "function calls are not supported",
}


def _power(base: _Number, exp: _Number) -> _Number:
    if abs(exp) > MAX_EXPONENT:
        raise ToolError(f"exponent {exp} is too large (limit {MAX_EXPONENT})")
    exact = isinstance(base, int) and isinstance(exp, int) and exp > 0 and abs(base) > 1
    if exact and int(base).bit_length() * int(exp) > MAX_RESULT_BITS:
        raise ToolError(f"{base} ** {exp} is too large to compute; use a float base like {base}.0")
    result = base**exp
    if isinstance(result, complex):
        raise ToolError("the result is a complex number (fractional power of a negative number)")
    return result


def _eval(node: ast.AST) -> _Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _eval(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _check(_power(left, right))
        func = _BINARY.get(type(node.op))
        if func is not None:
            return _check(func(left, right))
    kind = type(node.op) if isinstance(node, ast.BinOp) else type(node)
    hint = _HINTS.get(kind, "only numbers, + - * / // % **, unary minus and parentheses are allowed")
    raise ToolError(f"unsupported expression element {kind.__name__}: {hint}")


def _check(value: _Number) -> _Number:
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise ToolError(f"an intermediate result exceeds {MAX_RESULT_BITS} bits; use floats (e.g. 2.0)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    return value


def evaluate(expression: str) -> _Number:
    """The value of an arithmetic expression; raises ToolError with the reason when refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters; split it up")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError) as err:
        raise ToolError(f"not a valid arithmetic expression: {getattr(err, 'msg', err)}") from None
    except RecursionError:
        raise ToolError("expression is nested too deeply") from None
    try:
        return _eval(tree)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("the result is too large for a float") from None
    except RecursionError:
        raise ToolError("expression is nested too deeply") from None


class CalculatorArgs(BaseModel):
    """Arguments of calculator."""

    expression: str = Field(description="arithmetic such as (3 + 4) * 2 ** 10 / 7")


def calculator(ctx: ToolContext, expression: str) -> str:
    """Evaluate `expression`; integers exactly, floats in their shortest round-trip form."""
    return repr(evaluate(expression))


CALCULATOR = ToolSpec(
    "calculator",
    "Evaluate an arithmetic expression with + - * / // % ** and parentheses.",
    CalculatorArgs,
    calculator,
    effect="read_only",
)


def calculator_tool() -> ToolSpec:
    """The calculator ToolSpec."""
    return CALCULATOR
