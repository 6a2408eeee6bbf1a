"""`allow_graph`: the classes a graph's schemas name read back as themselves in a fresh saver.

A fresh saver's codec has never encoded these classes (what a new process is): without
`allow_graph` they read back as `StoredObject` stand-ins, with it as the real types. LangGraph's
own hand-over (`with_allowlist`) happens only under LANGGRAPH_STRICT_MSGPACK, unset here.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, NewType, NotRequired, Optional, TypedDict, Union

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from pydantic.v1 import BaseModel as BaseModelV1

from checkpointing.codec import StoredObject
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.typewalk import classes_in, graph_classes

CFG: RunnableConfig = {"configurable": {"thread_id": "allow"}}


@pytest.fixture(autouse=True)
def _not_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)


class Mood(enum.Enum):
    CALM = "calm"
    BUSY = "busy"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Corner(NamedTuple):
    x: int
    y: int


@dataclasses.dataclass
class Item:
    name: str
    corner: Corner
    mood: Mood = Mood.CALM


class Deep(BaseModel):
    level: Level
    tags: frozenset[str] = frozenset()


class Inner(BaseModel):
    deep: Deep
    items: list[Item] = []


class Legacy(BaseModelV1):
    n: int = 0


# -- three graphs, each with one node that writes nested values ------------------------------


class PydanticState(BaseModel):
    inner: Inner | None = None
    mood: Mood = Mood.CALM


def _pydantic_graph(saver: JsonlCheckpointSaver) -> Any:
    def step(s: PydanticState) -> dict[str, Any]:
        deep = Deep(level=Level.HIGH, tags=frozenset({"t"}))
        return {"inner": Inner(deep=deep, items=[Item("a", Corner(1, 2))]), "mood": Mood.BUSY}

    b: Any = StateGraph(PydanticState)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=saver)


@dataclasses.dataclass
class DataclassState:
    items: list[Item] = dataclasses.field(default_factory=list)
    corners: tuple[Corner, ...] = ()
    mood: Mood = Mood.CALM


def _dataclass_graph(saver: JsonlCheckpointSaver) -> Any:
    def step(s: DataclassState) -> dict[str, Any]:
        return {"items": [Item("b", Corner(3, 4), Mood.BUSY)], "corners": (Corner(5, 6),), "mood": Mood.BUSY}

    b: Any = StateGraph(DataclassState)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=saver)


class DictState(TypedDict):
    inners: Annotated[list[Inner], operator.add]
    by_name: dict[str, Item | None]
    level: NotRequired[Level | None]
    legacy: NotRequired[Legacy | None]


def _typeddict_graph(saver: JsonlCheckpointSaver) -> Any:
    def step(s: DictState) -> dict[str, Any]:
        inner = Inner(deep=Deep(level=Level.LOW), items=[Item("c", Corner(7, 8))])
        return {"inners": [inner], "by_name": {"c": Item("c", Corner(7, 8)), "none": None}, "level": Level.HIGH,
                "legacy": Legacy(n=3)}  # fmt: skip

    b: Any = StateGraph(DictState)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=saver)


GRAPHS: dict[str, tuple[Callable[[JsonlCheckpointSaver], Any], Any, set[type]]] = {
    "pydantic": (_pydantic_graph, PydanticState(), {PydanticState, Inner, Deep, Level, Item, Corner, Mood}),
    "dataclass": (_dataclass_graph, DataclassState(), {DataclassState, Item, Corner, Mood}),
    "typeddict": (_typeddict_graph, {"inners": [], "by_name": {}}, {Inner, Deep, Level, Item, Corner, Mood, Legacy}),
}


def _check_real(kind: str, values: dict[str, Any]) -> None:
    if kind == "pydantic":
        inner = values["inner"]
        assert type(inner) is Inner and type(inner.deep) is Deep and inner.deep.level is Level.HIGH
        assert inner.items == [Item("a", Corner(1, 2))] and type(inner.items[0].corner) is Corner
        assert values["mood"] is Mood.BUSY
    elif kind == "dataclass":
        assert values["items"] == [Item("b", Corner(3, 4), Mood.BUSY)] and values["items"][0].mood is Mood.BUSY
        assert values["corners"] == (Corner(5, 6),) and type(values["corners"][0]) is Corner
        assert values["mood"] is Mood.BUSY
    else:
        (inner,) = values["inners"]
        assert type(inner) is Inner and inner.deep.level is Level.LOW and type(inner.items[0]) is Item
        assert values["by_name"] == {"c": Item("c", Corner(7, 8)), "none": None} and values["level"] is Level.HIGH
        assert type(values["legacy"]) is Legacy and values["legacy"].n == 3


def _check_stand_ins(kind: str, values: dict[str, Any]) -> None:
    if kind == "pydantic":
        inner = values["inner"]
        assert isinstance(inner, StoredObject) and inner.type_name.endswith(":Inner") and inner.kind == "model"
        assert isinstance(inner.fields["deep"], StoredObject) and isinstance(values["mood"], StoredObject)
    elif kind == "dataclass":
        (item,) = values["items"]
        assert isinstance(item, StoredObject) and item.kind == "dataclass" and item.fields["name"] == "b"
        assert isinstance(item.fields["corner"], StoredObject) and item.fields["corner"].kind == "namedtuple"
        assert isinstance(values["mood"], StoredObject) and values["mood"].kind == "enum"
    else:
        (inner,) = values["inners"]
        assert isinstance(inner, StoredObject) and isinstance(inner.fields["deep"].fields["level"], StoredObject)
        assert isinstance(values["by_name"]["c"], StoredObject) and values["by_name"]["none"] is None
        assert isinstance(values["level"], StoredObject) and values["level"].fields == 2
        assert isinstance(values["legacy"], StoredObject) and values["legacy"].kind == "model_v1"


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_a_fresh_saver_reads_the_graphs_classes_only_after_allow_graph(tmp_path: Path, kind: str) -> None:
    """Written by one saver; a fresh one reads stand-ins, a fresh one told `allow_graph` the real types."""
    make, start, classes = GRAPHS[kind]
    make(JsonlCheckpointSaver(tmp_path)).invoke(start, CFG)

    plain = JsonlCheckpointSaver(tmp_path)
    _check_stand_ins(kind, make(plain).get_state(CFG).values)

    fresh = JsonlCheckpointSaver(tmp_path)
    graph = make(fresh)
    assert classes <= fresh.allow_graph(graph)
    _check_real(kind, graph.get_state(CFG).values)


def test_with_allowlist_still_takes_names_of_loaded_classes(tmp_path: Path) -> None:
    """LangGraph's strict-mode hand-over, `(module, name)` pairs, allows those classes too."""
    make, start, _ = GRAPHS["dataclass"]
    make(JsonlCheckpointSaver(tmp_path)).invoke(start, CFG)
    fresh = JsonlCheckpointSaver(tmp_path)
    names = {(c.__module__, c.__qualname__) for c in (Item, Corner, Mood)}
    assert fresh.with_allowlist(names) is fresh
    _check_real("dataclass", make(fresh).get_state(CFG).values)


# -- the walk itself -------------------------------------------------------------------------

UserId = NewType("UserId", str)


class Node(BaseModel):
    """Refers to itself: the walk must end."""

    children: list[Node] = []
    payload: Item | None = None


@dataclasses.dataclass
class Linked:
    nxt: Linked | None
    mood: Mood


class Unresolvable(TypedDict):
    ok: Deep
    broken: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821


def test_the_walk_follows_wrappers_containers_and_fields() -> None:
    """Annotated, Optional, unions, containers, NewType, Callable and Literal; TypedDicts are walked,
    not allowed; plain classes and builtins are not allowed."""
    found = classes_in(
        Annotated[dict[str, tuple[Corner, ...]], "meta"],
        Optional[list[set[Mood]]],  # noqa: UP045 - typing.Union is a path of its own
        Union[int, Legacy],  # noqa: UP007
        Callable[[Item], None],
        Literal["a", "b"],
        UserId,
        DictState,
        Path,
    )
    assert found == {Corner, Mood, Legacy, Item, Inner, Deep, Level}


def test_the_walk_ends_on_cycles_and_skips_what_does_not_resolve() -> None:
    """Self-referencing models and dataclasses end; an unresolvable annotation drops only itself."""
    assert classes_in(Node) == {Node, Item, Corner, Mood}
    assert classes_in(Linked) == {Linked, Mood}
    assert classes_in(Unresolvable) == {Deep, Level}


def test_graph_classes_include_subgraphs_and_the_context_schema(tmp_path: Path) -> None:
    """A subgraph's state classes and the context schema's are part of the parent graph's."""

    @dataclasses.dataclass
    class Context:
        mood: Mood

    inner: Any = StateGraph(DataclassState)
    inner.add_node("step", lambda s: {})
    inner.add_edge(START, "step")
    sub = inner.compile()
    outer: Any = StateGraph(DictState, context_schema=Context)
    outer.add_node("sub", sub)
    outer.add_edge(START, "sub")
    found = graph_classes(outer.compile(checkpointer=JsonlCheckpointSaver(tmp_path)))
    assert {Item, Corner, Mood, Inner, Deep, Level, Context} <= found
