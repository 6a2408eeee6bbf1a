"""Crons of `agentrt serve`: what a cron is, its schedule, and where the crons of a tenant are kept.

A cron (LangGraph's `Cron`) starts a run at the times of a 5-field cron expression, read in UTC by
croniter: on its thread (`thread_id`), or, stateless, on a new thread per firing that is deleted
when the run is over unless `on_run_completed` is `keep`. Its `payload` is the body of the runs it
starts (`input`, `config`, `metadata`, ...).

The crons of a tenant are one document of the record store (`agent.session.cron_doc`), so they live
where the server's other records do: a file in a session folder under `base_dir` (`files`), or a
row of the PostgreSQL store. Every change is a compare-and-swap of that document, so servers over
one store never lose each other's changes, and a firing is claimed by moving the cron's
`next_run_date` in one such swap: of several servers (or worker processes) that see a cron due,
exactly one wins the swap and starts the run.

A claimed firing stays `pending` with no run id until its server records the run it started. One
still so `takeover_s` after its claim (its server stopped in between) is claimed again, by the same
swap, by the next server that looks; the run a firing starts has an id drawn from the cron and the
firing's time (`firing_run_id`), so a server taking it over reads off the thread what became of
it (`agent.serve.cron_takeover`): a firing is neither lost nor run twice.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from croniter import croniter

from agent.core.config import AgentSettings
from agent.core.errors import NotFound, quote_id
from agent.session.cron_doc import change_crons, crons_session, read_crons

_PENDING = {"run_id": None, "status": "pending", "error": None}
_FIRINGS = uuid.UUID("5b0c4a52-0f4e-4d55-9a43-6f1f0c7e2a19")
"""The namespace of the ids a stateless firing's thread gets (`firing_thread_id`)."""
_NOT_OVER = frozenset({"pending", "running"})
"""The statuses of a run not over yet (the rest of the API's run statuses are ends)."""
TAKEOVER_S = 60.0
"""How long after its claim a firing with no run recorded is taken over (`serve.cron_takeover_s`)."""
T = TypeVar("T")
Cron = dict[str, Any]
"""A cron as stored and answered (LangGraph's `Cron`, plus `last_run`):

- `cron_id`, `assistant_id`, `thread_id` (None: stateless), `user_id` (who made it; None: the tenant);
- `schedule` (5-field cron, UTC), `end_time` (ISO; no firing after it), `enabled`;
- `payload`: the body of the runs it starts; `metadata`: the payload's metadata;
- `on_run_completed`: `delete` / `keep` the thread of a stateless cron's run (None for a thread's);
- `next_run_date` (ISO; None: it fires no more), `created_at`, `updated_at`;
- `last_run`: its newest firing, `{run_id, thread_id, status, error, fired_at}` (None before the
  first), and while it is `pending` with no run, `claimed_at` and `attempt` (`claim_due`).
"""


def check_schedule(schedule: str) -> str:
    """`schedule` if it is a 5-field cron expression (minute hour day month weekday), else ValueError."""
    fields = schedule.split()
    text = " ".join(fields)
    problem = f"{schedule[:100]!r} is not a 5-field cron expression (minute hour day month weekday), e.g. '0 9 * * *'"
    if len(fields) != 5 or not croniter.is_valid(text):
        raise ValueError(problem)
    try:  # valid fields may still name no time at all (February 30)
        next_time(text, utcnow())
    except Exception:
        raise ValueError(f"{schedule[:100]!r} names no time that ever comes") from None
    return text


def check_time(when: datetime | None) -> datetime | None:
    """`when` in UTC (a time without a zone is UTC), else ValueError (out of range once in UTC)."""
    if when is None:
        return None
    try:
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is out of range once in UTC") from None


def next_time(schedule: str, after: datetime) -> datetime:
    """The first time of `schedule` strictly after `after` (UTC)."""
    return croniter(schedule, after.astimezone(UTC)).get_next(datetime).astimezone(UTC)


def iso(when: datetime | None) -> str | None:
    """`when` as ISO 8601 in UTC (a naive time is taken as UTC)."""
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def parse(when: str | None) -> datetime | None:
    """An ISO time read back."""
    return datetime.fromisoformat(when) if when else None


def utcnow() -> datetime:
    """Now, in UTC."""
    return datetime.now(UTC)


def plan_next(cron: Cron, now: datetime) -> str | None:
    """The cron's next firing after `now`: None when it is disabled or its `end_time` is before it."""
    if not cron.get("enabled", True):
        return None
    when = next_time(cron["schedule"], now)
    end = parse(cron.get("end_time"))
    return None if end is not None and when > end else iso(when)


def new_cron(
    *,
    assistant_id: str,
    thread_id: str | None,
    user_id: str | None,
    schedule: str,
    payload: dict[str, Any],
    end_time: datetime | None,
    enabled: bool,
    on_run_completed: str | None,
    now: datetime,
) -> Cron:
    """A cron as created (`next_run_date` its first time after `now`)."""
    cron: Cron = {
        "cron_id": str(uuid.uuid4()),
        "assistant_id": assistant_id,
        "thread_id": thread_id,
        "user_id": user_id,
        "schedule": schedule,
        "payload": payload,
        "metadata": dict(payload.get("metadata") or {}),
        "end_time": iso(end_time),
        "enabled": enabled,
        "on_run_completed": on_run_completed,
        "created_at": iso(now),
        "updated_at": iso(now),
        "last_run": None,
    }
    cron["next_run_date"] = plan_next(cron, now)
    return cron


class CronBook:
    """The crons of one tenant, read and changed by compare-and-swap (see the module docstring)."""

    def __init__(self, settings: AgentSettings, tenant_id: str) -> None:
        self.tenant_id = tenant_id
        self._session = crons_session(settings, tenant_id)

    def all(self) -> list[Cron]:
        """Every cron of the tenant."""
        return list(read_crons(self._session).values())

    def get(self, cron_id: str, user_id: str | None = None) -> Cron:
        """The cron `cron_id` as `user_id` may see it (None: any of the tenant's); `NotFound` otherwise."""
        for cron in self.all():
            if cron["cron_id"] == cron_id and visible(cron, user_id):
                return cron
        raise NotFound(f"cron {quote_id(cron_id)} not found")

    def change(self, edit: Callable[[dict[str, Cron]], T]) -> T:
        """Apply `edit` to the crons (by id) and save them if nobody changed them meanwhile, else read
        them again and retry; what `edit` returns. An `edit` that raises saves nothing."""
        return change_crons(self._session, self.tenant_id, edit)

    def add(self, cron: Cron) -> Cron:
        """Keep a new cron."""

        def edit(crons: dict[str, Cron]) -> Cron:
            crons[cron["cron_id"]] = cron
            return cron

        return self.change(edit)

    def update(self, cron_id: str, user_id: str | None, apply: Callable[[Cron], None]) -> Cron:
        """Change the cron `cron_id` that `user_id` may see with `apply` (`NotFound` when there is none)."""

        def edit(crons: dict[str, Cron]) -> Cron:
            cron = crons.get(cron_id)
            if cron is None or not visible(cron, user_id):
                raise NotFound(f"cron {quote_id(cron_id)} not found")
            apply(cron)
            return cron

        return self.change(edit)

    def delete(self, cron_id: str, user_id: str | None) -> None:
        """Remove the cron (`NotFound` when `user_id` cannot see one of that id)."""

        def edit(crons: dict[str, Cron]) -> None:
            cron = crons.get(cron_id)
            if cron is None or not visible(cron, user_id):
                raise NotFound(f"cron {quote_id(cron_id)} not found")
            del crons[cron_id]

        self.change(edit)

    def drop_thread(self, thread_id: str) -> int:
        """Remove the crons of thread `thread_id` (the thread is gone); how many went."""

        def edit(crons: dict[str, Cron]) -> int:
            gone = [cid for cid, c in crons.items() if c.get("thread_id") == thread_id]
            for cid in gone:
                del crons[cid]
            return len(gone)

        return self.change(edit) if any(c.get("thread_id") == thread_id for c in self.all()) else 0

    def drop_assistant(self, assistant_id: str) -> int:
        """Remove the crons that start runs of assistant `assistant_id` (it is gone); how many went."""

        def edit(crons: dict[str, Cron]) -> int:
            gone = [cid for cid, c in crons.items() if c.get("assistant_id") == assistant_id]
            for cid in gone:
                del crons[cid]
            return len(gone)

        return self.change(edit) if any(c.get("assistant_id") == assistant_id for c in self.all()) else 0

    def claim_due(self, now: datetime, takeover_s: float = TAKEOVER_S, seen: list[Cron] | None = None) -> list[Cron]:
        """Claim, in one swap, every firing due at `now` and every firing claimed `takeover_s` or
        more before `now` that still has no run (its server stopped before recording one). A due
        cron's `next_run_date` moves past `now` (missed times are skipped: one run, not one per
        missed time) and its `last_run` becomes the new firing, `pending`, `fired_at` now; a firing
        taken over keeps its `fired_at` and counts one more `attempt`. The crons claimed, as they
        are after the claim; a server that lost the swap to another reads them again, not due.
        `seen`: the crons as just read (no swap is tried when none of them has anything to claim)."""

        def edit(crons: dict[str, Cron]) -> list[Cron]:
            claimed = []
            for cron in crons.values():
                if _due(cron, now):
                    cron["next_run_date"] = plan_next(cron, now)
                    fired = {"fired_at": iso(now), "claimed_at": iso(now), "attempt": 1}
                    cron["last_run"] = {**_PENDING, "thread_id": cron["thread_id"], **fired}
                elif _stranded(cron, now, takeover_s):
                    last = cron["last_run"]
                    last.update(claimed_at=iso(now), attempt=int(last.get("attempt") or 1) + 1)
                else:
                    continue
                claimed.append(copy.deepcopy(cron))
            return claimed

        if not any(_due(c, now) or _stranded(c, now, takeover_s) for c in (self.all() if seen is None else seen)):
            return []
        return self.change(edit)

    def unsettled(self, now: datetime, after_s: float, seen: list[Cron] | None = None) -> list[Cron]:
        """The crons (of `seen`, the crons as just read, if given) whose newest firing, `after_s` or
        more before `now`, names a run not over yet as last recorded (its server may have stopped
        before recording the run's end)."""
        return [c for c in (self.all() if seen is None else seen) if _unsettled(c, now, after_s)]

    def record_run(self, cron_id: str, fired_at: str | None, run: dict[str, Any]) -> None:
        """Keep what became of the firing at `fired_at` (`run`: run_id, thread_id, status, error); a
        cron deleted meanwhile, or fired again since, is left alone."""

        def edit(crons: dict[str, Cron]) -> None:
            cron = crons.get(cron_id)
            if cron is not None and (cron.get("last_run") or {}).get("fired_at") == fired_at:
                cron["last_run"] = {**run, "fired_at": fired_at}

        self.change(edit)


def _due(cron: Cron, now: datetime) -> bool:
    due = parse(cron.get("next_run_date"))
    return due is not None and due <= now and bool(cron.get("enabled", True))


def _stranded(cron: Cron, now: datetime, takeover_s: float) -> bool:
    """A firing claimed at least `takeover_s` before `now` whose server recorded no run (a firing
    whose run could not start is recorded as an error, with no run: not stranded)."""
    last = cron.get("last_run") or {}
    if last.get("status") != "pending" or last.get("run_id") is not None or not cron.get("enabled", True):
        return False
    claimed = parse(last.get("claimed_at") or last.get("fired_at"))
    return claimed is not None and (now - claimed).total_seconds() >= takeover_s


def _unsettled(cron: Cron, now: datetime, after_s: float) -> bool:
    last = cron.get("last_run") or {}
    fired = parse(last.get("fired_at"))
    if last.get("run_id") is None or run_over(last.get("status")) or fired is None:
        return False
    return (now - fired).total_seconds() >= after_s


def run_over(status: str | None) -> bool:
    """Whether a run with this API status is over (success, error, interrupted, timeout)."""
    return status not in _NOT_OVER


def firing_run_id(tenant_id: str, cron_id: str, fired_at: str) -> str:
    """The id of the run the firing of cron `cron_id` at `fired_at` starts: the same on every server
    and every attempt, so one that takes the firing over finds the run if it started. A UUIDv7 as
    every run id is (runs sort by creation): its time is the firing's, its other bits a hash."""
    when = parse(fired_at)
    ms = int(when.timestamp() * 1000) if when is not None else 0
    rand = int.from_bytes(hashlib.sha256(f"{tenant_id}/{cron_id}/{fired_at}".encode()).digest()[:10], "big")
    rand_a, rand_b = rand >> 68, rand & ((1 << 62) - 1)  # 12 and 62 bits of the 80
    return str(uuid.UUID(int=(ms & (1 << 48) - 1) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b))


def firing_thread_id(tenant_id: str, cron_id: str, fired_at: str) -> str:
    """The new thread of a stateless cron's firing (as `firing_run_id`, for its thread)."""
    return str(uuid.uuid5(_FIRINGS, f"{tenant_id}/{cron_id}/{fired_at}/thread"))


def visible(cron: Cron, user_id: str | None) -> bool:
    """Whether a caller acting as `user_id` sees the cron: its own only (a tenant-wide caller, None,
    sees every one of the tenant)."""
    return user_id is None or cron.get("user_id") == user_id
