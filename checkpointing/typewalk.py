"""The classes a graph's type annotations name, for the codec's allowlist (`saver.allow_graph`).

`classes_in(*annotations)` walks type annotations and returns the classes a checkpoint may store
by name and the codec rebuilds only when allowed: pydantic models (v2 and v1), dataclasses,
enums and named tuples. The walk goes through `Annotated[...]`, `Optional` / `Union` / `X | Y`,
`Required` / `NotRequired` / `ClassVar` / `Final`, the arguments of generic aliases (`list[X]`,
`dict[K, V]`, `tuple[...]`, `set[X]`, `Sequence[X]`, a generic dataclass `Box[X]`...), `NewType`,
`TypeVar` bounds and constraints, and into the fields of TypedDicts (which are plain dicts, so are
not themselves allowed), pydantic models, dataclasses and typed named tuples; each type is
visited once, so self-referencing models end. String annotations are resolved in the module
(and class) that declares them; one that does not resolve is skipped. Nothing is imported.

`graph_classes(graph)` applies it to a compiled LangGraph graph: its builder's state, input,
output and context schemas, each node's and branch's input schema, the value and update types of
its channels, and the same for its subgraphs.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import sys
import types
import typing
from collections.abc import Iterable, Iterator
from typing import Any

import typing_extensions
from pydantic import BaseModel
from typing_extensions import is_typeddict

try:  # pydantic v1 models (pydantic.v1 ships with pydantic 2)
    from pydantic.v1 import BaseModel as BaseModelV1
except ImportError:  # pragma: no cover
    BaseModelV1 = None  # type: ignore[assignment,misc]

_QUALIFIERS = ("Required", "NotRequired", "ReadOnly")
_WRAPPERS = frozenset(
    {
        typing.Annotated,
        typing.ClassVar,
        typing.Final,
        typing.Union,
        *(getattr(m, n) for m in (typing, typing_extensions) for n in _QUALIFIERS if hasattr(m, n)),
    }
)
"""Special forms whose arguments are the types to look at (Annotated: only the first is a type)."""


def classes_in(*annotations: Any) -> set[type]:
    """The pydantic models, dataclasses, enums and named tuples `annotations` name, at any depth."""
    found: set[type] = set()
    # Kept by id (typing objects are not all hashable); the list keeps each one alive meanwhile.
    seen: dict[int, Any] = {}
    todo = list(annotations)
    while todo:
        tp = todo.pop()
        if id(tp) in seen:
            continue
        seen[id(tp)] = tp
        todo.extend(_inner(tp, found))
    return found


def _inner(tp: Any, found: set[type]) -> Iterable[Any]:
    """The types inside `tp` to walk next; adds `tp` to `found` when it is a class to allow."""
    if tp is None or tp is Any or isinstance(tp, (str, typing.ForwardRef)):
        return ()
    if isinstance(tp, (list, tuple)):  # the parameter list of Callable[[A, B], R]
        return tp
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return ()
    if origin is typing.Annotated:
        return typing.get_args(tp)[:1]
    if origin in _WRAPPERS or isinstance(tp, types.UnionType):
        return typing.get_args(tp)
    if origin is not None:
        # A generic alias: its arguments, and its origin when that is a class of ours (Box[int]).
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return [*args, origin] if isinstance(origin, type) else args
    if isinstance(tp, typing.TypeVar):
        return [*tp.__constraints__, *([tp.__bound__] if tp.__bound__ is not None else [])]
    supertype = getattr(tp, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return (supertype,)
    alias_value = getattr(tp, "__value__", None)  # a `type X = ...` alias (Python 3.12+)
    if alias_value is not None and not isinstance(tp, type):
        return (alias_value,)
    if not isinstance(tp, type):
        return ()
    if is_typeddict(tp):
        return _hints(tp).values()
    # A model's own field list (resolved by pydantic, no ClassVars such as model_config).
    if issubclass(tp, BaseModel):
        found.add(tp)
        return [f.annotation for f in tp.model_fields.values()]
    if BaseModelV1 is not None and issubclass(tp, BaseModelV1):
        found.add(tp)
        return [f.outer_type_ for f in tp.__fields__.values()]
    if dataclasses.is_dataclass(tp):
        found.add(tp)
        hints = _hints(tp)
        return [hints.get(f.name, f.type) for f in dataclasses.fields(tp)]
    if issubclass(tp, enum.Enum):
        found.add(tp)
        return ()
    if issubclass(tp, tuple) and hasattr(tp, "_fields"):
        found.add(tp)
        return _hints(tp).values()
    return ()


def _hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of `cls` and its bases (extras kept); when the whole set does not
    resolve, each one that does on its own (an unresolvable one is left out)."""
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:  # any failure of a forward reference: resolve one by one
        pass
    out: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        module = sys.modules.get(base.__module__)
        globalns = dict(vars(module)) if module is not None else {}
        localns = dict(vars(base))
        for name, ann in inspect.get_annotations(base).items():
            try:
                out[name] = _resolve_one(name, ann, globalns, localns)
            except Exception:  # a name this module cannot see: skipped
                continue
    return out


def _resolve_one(name: str, ann: Any, globalns: dict[str, Any], localns: dict[str, Any]) -> Any:
    """One annotation resolved as `get_type_hints` resolves it (through a holder of just that one)."""

    def holder() -> None:
        """Carries one annotation."""

    holder.__annotations__ = {name: ann}
    return typing.get_type_hints(holder, globalns, localns, include_extras=True)[name]


def _graph_types(graph: Any) -> Iterator[Any]:
    builder = getattr(graph, "builder", None)
    if builder is not None:
        for attr in ("state_schema", "input_schema", "output_schema", "context_schema"):
            yield getattr(builder, attr, None)
        yield from getattr(builder, "schemas", {}) or {}
        for node in (getattr(builder, "nodes", {}) or {}).values():
            yield getattr(node, "input_schema", None)
        for branches in (getattr(builder, "branches", {}) or {}).values():
            for branch in branches.values():
                yield getattr(branch, "input_schema", None)
    for channel in (getattr(graph, "channels", {}) or {}).values():
        for attr in ("ValueType", "UpdateType"):
            try:
                yield getattr(channel, attr, None)
            except Exception:  # a channel that cannot say its type adds nothing
                continue


def graph_classes(graph: Any) -> set[type]:
    """The classes to allow for a compiled LangGraph graph and its subgraphs (see the module doc)."""
    graphs = [graph]
    try:
        graphs += [sub for _, sub in graph.get_subgraphs(recurse=True)]
    except Exception:  # a graph without subgraph support: itself only
        pass
    return classes_in(*(t for g in graphs for t in _graph_types(g)))


__all__ = ["classes_in", "graph_classes"]
