"""A send begun outside its schedule (the editor ran `newsletter send` by hand before the worker
came to it): the settings, the outbox and an (issue, list) in; whether that send runs now or has
already run to its end out, as the line the schedule's outcome shows.

The worker asks both before it checks and starts a due send, and again when the send it started
refused (the editor's may have taken the send lock while the worker's started):

    running   SQLite: the send lock is held; either backend: a worker registered on the send
              whose lease runs and whose process lives. The schedule stays open, handed back,
              and the next look asks again: never `failed` for a send under way.
    finished  the log holds the send's rows and none waits (nothing pending, deferred or in
              flight). The schedule is `done`, sent by hand, and nothing is started, nor is the
              issue checked again: the file may have moved on since it went out. A staging
              list is never `finished` here: its tests repeat, and the send decides.

Neither: the worker starts (or resumes) the send as scheduled.
"""

from __future__ import annotations

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.errors import DeliveryError
from newsletter.models import DeliveryStatus
from newsletter.send.coordinator import send_lock
from newsletter.send.lease import why_gone

S = DeliveryStatus
WAITING = (S.PENDING, S.DEFERRED, S.SENDING)


def running_send(settings: Settings, database: Database, issue: int, list_name: str) -> str | None:
    """Who sends (issue, list) now, as a line (`another newsletter send ... (pid 41)`), or
    None when no one does."""
    if not database.shared:
        try:
            with send_lock(settings.state_dir, issue, list_name):
                pass
        except DeliveryError as exc:
            return exc.message
    clock = database.backend.database_time()
    for worker in database.leases.workers(issue, list_name):
        if not why_gone(worker, clock):
            return (
                f"a `newsletter send` of issue {issue} to {list_name!r} runs on"
                f" {worker.host} (pid {worker.pid}, since {worker.started_at})"
            )
    return None


def finished_send(settings: Settings, database: Database, issue: int, list_name: str) -> str | None:
    """The counts of (issue, list)'s send when the log shows it run to its end (`5 sent,
    1 rejected`), else None."""
    chosen = settings.lists.get(list_name)
    if chosen is not None and chosen.staging:
        return None
    test = database.subject_tests.get(issue, list_name)
    if test is not None and test.state == "sampling":
        return None  # a subject test's sample is done: the rest goes at the decision
    counts = database.deliveries.counts(issue, list_name)
    if not sum(counts.values()) or any(counts.get(s) for s in WAITING):
        return None
    return ", ".join(f"{n} {state}" for state, n in counts.items() if n)
