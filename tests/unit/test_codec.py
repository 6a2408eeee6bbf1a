"""CheckpointStateCodec: closed JSON type registry, round trips, refusals."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Command, Interrupt, Overwrite, Send
from pydantic import BaseModel

from checkpointing.codec import CheckpointStateCodec, CodecSerializer, StoredObject
from checkpointing.errors import UnsupportedValueError


class Plan(BaseModel):
    steps: list[str]
    done: bool = False


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
