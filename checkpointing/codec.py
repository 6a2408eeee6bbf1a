"""CheckpointStateCodec: checkpoint values <-> plain JSON, over a closed set of types.

Plain JSON values (str, int, finite float, bool, None, lists, and dicts whose keys are strings
not starting with `$`) are written as they are. Every other supported value becomes a tagged
object `{"$t": <tag>, "v": <payload>}`:

    tuple, set, frozenset, bytes (base64), datetime, date, time, timedelta, uuid, decimal,
    float (NaN / infinity), dict (non-string or `$`-prefixed keys, as key/value pairs),
    msg (a LangChain message as its canonical DTO), send, interrupt, command, overwrite,
    delta_snapshot (LangGraph's DeltaChannel snapshot), timeout (Send's TimeoutPolicy),
    model (a pydantic model registered with `register_model`, by its registered name).

Decoding accepts only these tags: nothing is ever imported or built from a name read from data.
A value of any other type raises `UnsupportedValueError` while encoding, so a `put` fails before
anything is written. A `{"$blob": ..., "size": N}` object found while decoding is resolved through
the `resolve_blob` callable given to `decode` (the saver's blob store).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import math
import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy
from pydantic import BaseModel

from checkpointing.blobs import BLOB_KEY, is_blob_ref
from checkpointing.errors import UnsupportedValueError
from checkpointing.messages import dto_to_message, message_to_dto

TAG = "$t"
BlobResolver = Callable[[dict[str, Any]], Any]


def _no_blobs(ref: dict[str, Any]) -> Any:
    raise UnsupportedValueError(f"found blob reference {ref.get(BLOB_KEY)!r} but no blob store to read it")


class CheckpointStateCodec:
    """Encode checkpoint values to JSON and back; the only format that lands on disk."""

    def __init__(self) -> None:
        self._models: dict[str, type[BaseModel]] = {}
        self._model_names: dict[type[BaseModel], str] = {}

    def register_model(self, cls: type[BaseModel], name: str | None = None) -> type[BaseModel]:
        """Allow pydantic model `cls` in checkpoints under `name` (default: module.qualname).

        The name is only a key into this registry: decoding never imports anything.
        Usable as a decorator.
        """
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise UnsupportedValueError(f"register_model expects a pydantic model class, got {cls!r}")
        key = name or f"{cls.__module__}.{cls.__qualname__}"
        self._models[key] = cls
        self._model_names[cls] = key
        return cls

    # -- encoding ----------------------------------------------------------------------------

    def encode(self, value: Any) -> Any:
        """Return the JSON form of `value`; raises `UnsupportedValueError` for unknown types."""
        return self._enc(value, "value")

    def _enc(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return v if math.isfinite(v) else {TAG: "float", "v": repr(v)}
        if isinstance(v, list):
            return [self._enc(x, f"{where}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, dict):
            return self._enc_dict(v, where)
        return self._enc_other(v, where)

    def _enc_dict(self, v: dict[Any, Any], where: str) -> Any:
        if all(isinstance(k, str) and not k.startswith("$") for k in v):
            return {k: self._enc(x, f"{where}.{k}") for k, x in v.items()}
        pairs = [[self._enc(k, f"{where} key"), self._enc(x, f"{where}[{k!r}]")] for k, x in v.items()]
        return {TAG: "dict", "v": pairs}

    def _enc_other(self, v: Any, where: str) -> Any:
        if isinstance(v, BaseMessage):
            return {TAG: "msg", "v": message_to_dto(v)}
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return {TAG: "tuple", "v": [self._enc(x, where) for x in v]}
        if isinstance(v, _DeltaSnapshot):
            return {TAG: "delta_snapshot", "v": self._enc(v.value, where)}
        if isinstance(v, (set, frozenset)):
            items = [self._enc(x, where) for x in v]
            items.sort(key=lambda x: json.dumps(x, sort_keys=True))
            return {TAG: "frozenset" if isinstance(v, frozenset) else "set", "v": items}
        if isinstance(v, (bytes, bytearray)):
            return {TAG: "bytes", "v": base64.b64encode(bytes(v)).decode("ascii")}
        if isinstance(v, dt.datetime):
            return {TAG: "datetime", "v": v.isoformat()}
        if isinstance(v, dt.date):
            return {TAG: "date", "v": v.isoformat()}
        if isinstance(v, dt.time):
            return {TAG: "time", "v": v.isoformat()}
        if isinstance(v, dt.timedelta):
            return {TAG: "timedelta", "v": [v.days, v.seconds, v.microseconds]}
        if isinstance(v, uuid.UUID):
            return {TAG: "uuid", "v": str(v)}
        if isinstance(v, decimal.Decimal):
            return {TAG: "decimal", "v": str(v)}
        if isinstance(v, Send):
            timeout = None if v.timeout is None else self._enc(v.timeout, where)
            return {TAG: "send", "v": {"node": v.node, "arg": self._enc(v.arg, f"{where}.arg"), "timeout": timeout}}
        if isinstance(v, TimeoutPolicy):
            fields = {f.name: self._enc(getattr(v, f.name), where) for f in dataclasses.fields(v)}
            return {TAG: "timeout", "v": fields}
        if isinstance(v, Interrupt):
            schema = v.response_schema if isinstance(v.response_schema, dict) else None
            return {
                TAG: "interrupt",
                "v": {"value": self._enc(v.value, f"{where}.value"), "id": v.id, "schema": self._enc(schema, where)},
            }
        if isinstance(v, Command):
            return {
                TAG: "command",
                "v": {
                    "graph": v.graph,
                    "update": self._enc(v.update, f"{where}.update"),
                    "resume": self._enc(v.resume, f"{where}.resume"),
                    "goto": self._enc(v.goto, f"{where}.goto"),
                },
            }
        if isinstance(v, Overwrite):
            return {TAG: "overwrite", "v": self._enc(v.value, where)}
        if isinstance(v, BaseModel):
            name = self._model_names.get(type(v))
            if name is None:
                raise UnsupportedValueError(
                    f"{where}: pydantic model {type(v).__qualname__} is not registered; "
                    "call codec.register_model(cls) (or saver.codec.register_model) before saving it"
                )
            return {TAG: "model", "n": name, "v": v.model_dump(mode="json")}
        raise UnsupportedValueError(
            f"{where}: cannot store a value of type {type(v).__module__}.{type(v).__qualname__} in a checkpoint; "
            "use JSON data, LangChain messages or a registered pydantic model"
        )

    # -- decoding ----------------------------------------------------------------------------

    def decode(self, data: Any, resolve_blob: BlobResolver | None = None) -> Any:
        """Rebuild the value `data` (the output of `encode`) describes."""
        return self._dec(data, resolve_blob or _no_blobs)

    def _dec(self, d: Any, rb: BlobResolver) -> Any:
        if isinstance(d, list):
            return [self._dec(x, rb) for x in d]
        if not isinstance(d, dict):
            return d
        if TAG in d:
            return self._dec_tagged(d, rb)
        if BLOB_KEY in d and is_blob_ref(d):
            return self._dec(rb(d), rb)
        return {k: self._dec(x, rb) for k, x in d.items()}

    def _dec_tagged(self, d: dict[str, Any], rb: BlobResolver) -> Any:
        tag = d[TAG]
        p: Any = d.get("v")
        if tag == "msg":
            return dto_to_message(_inline_blobs(p, rb))
        if tag == "tuple":
            return tuple(self._dec(x, rb) for x in p)
        if tag == "dict":
            return {_hashable(self._dec(k, rb)): self._dec(x, rb) for k, x in p}
        if tag == "set":
            return {_hashable(self._dec(x, rb)) for x in p}
        if tag == "frozenset":
            return frozenset(_hashable(self._dec(x, rb)) for x in p)
        if tag == "bytes":
            return base64.b64decode(p)
        if tag == "datetime":
            return dt.datetime.fromisoformat(p)
        if tag == "date":
            return dt.date.fromisoformat(p)
        if tag == "time":
            return dt.time.fromisoformat(p)
        if tag == "timedelta":
            return dt.timedelta(days=p[0], seconds=p[1], microseconds=p[2])
        if tag == "uuid":
            return uuid.UUID(p)
        if tag == "decimal":
            return decimal.Decimal(p)
        if tag == "float":
            return float(p)
        if tag == "delta_snapshot":
            return _DeltaSnapshot(self._dec(p, rb))
        if tag == "send":
            timeout = None if p.get("timeout") is None else self._dec(p["timeout"], rb)
            return Send(p["node"], self._dec(p["arg"], rb), timeout=timeout)
        if tag == "timeout":
            return TimeoutPolicy(**{k: self._dec(x, rb) for k, x in p.items()})
        if tag == "interrupt":
            return Interrupt(value=self._dec(p["value"], rb), id=p["id"], response_schema=p.get("schema"))
        if tag == "command":
            return Command(
                graph=p.get("graph"),
                update=self._dec(p.get("update"), rb),
                resume=self._dec(p.get("resume"), rb),
                goto=self._dec(p.get("goto"), rb),
            )
        if tag == "overwrite":
            return Overwrite(self._dec(p, rb))
        if tag == "model":
            cls = self._models.get(d.get("n", ""))
            if cls is None:
                raise UnsupportedValueError(
                    f"checkpoint holds pydantic model {d.get('n')!r}, which is not registered in this process; "
                    "register it with codec.register_model before loading"
                )
            return cls.model_validate(p)
        raise UnsupportedValueError(f"unknown value tag {tag!r} in checkpoint data (written by a newer version?)")


def _inline_blobs(d: Any, rb: BlobResolver) -> Any:
    """Plain JSON `d` with blob references replaced by the JSON they hold."""
    if isinstance(d, list):
        return [_inline_blobs(x, rb) for x in d]
    if isinstance(d, dict):
        if BLOB_KEY in d and is_blob_ref(d):
            return _inline_blobs(rb(d), rb)
        return {k: _inline_blobs(x, rb) for k, x in d.items()}
    return d


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        raise UnsupportedValueError("a dict cannot be a set member or a dict key")
    return v


class CodecSerializer:
    """LangGraph `SerializerProtocol` over the codec, set as the saver's `serde`.

    LangGraph code that reaches for `checkpointer.serde` gets JSON (type tag "json") in the
    closed type set, never msgpack or pickle. The saver itself does not use it for its files.
    """

    def __init__(self, codec: CheckpointStateCodec) -> None:
        self.codec = codec

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Encode `obj` as ("json", canonical JSON bytes)."""
        return "json", json.dumps(self.codec.encode(obj), sort_keys=True, separators=(",", ":")).encode()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decode what `dumps_typed` produced; any other type tag is refused."""
        typ, raw = data
        if typ != "json":
            raise UnsupportedValueError(f"refusing serialized data of type {typ!r}: only 'json' is accepted")
        return self.codec.decode(json.loads(raw))
