"""Whether a scheduled send was begun by hand, on both backends: a send whose log still waits
(pending, deferred, in flight) or holds nothing has not finished; one whose rows all ended has,
and says its counts; a staging list's never has (its tests repeat); a live worker registered on
the send (or, on SQLite, the send lock held) is a send running now, a dead one is not."""

from __future__ import annotations

import os
import socket

from newsletter.config.settings import Settings
from newsletter.database import Database
from newsletter.schedule.byhand import finished_send, running_send
from newsletter.send.coordinator import send_lock


def _rows(database: Database, list_name: str, *states: str) -> None:
    for i, state in enumerate(states):
        database.backend.run(
            "INSERT INTO deliveries (issue, list, recipient, state, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 't', 't')",
            (14, list_name, f"r{i}@example.com", state),
        )


def test_a_send_is_finished_once_no_row_waits(settings: Settings, database: Database) -> None:
    assert finished_send(settings, database, 14, "main") is None  # nothing in the log
    _rows(database, "main", "sent", "sent", "rejected", "pending")
    assert finished_send(settings, database, 14, "main") is None
    database.backend.run("UPDATE deliveries SET state = 'deferred' WHERE state = 'pending'")
    assert finished_send(settings, database, 14, "main") is None
    database.backend.run("UPDATE deliveries SET state = 'sending' WHERE state = 'deferred'")
    assert finished_send(settings, database, 14, "main") is None
    database.backend.run("UPDATE deliveries SET state = 'unknown' WHERE state = 'sending'")
    assert finished_send(settings, database, 14, "main") == "2 sent, 1 rejected, 1 unknown"


def test_a_staging_lists_send_is_never_finished_by_hand(
    settings: Settings, database: Database
) -> None:
    assert settings.lists["staging"].staging
    _rows(database, "staging", "sent")
    assert finished_send(settings, database, 14, "staging") is None


def test_a_live_worker_on_the_send_is_a_send_running(
    settings: Settings, database: Database
) -> None:
    leases = database.leases
    assert running_send(settings, database, 14, "main") is None
    host = socket.gethostname()
    leases.register("dead", 14, "main", host, 2**22 + 12345, 30)  # no such process here
    leases.register("expired", 14, "main", "elsewhere", 1, -5)
    assert running_send(settings, database, 14, "main") is None
    leases.register("alive", 14, "main", host, os.getpid(), 30)
    found = running_send(settings, database, 14, "main")
    assert found is not None
    assert f"of issue 14 to 'main' runs on {host} (pid {os.getpid()}, since " in found
    assert running_send(settings, database, 14, "staging") is None  # another send
    leases.retire("alive")
    assert running_send(settings, database, 14, "main") is None


def test_on_sqlite_the_send_lock_held_is_a_send_running(
    settings: Settings, database: Database
) -> None:
    with send_lock(settings.state_dir, 14, "main"):
        found = running_send(settings, database, 14, "main")
    if database.shared:  # PostgreSQL has no send lock: its sends share by leases
        assert found is None
    else:
        assert found == (
            f"another `newsletter send` of issue 14 to 'main' is running (pid {os.getpid()})"
        )
    assert running_send(settings, database, 14, "main") is None
