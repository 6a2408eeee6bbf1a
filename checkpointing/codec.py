"""CheckpointStateCodec: checkpoint values <-> plain JSON, types rebuilt only from an allowlist.

Plain JSON values (str, int within 64 bits, finite float, bool, None, lists, and dicts whose keys
are strings not starting with `$`) are written as they are. Every other value becomes a tagged
object `{"$t": <tag>, "v": <payload>}`:

    tuple, set, frozenset, deque, bytes (base64), datetime, date, time, timedelta, uuid, decimal,
    int (beyond 64 bits), float (NaN / infinity), path, pattern, dict (non-string or `$` keys),
    msg (a LangChain message as its canonical DTO), send, interrupt, command, overwrite,
    delta_snapshot (LangGraph's DeltaChannel snapshot), timeout (Send's TimeoutPolicy),
    exc (an exception: read back as its repr, as LangGraph's own serializer does),
    enum, dataclass, namedtuple, model (pydantic v2), model_v1 (pydantic v1): these carry the
    type's name `"n": "module:qualname"` and their fields, each field encoded by these rules.

Named types are rebuilt only when the name is in this codec's allowlist, which holds classes,
never names to import: LangChain's agent/document types by default, classes registered with
`allow(...)`, classes named by `allow_names(...)` that are already loaded in this process (what
LangGraph hands a saver through `with_allowlist`), and classes this codec has itself encoded in
this process. Anything else reads back as a `StoredObject` stand-in (type name and fields, hashable
like the value it stands for, so it can be a set member or a dict key; stored again, it is written
as that value). A
value of a type the codec cannot describe raises `UnsupportedValueError` while encoding, so a
`put` fails before anything is written. `{"$blob": ..., "size": N}` objects found while decoding
are resolved through the `resolve_blob` callable given to `decode` (the saver's blob store).
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import datetime as dt
import decimal
import enum
import math
import pathlib
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy
from pydantic import BaseModel

from checkpointing.blobs import BLOB_KEY, is_blob_ref
from checkpointing.exceptions import UnsupportedValueError
from checkpointing.messages import dto_to_message, is_canonical_message, message_to_dto
from checkpointing.stand_ins import StoredFields, StoredObject

try:  # pydantic v1 models (pydantic.v1 ships with pydantic 2)
    from pydantic.v1 import BaseModel as BaseModelV1
except ImportError:  # pragma: no cover
    BaseModelV1 = None  # type: ignore[assignment,misc]

TAG = "$t"
BlobResolver = Callable[[dict[str, Any]], Any]
_INT64 = 2**63
_DEFAULT_ALLOWED = (
    ("langchain_core.agents", "AgentAction"),
    ("langchain_core.agents", "AgentActionMessageLog"),
    ("langchain_core.agents", "AgentFinish"),
    ("langchain_core.agents", "AgentStep"),
    ("langchain_core.documents.base", "Document"),
)


def _no_blobs(ref: dict[str, Any]) -> Any:
    raise UnsupportedValueError(f"found blob reference {ref.get(BLOB_KEY)!r} but no blob store to read it")


def type_name(cls: type) -> str:
    """The name a class is stored under: `module:qualname`."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve_loaded(module: str, name: str) -> Any:
    """The object `module.name` when that module is already imported; never imports anything."""
    obj: Any = sys.modules.get(module)
    for part in name.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
    return obj


class CheckpointStateCodec:
    """Encode checkpoint values to JSON and back; the only format that lands on disk."""

    def __init__(self, allowed: Iterable[type] = (), *, learn: bool = True) -> None:
        self._allowed: dict[str, type] = {}
        self.learn = learn
        self.allow_names(_DEFAULT_ALLOWED)
        self.allow(*allowed)

    # -- allowlist ---------------------------------------------------------------------------

    def allow(self, *classes: type) -> None:
        """Allow these classes to be rebuilt from stored data."""
        for cls in classes:
            if not isinstance(cls, type):
                raise UnsupportedValueError(f"allow expects classes, got {cls!r}")
            self._allowed[type_name(cls)] = cls

    def register_model(self, cls: type[Any], name: str | None = None) -> type[Any]:
        """Allow class `cls` (kept for callers of the older API; `name` is ignored)."""
        self.allow(cls)
        return cls

    def allow_names(self, names: Iterable[tuple[str, ...] | type]) -> None:
        """Allow classes named `(module, name)` that this process has already loaded (no import)."""
        for item in names:
            if isinstance(item, type):
                self.allow(item)
                continue
            if len(item) < 2:
                continue
            obj = _resolve_loaded(item[0], ".".join(item[1:]))
            if isinstance(obj, type):
                self.allow(obj)

    def is_allowed(self, name: str) -> bool:
        """Whether the class stored under `name` is rebuilt on decode."""
        return name in self._allowed

    def _named(self, v: Any) -> str:
        cls = type(v)
        name = type_name(cls)
        if self.learn and name not in self._allowed:
            self._allowed[name] = cls
        return name

    # -- encoding ----------------------------------------------------------------------------

    def encode(self, value: Any) -> Any:
        """Return the JSON form of `value`; raises `UnsupportedValueError` for unknown types."""
        return self._enc(value, "value")

    def _enc(self, v: Any, where: str) -> Any:
        t = type(v)
        if t is str or v is None or t is bool:
            return v
        if t is int:
            return v if -_INT64 <= v < _INT64 else {TAG: "int", "v": str(v)}
        if t is float:
            return v if math.isfinite(v) else {TAG: "float", "v": repr(v)}
        if t is list:
            return [self._enc(x, where) for x in v]
        if t is dict:
            return self._enc_dict(v, where)
        return self._enc_other(v, where)

    def _enc_dict(self, v: dict[Any, Any], where: str) -> Any:
        if all(type(k) is str and not k.startswith("$") for k in v):
            return {k: self._enc(x, f"{where}.{k}") for k, x in v.items()}
        pairs = [[self._enc(k, f"{where} key"), self._enc(x, f"{where}[{k!r}]")] for k, x in v.items()]
        return {TAG: "dict", "v": pairs}

    def _fields(self, items: Iterable[tuple[str, Any]], where: str) -> dict[str, Any]:
        return {k: self._enc(x, f"{where}.{k}") for k, x in items}

    def _enc_other(self, v: Any, where: str) -> Any:
        if isinstance(v, BaseMessage) and is_canonical_message(v):
            return {TAG: "msg", "v": message_to_dto(v)}
        if isinstance(v, StoredObject):
            return self._enc_stand_in(v, where)
        if isinstance(v, StoredFields):
            return self._enc_dict(dict(v), where)
        if isinstance(v, _DeltaSnapshot):
            return {TAG: "delta_snapshot", "v": self._enc(v.value, where)}
        if isinstance(v, enum.Enum):
            return {TAG: "enum", "n": self._named(v), "v": self._enc(v.value, where)}
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, int):
            return self._enc(int(v), where)
        if isinstance(v, float):
            return self._enc(float(v), where)
        if isinstance(v, str):
            return str(v)
        if isinstance(v, tuple) and hasattr(v, "_fields") and hasattr(v, "_asdict"):
            return {TAG: "namedtuple", "n": self._named(v), "v": self._fields(v._asdict().items(), where)}
        if isinstance(v, tuple):
            return {TAG: "tuple", "v": [self._enc(x, where) for x in v]}
        if isinstance(v, (set, frozenset)):
            items = [self._enc(x, where) for x in v]
            items.sort(key=lambda x: orjson.dumps(x, option=orjson.OPT_SORT_KEYS))
            return {TAG: "frozenset" if isinstance(v, frozenset) else "set", "v": items}
        if isinstance(v, collections.deque):
            return {TAG: "deque", "v": [self._enc(x, where) for x in v], "max": v.maxlen}
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
        if isinstance(v, pathlib.PurePath):
            return {TAG: "path", "v": str(v)}
        if isinstance(v, re.Pattern):
            return {TAG: "pattern", "v": [self._enc(v.pattern, where), v.flags]}
        if isinstance(v, Send):
            timeout = None if v.timeout is None else self._enc(v.timeout, where)
            return {TAG: "send", "v": {"node": v.node, "arg": self._enc(v.arg, f"{where}.arg"), "timeout": timeout}}
        if isinstance(v, TimeoutPolicy):
            return {
                TAG: "timeout",
                "v": self._fields(((f.name, getattr(v, f.name)) for f in dataclasses.fields(v)), where),
            }
        if isinstance(v, Interrupt):
            schema = v.response_schema if isinstance(v.response_schema, dict) else None
            return {
                TAG: "interrupt",
                "v": {"value": self._enc(v.value, f"{where}.value"), "id": v.id, "schema": self._enc(schema, where)},
            }
        if isinstance(v, Command):
            fields = ("graph", "update", "resume", "goto")
            return {TAG: "command", "v": self._fields(((f, getattr(v, f)) for f in fields), where)}
        if isinstance(v, Overwrite):
            return {TAG: "overwrite", "v": self._enc(v.value, where)}
        if isinstance(v, BaseException):
            return {TAG: "exc", "n": type_name(type(v)), "v": repr(v)}
        return self._enc_object(v, where)

    def _enc_stand_in(self, v: StoredObject, where: str) -> Any:
        """A stand-in is stored as the value it stands for, so a reader allowing its type rebuilds it."""
        if v.kind == "enum":
            return {TAG: "enum", "n": v.type_name, "v": self._enc(v.fields, where)}
        if v.kind not in _NAMED or not isinstance(v.fields, Mapping):
            raise UnsupportedValueError(f"{where}: stand-in of {v.type_name} has unknown kind {v.kind!r}")
        return {TAG: v.kind, "n": v.type_name, "v": self._fields(v.fields.items(), where)}

    def _enc_object(self, v: Any, where: str) -> Any:
        if isinstance(v, BaseModel):
            fields = dict(v.__dict__)
            if v.__pydantic_extra__:
                fields.update(v.__pydantic_extra__)
            out = {TAG: "model", "n": self._named(v), "v": self._fields(fields.items(), where)}
            if set(v.model_fields_set) != set(fields):
                out["set"] = sorted(v.model_fields_set)
            return out
        if BaseModelV1 is not None and isinstance(v, BaseModelV1):
            return {TAG: "model_v1", "n": self._named(v), "v": self._fields(v.__dict__.items(), where)}
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            items = ((f.name, getattr(v, f.name)) for f in dataclasses.fields(v))
            return {TAG: "dataclass", "n": self._named(v), "v": self._fields(items, where)}
        if isinstance(v, BaseMessage):
            return {TAG: "model", "n": self._named(v), "v": self._fields(v.__dict__.items(), where)}
        raise UnsupportedValueError(
            f"{where}: cannot store a value of type {type(v).__module__}.{type(v).__qualname__} in a checkpoint; "
            "use JSON data, LangChain messages, enums, dataclasses or pydantic models"
        )

    # -- decoding ----------------------------------------------------------------------------

    def decode(self, data: Any, resolve_blob: BlobResolver | None = None) -> Any:
        """Rebuild the value `data` (the output of `encode`) describes."""
        return self._dec(data, resolve_blob or _no_blobs)

    def _dec(self, d: Any, rb: BlobResolver) -> Any:
        t = type(d)
        if t is list:
            return [self._dec(x, rb) for x in d]
        if t is not dict:
            return d
        if TAG in d:
            return self._dec_tagged(d, rb)
        if BLOB_KEY in d and is_blob_ref(d):
            return self._dec(rb(d), rb)
        return {k: self._dec(x, rb) for k, x in d.items()}

    def _dec_tagged(self, d: dict[str, Any], rb: BlobResolver) -> Any:
        tag = d[TAG]
        p: Any = d.get("v")
        simple = _SIMPLE.get(tag)
        if simple is not None:
            return simple(p)
        if tag == "msg":
            # Without a blob store (the saver's reads) a DTO holds no references: skip the walk.
            return dto_to_message(p if rb is _no_blobs else _inline_blobs(p, rb))
        if tag == "tuple":
            return tuple(self._dec(x, rb) for x in p)
        if tag == "dict":
            return {_hashable(self._dec(k, rb)): self._dec(x, rb) for k, x in p}
        if tag == "set":
            return {_hashable(self._dec(x, rb)) for x in p}
        if tag == "frozenset":
            return frozenset(_hashable(self._dec(x, rb)) for x in p)
        if tag == "deque":
            return collections.deque((self._dec(x, rb) for x in p), d.get("max"))
        if tag == "pattern":
            return re.compile(self._dec(p[0], rb), p[1])
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
            return Command(**{k: self._dec(x, rb) for k, x in p.items()})
        if tag == "overwrite":
            return Overwrite(self._dec(p, rb))
        if tag == "exc":
            return p
        if tag in _NAMED:
            return self._dec_named(tag, d, rb)
        raise UnsupportedValueError(f"unknown value tag {tag!r} in checkpoint data (written by a newer version?)")

    def _dec_named(self, tag: str, d: dict[str, Any], rb: BlobResolver) -> Any:
        name = str(d.get("n"))
        cls = self._allowed.get(name)
        if tag == "enum":
            value = self._dec(d.get("v"), rb)
            return cls(value) if cls is not None else StoredObject(name, tag, value)
        fields = {k: self._dec(x, rb) for k, x in (d.get("v") or {}).items()}
        if cls is None:
            return StoredObject(name, tag, fields)
        if tag == "namedtuple":
            return cls(**fields)
        if tag == "dataclass":
            obj: Any = object.__new__(cls)
            for k, x in fields.items():
                object.__setattr__(obj, k, x)
            return obj
        if tag == "model_v1":
            return cls.construct(_fields_set=set(fields), **fields)  # type: ignore[attr-defined]
        fields_set = set(d["set"]) if "set" in d else set(fields)
        return cls.model_construct(_fields_set=fields_set, **fields)  # type: ignore[attr-defined]


_NAMED = frozenset({"enum", "namedtuple", "dataclass", "model", "model_v1"})
_SIMPLE: dict[str, Callable[[Any], Any]] = {
    "bytes": base64.b64decode,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta": lambda p: dt.timedelta(days=p[0], seconds=p[1], microseconds=p[2]),
    "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
    "float": float,
    "int": int,
    "path": pathlib.Path,
}


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
    codec's type set, never msgpack or pickle. The saver itself does not use it for its files.
    """

    def __init__(self, codec: CheckpointStateCodec) -> None:
        self.codec = codec

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Encode `obj` as ("json", JSON bytes)."""
        return "json", orjson.dumps(self.codec.encode(obj))

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decode what `dumps_typed` produced; any other type tag is refused."""
        typ, raw = data
        if typ != "json":
            raise UnsupportedValueError(f"refusing serialized data of type {typ!r}: only 'json' is accepted")
        return self.codec.decode(orjson.loads(raw))
