"""ToolResultStore and the read_tool_result tool: exact characters back, bounds checked, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.errors import BackendUnavailable, DataCorrupt, ToolError
from agent.core.tool_spec import ToolContext
from agent.tools.read_tool_result import READ_TOOL_RESULT, parse_read_output
from agent.tools.tool_results import ToolResultStore, make_entry
from checkpointing.blobs import BlobStore

UNICODE = "héllo 世界 🌍🚀 e\u0301 \n\tend¶" * 300  # accents, CJK, astral emoji, combining mark, controls


def ctx_with(store: ToolResultStore | None) -> ToolContext:
    """A tool context holding `store`."""
    return ToolContext(session_id="s1", tenant_id="t1", run_id="r1", tool_results=store)


def read(store: ToolResultStore, call_id: str, offset: int = 0, limit: int = 2000) -> tuple[dict[str, str], str]:
    """Invoke the tool as the acting node would and parse its output."""
    out = READ_TOOL_RESULT.invoke(ctx_with(store), {"tool_call_id": call_id, "offset": offset, "limit": limit})
    return parse_read_output(out)


def test_tool_spec_is_read_only_with_the_seed_arguments() -> None:
    """The model sees `read_tool_result(tool_call_id, offset=0, limit=2000)`; re-running it is safe."""
    schema = READ_TOOL_RESULT.json_schema()
    assert READ_TOOL_RESULT.name == "read_tool_result" and READ_TOOL_RESULT.effect == "read_only"
    assert schema["required"] == ["tool_call_id"]
    assert schema["properties"]["offset"]["default"] == 0 and schema["properties"]["limit"]["default"] == 2000


def test_ranges_return_exact_unicode_characters() -> None:
    """Any range of a unicode result comes back character for character, with size and next offset."""
    store = ToolResultStore.from_entries([make_entry("call_1", "fetch", UNICODE, None, 1 << 20)])
    for offset, limit in [(0, 1), (0, 17), (5, 333), (1234, 2000), (len(UNICODE) - 3, 50)]:
        header, text = read(store, "call_1", offset, limit)
        end = min(len(UNICODE), offset + limit)
        assert text == UNICODE[offset:end]
        assert header["total"] == str(len(UNICODE)) and header["end"] == str(end)
        assert header["next_offset"] == (str(end) if end < len(UNICODE) else "none")


def test_paging_with_next_offset_rebuilds_the_original() -> None:
    """Following next_offset until `none` yields exactly the original result."""
    store = ToolResultStore.from_entries([make_entry("call_1", "fetch", UNICODE, None, 1 << 20)])
    pieces, offset = [], 0
    while True:
        header, text = read(store, "call_1", offset, 777)
        pieces.append(text)
        if header["next_offset"] == "none":
            break
        offset = int(header["next_offset"])
    assert "".join(pieces) == UNICODE


def test_slice_starting_with_newline_is_not_confused_with_the_header() -> None:
    """Only the first newline separates header and data, so leading newlines survive."""
    content = "\n\nfirst\r\nsecond\n"
    store = ToolResultStore.from_entries([make_entry("c", "t", content, None, 1 << 20)])
    assert read(store, "c", 0, 100)[1] == content
    assert read(store, "c", 1, 3)[1] == content[1:4]


def test_large_result_is_blob_backed_and_read_back_after_restart(tmp_path: Path) -> None:
    """A result over inline_max lives in a blob; a store rebuilt from the entries reads it exactly."""
    entry = make_entry("call_big", "scan", UNICODE, BlobStore(tmp_path), inline_max=1024)
    assert "content" not in entry and entry["blob"]["size"] == len(UNICODE.encode())
    assert entry["size"] == len(UNICODE) and UNICODE.startswith(entry["preview"])
    assert BlobStore(tmp_path).exists(entry["blob"]["$blob"])
    small = make_entry("call_small", "echo", "tiny", BlobStore(tmp_path), inline_max=1024)
    assert small["content"] == "tiny" and "blob" not in small
    store = ToolResultStore.from_entries([dict(entry), dict(small)], BlobStore(tmp_path))
    assert read(store, "call_big", 4000, 1500)[1] == UNICODE[4000:5500]
    assert read(store, "call_small")[1] == "tiny"


def test_missing_blob_is_a_storage_error_naming_the_volume(tmp_path: Path) -> None:
    """If the blob volume is not mounted, reading says so instead of returning nothing."""
    entry = make_entry("call_big", "scan", UNICODE, BlobStore(tmp_path / "a"), inline_max=10)
    store = ToolResultStore.from_entries([entry], BlobStore(tmp_path / "b"))
    with pytest.raises(BackendUnavailable, match="must be mounted"):
        store.read("call_big")


def test_unknown_id_error_says_how_to_find_ids() -> None:
    """An unknown call id names the call_id text to look for and the ids that exist."""
    store = ToolResultStore.from_entries([make_entry("call_7", "t", "x", None, 100)])
    with pytest.raises(ToolError, match="call_id=") as err:
        store.read("call_nope")
    assert "call_7" in str(err.value)


@pytest.mark.parametrize(
    ("offset", "limit", "match"),
    [
        (-1, 10, "offset must be"),
        (11, 10, "past the end"),
        (0, 0, "limit must be"),
        (0, 20_001, "limit must be"),
    ],
)
def test_bad_ranges_are_refused(offset: int, limit: int, match: str) -> None:
    """Negative or too-large offsets and non-positive or huge limits give a clear ToolError."""
    store = ToolResultStore.from_entries([make_entry("c", "t", "0123456789", None, 100)])
    with pytest.raises(ToolError, match=match):
        read(store, "c", offset, limit)


def test_offset_at_end_returns_empty_final_page() -> None:
    """Reading at offset == size is allowed and reports the end."""
    store = ToolResultStore.from_entries([make_entry("c", "t", "0123456789", None, 100)])
    header, text = read(store, "c", 10, 5)
    assert text == "" and header["next_offset"] == "none"


def test_no_store_in_context_is_a_tool_error() -> None:
    """Without archived results the tool tells the model there is nothing to read."""
    with pytest.raises(ToolError, match="nothing to read"):
        READ_TOOL_RESULT.invoke(ctx_with(None), {"tool_call_id": "c"})


def test_later_entry_wins_and_malformed_entries_are_refused() -> None:
    """Entries replay in order (last one per id wins); an entry with neither content nor blob fails."""
    store = ToolResultStore.from_entries(
        [make_entry("c", "t", "old", None, 100), make_entry("c", "t", "new", None, 100)]
    )
    assert store.get("c") == "new" and store.ids() == ["c"]
    with pytest.raises(DataCorrupt, match="exactly one of content / blob"):
        ToolResultStore.from_entries([{"tool_call_id": "c", "tool_name": "t", "size": 3}])
    with pytest.raises(DataCorrupt, match="no tool_call_id"):
        ToolResultStore.from_entries([{"content": "x"}])
