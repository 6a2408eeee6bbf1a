"""The session document (`session.json`) as a store document (`SessionStreams.load_doc/save_doc`).

On the `files` store the document is the session folder's `session.json`, written exactly as
`JsonlSessionStore` always wrote it (one framed record, `atomic_write`); on PostgreSQL it is a
document row. Writes stay last-writer-wins, as they always were (the session's writer holds its
lease): `save_session` retries its compare-and-swap on the version it just read until it lands.
"""

from __future__ import annotations

from agent.session.session import ChatSession
from checkpointing.exceptions import CheckpointingError
from checkpointing.store.base import SessionStreams

SESSION_DOC = "session.json"
"""The session document's name among the session's documents."""


def load_session(streams: SessionStreams) -> ChatSession | None:
    """The session document, None when there is none. A damaged one raises `CheckpointingError`
    (`CorruptCheckpointError` naming it when its record does not verify)."""
    doc, _ = streams.load_doc(SESSION_DOC)
    if doc is None:
        return None
    try:
        return ChatSession.from_json(doc)
    except ValueError as err:
        raise CheckpointingError(f"{streams.label.parent / SESSION_DOC}: not a valid session document ({err})") from err


def save_session(streams: SessionStreams, session: ChatSession) -> None:
    """Write the session document whole (last writer wins)."""
    body = session.to_dict()
    while True:
        try:
            _, version = streams.load_doc(SESSION_DOC)
        except CheckpointingError:  # a damaged document is replaced whole, as a rewrite always did
            version = _damaged_version(streams)
        if streams.save_doc(SESSION_DOC, body, version):
            return


def delete_session(streams: SessionStreams) -> None:
    """Remove the session document (the event log stays)."""
    streams.delete_doc(SESSION_DOC)


def _damaged_version(streams: SessionStreams) -> object:
    """The version of a document that does not verify, so a rewrite can replace it: none left
    once it is removed (the next compare-and-swap creates it again)."""
    streams.delete_doc(SESSION_DOC)
    return None
