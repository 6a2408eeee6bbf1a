"""CheckpointStateCodec: closed JSON type registry, round trips, refusals."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any, NamedTuple

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Command, Interrupt, Overwrite, Send
from pydantic import BaseModel

from checkpointing.codec import CheckpointStateCodec, CodecSerializer, StoredObject
from checkpointing.exceptions import UnsupportedValueError


class Plan(BaseModel):
    steps: list[str]
    done: bool = False


@dataclasses.dataclass(frozen=True)
class Cell:
    row: int
    col: int
    tags: tuple[str, ...] = ()


class Shade(enum.Enum):
    DARK = "dark"
    LIGHT = "light"


class Span(NamedTuple):
    start: int
    end: int


VALUES: list[Any] = [
    None, True, 3, -2.5, "text", [1, [2, {"a": None}]], {"k": {"nested": [1]}},
    (1, "a", (2,)), {1, 2, 3}, frozenset({"x"}), b"\x00\xffbytes",
    dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), dt.date(2026, 1, 2), dt.time(1, 2, 3),
    dt.timedelta(days=1, seconds=2), uuid.UUID(int=7), decimal.Decimal("1.10"),
    {1: "int key", (2, 3): "tuple key"}, {"$t": "not a tag", "$blob": "sha256:" + "0" * 64, "size": 1},
    HumanMessage("hi", id="m1"), AIMessage("", tool_calls=[{"id": "c", "name": "t", "args": {"q": 1}}]),
    ToolMessage("out", tool_call_id="c", artifact={"rows": 2}), RemoveMessage(id="m1"),
    Send("node", {"x": [1]}), Interrupt({"question": "ok?"}, id="i1"),
    Command(resume={"i1": "yes"}, goto=[Send("n", 1)], update={"a": 1}),
    Overwrite(["b"]), _DeltaSnapshot([HumanMessage("s", id="s1")]),
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_every_supported_type_round_trips_through_json(value: Any) -> None:
    """Each supported value encodes to plain JSON and decodes to an equal value of the same type."""
    codec = CheckpointStateCodec()
    enc = codec.encode(value)
    again = codec.decode(json.loads(json.dumps(enc, allow_nan=False)))
    assert again == value
    assert type(again) is type(value)


def test_nan_and_infinity_round_trip() -> None:
    """Non-finite floats survive (as tagged strings) while the JSON stays standard."""
    codec = CheckpointStateCodec()
    enc = codec.encode([float("inf"), float("-inf")])
    json.dumps(enc, allow_nan=False)
    assert codec.decode(enc) == [float("inf"), float("-inf")]


def test_unknown_class_reads_back_as_a_stand_in_and_allowed_class_is_rebuilt() -> None:
    """A class not on the reader's allowlist comes back as an inspectable StoredObject, never imported."""
    data = CheckpointStateCodec().encode({"plan": Plan(steps=["a"], done=True)})
    stranger = CheckpointStateCodec(learn=False).decode(data)
    assert stranger["plan"] == StoredObject(f"{__name__}:Plan", "model", {"steps": ["a"], "done": True})
    allowed = CheckpointStateCodec([Plan]).decode(data)
    assert allowed == {"plan": Plan(steps=["a"], done=True)}


def test_unsupported_type_names_where_it_was_found() -> None:
    """An unknown object raises UnsupportedValueError pointing at its place in the value."""
    with pytest.raises(UnsupportedValueError, match=r"value\.inner.*object"):
        CheckpointStateCodec().encode({"inner": [1, object()]})


def test_decode_never_builds_types_named_in_the_data() -> None:
    """A tag or class name read from disk that is not in the registry is refused, never imported."""
    codec = CheckpointStateCodec()
    with pytest.raises(UnsupportedValueError):
        codec.decode({"$t": "os.system", "v": "echo hi"})
    for kind in ("model", "dataclass", "enum", "namedtuple", "model_v1"):
        got = codec.decode({"$t": kind, "n": "subprocess:Popen", "v": {"args": ["rm"]}})
        assert isinstance(got, StoredObject) and got.type_name == "subprocess:Popen"
    lc_payload = {"lc": 1, "type": "constructor", "id": ["os", "environ"], "kwargs": {}}
    assert codec.decode(lc_payload) == lc_payload


def test_serde_attribute_writes_json_and_refuses_other_formats() -> None:
    """The saver's serde speaks JSON only: msgpack or pickle payloads are refused."""
    serde = CodecSerializer(CheckpointStateCodec())
    typ, raw = serde.dumps_typed({"m": HumanMessage("x", id="1")})
    assert typ == "json" and json.loads(raw)
    assert serde.loads_typed((typ, raw)) == {"m": HumanMessage("x", id="1")}
    for other in ("msgpack", "pickle"):
        with pytest.raises(UnsupportedValueError, match="only 'json'"):
            serde.loads_typed((other, b"\x80"))


def _hashable_kinds() -> dict[str, Any]:
    return {
        "cells": {Cell(0, 1, ("a",)), Cell(2, 3)},
        "frozen": frozenset({Shade.DARK, Span(1, 4)}),
        "by_key": {Cell(5, 6): "cell", Shade.LIGHT: "shade", Span(0, 2): "span"},
        "nested": {(Cell(7, 8), Shade.DARK)},
    }


def test_stand_ins_can_be_set_members_and_dict_keys() -> None:
    """A reader without the allowlist gets sets and dict keys of stand-ins, fields readable by name."""
    data = json.loads(json.dumps(CheckpointStateCodec().encode(_hashable_kinds())))
    got = CheckpointStateCodec(learn=False).decode(data)

    def cell(row: int, col: int, tags: tuple[str, ...] = ()) -> StoredObject:
        return StoredObject(f"{__name__}:Cell", "dataclass", {"row": row, "col": col, "tags": tags})

    shade = StoredObject(f"{__name__}:Shade", "enum", "dark")
    span = StoredObject(f"{__name__}:Span", "namedtuple", {"start": 1, "end": 4})
    assert got["cells"] == {cell(0, 1, ("a",)), cell(2, 3)}
    assert got["frozen"] == frozenset({shade, span}) and type(got["frozen"]) is frozenset
    assert got["by_key"][cell(5, 6)] == "cell"
    assert got["by_key"][StoredObject(f"{__name__}:Shade", "enum", "light")] == "shade"
    assert got["by_key"][StoredObject(f"{__name__}:Span", "namedtuple", {"start": 0, "end": 2})] == "span"
    assert got["nested"] == {(cell(7, 8), shade)}
    member = next(iter(got["cells"] - {cell(2, 3)}))
    assert (member.type_name, member.kind, member.fields["tags"]) == (f"{__name__}:Cell", "dataclass", ("a",))
    assert dict(member.fields) == {"row": 0, "col": 1, "tags": ("a",)}
    with pytest.raises(TypeError):
        member.fields["row"] = 9  # type: ignore[index]


def test_sets_and_dict_keys_of_allowed_types_rebuild_the_real_types() -> None:
    """With the allowlist, the same data reads back as the original values of the original types."""
    data = json.loads(json.dumps(CheckpointStateCodec().encode(_hashable_kinds())))
    got = CheckpointStateCodec([Cell, Shade, Span], learn=False).decode(data)
    assert got == _hashable_kinds()
    assert {type(x) for x in got["cells"]} == {Cell} and {type(k) for k in got["by_key"]} == {Cell, Shade, Span}


def test_a_stand_in_stored_again_is_rebuilt_by_a_reader_that_allows_its_type() -> None:
    """A process without the allowlist that writes its stand-ins back loses nothing for one with it."""
    stranger = CheckpointStateCodec(learn=False)
    stand_ins = stranger.decode(json.loads(json.dumps(CheckpointStateCodec().encode(_hashable_kinds()))))
    again = json.loads(json.dumps(stranger.encode(stand_ins)))
    assert stranger.decode(again) == stand_ins
    assert CheckpointStateCodec([Cell, Shade, Span], learn=False).decode(again) == _hashable_kinds()
