"""The runtime's exception tree. Every message says what to do next.

AgentrtError                      exit  meaning
 ├── UsageError                     2   the caller's config or input is wrong (their fix)
 │    ├── ConfigError                   a bad config file, setting or environment override
 │    └── InputError                    a bad argument, id or text
 ├── NotFound                       3   no such thing is visible to this tenant/user
 │    ├── SessionNotFound
 │    ├── ApprovalNotFound              a decision names an approval the session never asked for
 │    └── ToolResultNotFound         (UnknownToolResult is also a ToolError)
 ├── Conflict                       4   the thing exists but cannot do this now
 │    ├── SessionError                  e.g. waiting for a human decision, unfinished run
 │    │    ├── SessionNotActive         PAUSED / ENDED / EXPIRED / max loops reached
 │    │    │    └── LifecycleError      a status change the lifecycle table forbids
 │    │    └── ApprovalNotPending       the approval a decision names is no longer pending
 │    ├── SessionExists                 a new session was asked for with an id already taken
 │    └── LeaseHeld                     another process holds the session lease
 ├── RecoveryBlocked                5   resuming would run changed code/tools against old state
 ├── BackendUnavailable             6   Redis, SQL or the disk failed; the original error is the cause
 ├── ModelCallFailed                7   the model failed or returned something the runtime cannot use
 ├── DataCorrupt                    8   a stored record or blob is damaged
 └── ToolError                      1   a tool failed or was refused (normally reported to the model)

`AgentrtError`, `BackendUnavailable` and `ModelCallFailed` are the older names of `AgentrtError`,
`BackendUnavailable` and `ModelCallFailed`. The checkpointing package keeps its own root
(`CheckpointingError`, so it stays usable alone, and its messages name no agentrt command);
`as_agentrt_error` maps it (adding agentrt's next step, e.g. `agentrt doctor`), and the errors
of the libraries below us (Redis, SQLAlchemy, the OpenAI client), to this tree at the CLI's
boundary. Any other exception is a bug: exit 70.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import PurePath
from typing import Any

from checkpointing.exceptions import (
    BlobError,
    CheckpointingError,
    CorruptRecordError,
    DocumentMismatch,
    InvalidIdError,
    OldFormatError,
    StaleFencingTokenError,
    StoreUnavailableError,
    UnknownSchemaError,
    UnsupportedValueError,
)
from checkpointing.ids import SHOWN_CHARS, shown

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BUG = 70
EXIT_INTERRUPTED = 130


class AgentrtError(Exception):
    """Root of every error agentrt raises on purpose."""

    exit_code = 1


class UsageError(AgentrtError, ValueError):
    """The caller's configuration or input is wrong."""

    exit_code = 2


class ConfigError(UsageError):
    """Bad configuration (a file, a setting, an environment override) or bad user input."""


class InputError(UsageError):
    """A bad argument, id or text given to a command or API call."""


class NotFound(AgentrtError, KeyError):
    """Nothing with this id is visible to this tenant/user."""

    exit_code = 3

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class SessionNotFound(NotFound):
    """No session with this id is visible to this tenant/user."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "session not found"


class ApprovalNotFound(NotFound):
    """A decision names an approval id the session never asked for (one it asked and that was
    answered is `ApprovalNotPending`). Raised before anything is written: the session is unchanged."""


class ToolResultNotFound(NotFound):
    """No archived tool result has this call id (also a ToolError: the model reads it as one)."""


class Conflict(AgentrtError):
    """The target exists but its current state does not allow this action."""

    exit_code = 4


class SessionError(Conflict):
    """The session cannot do what was asked in its current state."""


class SessionNotActive(SessionError):
    """The session is PAUSED, ENDED, EXPIRED or out of loops."""


class SessionExists(Conflict):
    """A new session was asked for with an id the tenant already has."""


class AssistantNotFound(NotFound):
    """No assistant with this id is visible to this tenant (`agentrt serve`)."""


class AssistantConflict(Conflict):
    """An assistant exists already under this id, or is the server's own (it cannot change)."""


class LifecycleError(SessionNotActive):
    """A session or run status change that the lifecycle table (`agent.session.lifecycle`) forbids."""


class ApprovalNotPending(SessionError):
    """A decision names an approval that is no longer pending (answered, or the run moved on).

    Raised under the session lease before anything is written: the session is unchanged.
    `answered` is True when the approval was acted on (its tool call reached the journal) before the
    run stopped, so resuming without a decision continues it.
    """

    def __init__(self, message: str, answered: bool = False) -> None:
        super().__init__(message)
        self.answered = answered


class LeaseHeld(Conflict):
    """Another owner holds the session lease."""

    def __init__(self, session_id: str, holder: str, expires_at: float | None) -> None:
        self.session_id = session_id
        self.holder = holder
        self.expires_at = expires_at
        when = datetime.fromtimestamp(expires_at, UTC).isoformat(timespec="seconds") if expires_at is not None else "?"
        super().__init__(
            f"session {session_id} is held by {holder} (lease expires at {when}); "
            "wait for it to finish or expire, then resume"
        )


class RecoveryBlocked(AgentrtError, DocumentMismatch):
    """Recovery refused to continue: state and code/tools/config no longer agree."""

    exit_code = 5

    def __init__(self, step: str, reason: str, expected: Any = None, found: Any = None) -> None:
        DocumentMismatch.__init__(self, step, reason, expected, found)
        if step in ("validate_schema", "validate_graph", "validate_surface"):
            hint = "fix the cause, or re-pin explicitly with `agentrt resume ID --accept-changes`"
        else:
            hint = "restore the damaged or missing data from a backup; `agentrt doctor ID` shows what is wrong"
        self.args = (
            f"RECOVERY_BLOCKED at {step}: {reason} (expected {expected!r}, found {found!r}). "
            f"State was left untouched; {hint}.",
        )


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped a run; recorded as INTERRUPTED. The message names the session and
    what to do next (exit 130, as for any interrupt)."""

    def __init__(self, session_id: str, started: bool, pending: bool | None = None) -> None:
        self.session_id = session_id
        sid = quote_id(session_id)
        if started if pending is None else pending:
            hint = f"continue it with `agentrt resume {sid}`"
        elif started:
            hint = f'nothing of it is left to run: send the next turn with `agentrt run --session {sid} "..."`'
        else:
            hint = (
                f"its turn had not started: run it again with `agentrt resume {sid}`, "
                f'or send a new one with `agentrt run --session {sid} "..."`'
            )
        super().__init__(f"run of session {sid} interrupted; {hint}")


class BackendUnavailable(AgentrtError):
    """A storage backend (Redis, SQL, the disk) failed or cannot be reached."""

    exit_code = 6


class ModelCallFailed(AgentrtError):
    """The chat model failed or returned something the runtime cannot use."""

    exit_code = 7


class DataCorrupt(AgentrtError):
    """A stored record, document or blob is damaged; nothing was changed."""

    exit_code = 8


class ToolError(AgentrtError):
    """A tool call failed or was refused."""

    exit_code = 1


class UnknownToolResult(ToolResultNotFound, ToolError):
    """`read_tool_result` / `agentrt tool-result` with a call id that was never archived."""


def quote_id(value: object) -> str:
    """An id as it may be echoed in a message: as is when plain and short, else as `shown` writes it
    (quoted, escaped, cut), so no terminal escape, newline or other control character of a hostile
    id reaches the screen, and a long one gives a short message."""
    text = str(value)
    plain = text.isprintable() and text.strip() == text and all(c.isascii() or c.isalnum() for c in text)
    return text if plain and 0 < len(text) <= SHOWN_CHARS else shown(text)


def exit_code(err: BaseException) -> int:
    """The documented exit status for an error (the table of docs/reference/exit-codes.md)."""
    mapped = as_agentrt_error(err)
    return mapped.exit_code if mapped is not None else EXIT_BUG


def as_agentrt_error(err: BaseException) -> AgentrtError | None:
    """`err` as an AgentrtError (itself, or a mapped copy with `err` as cause); None for a bug."""
    if isinstance(err, AgentrtError):
        return err
    mapped = _map_checkpointing(err) if isinstance(err, CheckpointingError) else _map_library(err)
    if mapped is not None:
        mapped.__cause__ = err
    return mapped


def _map_checkpointing(err: CheckpointingError) -> AgentrtError:
    # The checkpointing package says what is wrong in a library's words; agentrt's next step is added here.
    if isinstance(err, OldFormatError):
        return DataCorrupt(
            f"{err.path}:{err.line}: written in an older agentrt on-disk format (records framed with a trailing "
            "_crc); this version reads format 2 only. Finish the session with the agentrt that wrote it "
            "or start a new session; nothing was changed on disk."
        )
    if isinstance(err, CorruptRecordError):
        return DataCorrupt(f"{err.path}:{err.line}: corrupt record ({err.reason}); {_corrupt_next_step(err.path)}")
    if isinstance(err, UnknownSchemaError):
        return DataCorrupt(
            f"{err} Finish or export the session with the agentrt that wrote it, or start a new session."
        )
    if isinstance(err, BlobError):
        return DataCorrupt(str(err))
    if isinstance(err, StoreUnavailableError):
        return BackendUnavailable(f"{err}; check that PostgreSQL is running, then retry (`agentrt resume ID`)")
    if isinstance(err, InvalidIdError):
        return InputError(str(err))
    if isinstance(err, StaleFencingTokenError):
        return Conflict(f"{err}; another process took the session over: check `agentrt show ID`")
    if isinstance(err, DocumentMismatch):
        return RecoveryBlocked(err.step, err.reason, err.expected, err.found)
    if isinstance(err, UnsupportedValueError):
        return InputError(str(err))
    return DataCorrupt(str(err))


def _corrupt_next_step(path: str) -> str:
    """What to do about a damaged file: the repair command for a document `agentrt doctor --repair`
    rebuilds (`checkpointing.verify`), else a backup (a bad line inside a log is never rewritten)."""
    from checkpointing.layout import session_of
    from checkpointing.verify import DOCUMENTS

    owner, name = session_of(path), PurePath(path).name
    if owner is not None and name in DOCUMENTS:
        return f"the file was left untouched. Repair it with `agentrt doctor {owner[1]} --repair`."
    if owner is not None and path.startswith("postgresql:"):  # a row of the PostgreSQL store
        # Short and without "; ": the CLI keeps what follows the last "; " when it cuts a long line.
        return f"nothing was changed: `agentrt doctor {owner[1]} --repair` cuts a damaged last row, or names the backup"
    tail = f"`agentrt doctor {owner[1]}`" if owner is not None else "`agentrt doctor`"
    return f"the file was left untouched. Restore it from a backup, or run {tail} to see what depends on it."


# The errors of the libraries below us, by their real classes: (module, names) of each library's
# roots. They are looked up among the modules already imported, never imported here (psycopg and
# SQLAlchemy take long to import, and an error of a library can only exist once it is loaded), so
# mapping an error keeps a light command light.
_GRAPH_MODEL_ERROR = (("graph.context", ("ModelCallError",)),)  # graph does not import agent: mapped here
_MODEL_ERRORS = (
    ("openai", ("OpenAIError",)),
    ("anthropic", ("AnthropicError",)),
    ("langchain_openai.chat_models.base", ("OpenAIRefusalError",)),
    ("httpx", ("HTTPError", "InvalidURL", "CookieConflict", "StreamError")),
    ("httpcore", ("ConnectionNotAvailable", "ProxyError", "UnsupportedProtocol", "ProtocolError")),
    ("httpcore", ("NetworkError", "TimeoutException")),
)
_STORE_DB_ERRORS = (
    ("sqlite3", ("Error",)),
    ("psycopg", ("Error",)),
    ("psycopg_pool", ("PoolTimeout", "PoolClosed", "TooManyRequests")),
)
_BACKEND_ERRORS = (
    *_STORE_DB_ERRORS,
    ("redis.exceptions", ("RedisError",)),
    ("sqlalchemy.exc", ("SQLAlchemyError",)),
    ("psycopg2", ("Error",)),
)


def _loaded(roots: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[type[BaseException], ...]:
    """The exception classes `roots` names, of the modules already imported."""
    found: list[type[BaseException]] = []
    for module, names in roots:
        mod = sys.modules.get(module)
        for name in names if mod is not None else ():
            cls = getattr(mod, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(found)


def is_store_db_error(err: BaseException) -> bool:
    """Whether `err` is an error of the database under LangGraph's store (SQLite, psycopg, its pool)."""
    return isinstance(err, _loaded(_STORE_DB_ERRORS))


def _map_library(err: BaseException) -> AgentrtError | None:
    text = f"{type(err).__name__}: {err}".strip().rstrip(":")
    if isinstance(err, _loaded(_GRAPH_MODEL_ERROR)):
        return ModelCallFailed(str(err))
    if isinstance(err, _loaded(_MODEL_ERRORS)):
        return ModelCallFailed(
            f"the model call failed ({text}); check model.base_url / the API key, then `agentrt resume ID`"
        )
    if isinstance(err, _loaded(_BACKEND_ERRORS)):
        return BackendUnavailable(f"a storage backend failed ({text}); check that it is running, then retry")
    if isinstance(err, OSError) and err.errno is not None:
        if err.filename is not None:  # the path may be long: its start and its file name
            from agent.core.text import shown_path

            text = f"{type(err).__name__}: [Errno {err.errno}] {err.strerror}: {shown_path(err.filename)}"
        return BackendUnavailable(f"the disk failed ({text}); check space and permissions on base_dir, then retry")
    return None


class SchemaOutdated(ConfigError):
    """The SQL database has no agentrt schema, an older one, or a newer one than this agentrt knows.

    Raised before any turn starts; the message names the one command that fixes it.
    """
