"""The session document (`session.json`) over each store backend: one test body, `files` and
`postgres`. Every read is over a new store object (a fresh process's view)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.session.session import ChatSession
from agent.session.stores.document import SESSION_DOC, delete_session, load_session, save_session
from agent.session.stores.jsonl import JsonlSessionStore
from checkpointing.exceptions import CorruptCheckpointError
from checkpointing.layout import session_dir, session_file
from checkpointing.records import encode_record
from checkpointing.store.base import SessionStreams
from tests.support.savers import SaverKit

TENANT = "acme"


def streams(kit: SaverKit, tenant: str = TENANT, session: str = "s1") -> SessionStreams:
    return kit.store().session(tenant, session, "always")


def chat(tenant: str = TENANT, session: str = "s1", **kw: object) -> ChatSession:
    fields: dict[str, object] = {"agent_id": "a1", "user_id": "u1", **kw}
    return ChatSession(session_id=session, tenant_id=tenant, **fields)  # type: ignore[arg-type]


def test_a_session_document_is_saved_read_updated_and_deleted(saver_kit: SaverKit) -> None:
    assert load_session(streams(saver_kit)) is None
    save_session(streams(saver_kit), chat(loop_count=1))
    first = load_session(streams(saver_kit))
    assert first is not None and first.loop_count == 1 and first.user_id == "u1"

    first.loop_count = 2
    first.context = {"k": "v"}
    save_session(streams(saver_kit), first)
    second = load_session(streams(saver_kit))
    assert second is not None and second.loop_count == 2 and second.context == {"k": "v"}

    delete_session(streams(saver_kit))
    assert load_session(streams(saver_kit)) is None
    delete_session(streams(saver_kit))  # deleting what is gone is no error


def test_tenants_sharing_a_session_id_are_isolated(saver_kit: SaverKit) -> None:
    save_session(streams(saver_kit, "acme"), chat("acme", loop_count=1))
    save_session(streams(saver_kit, "other"), chat("other", loop_count=7))
    acme, other = load_session(streams(saver_kit, "acme")), load_session(streams(saver_kit, "other"))
    assert acme is not None and (acme.tenant_id, acme.loop_count) == ("acme", 1)
    assert other is not None and (other.tenant_id, other.loop_count) == ("other", 7)
    delete_session(streams(saver_kit, "acme"))
    assert load_session(streams(saver_kit, "other")) is not None


def test_a_damaged_document_is_refused_as_on_files(saver_kit: SaverKit) -> None:
    save_session(streams(saver_kit), chat(agent_id="agent-x"))
    if saver_kit.kind == "files":
        path = session_file(session_dir(saver_kit.base, TENANT, "s1"))
        path.write_bytes(path.read_bytes().replace(b"agent-x", b"agent-y"))
    else:
        saver_kit.sql(
            "UPDATE {s}.jsonl_documents SET body ="
            " convert_to(replace(convert_from(body, 'UTF8'), 'agent-x', 'agent-y'), 'UTF8')"
            " WHERE tenant = %s AND thread = %s AND name = %s",
            (TENANT, "s1", SESSION_DOC),
        )
    with pytest.raises(CorruptCheckpointError) as info:
        load_session(streams(saver_kit))
    assert "session.json" in str(info.value)
    save_session(streams(saver_kit), chat(agent_id="agent-z"))  # a rewrite replaces it whole
    again = load_session(streams(saver_kit))
    assert again is not None and again.agent_id == "agent-z"


def test_on_files_the_session_file_is_byte_for_byte_what_the_store_always_wrote(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    session = chat(loop_count=3)
    store.put(session)
    path = session_file(session_dir(tmp_path, TENANT, "s1"))
    assert path.read_bytes() == encode_record(session.to_dict())
    got = JsonlSessionStore(tmp_path).get(TENANT, "s1")
    assert got is not None and got.loop_count == 3
    store.delete(TENANT, "s1")
    assert not path.exists()
