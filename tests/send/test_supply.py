"""The rows a worker's sessions send next, on a real outbox (SQLite and PostgreSQL): the next
claim goes out while the queue still holds rows, claimed rows are owned and never `sending`,
and a claim on its way when the run ends is this worker's before its lease is retired."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg

from newsletter.database import Database, Delivery, open_database
from newsletter.errors import DatabaseError
from newsletter.models import DeliveryStatus as S
from newsletter.send.supply import Order, Supply
from support.database import plan
from support.sendcli import until

HANG = 60.0  # a guard against a hang, never a measure


def supply(database: Database, batch: int, skipped: list[Delivery] | None = None) -> Supply:
    faults: list[DatabaseError] = []
    return Supply(
        database.leases,
        Order(14, "main", "w1", 5, list),
        batch=batch,
        skipped=(skipped if skipped is not None else []).append,
        on_fault=faults.append,
        running=lambda: not faults,
    )


def owned(database: Database) -> dict[str, S]:
    return {
        r.recipient: r.state for r in database.deliveries.rows(14, "main") if owner(database, r)
    }


def owner(database: Database, row: Delivery) -> bool:
    (found,) = database.backend.fetch("SELECT owner FROM deliveries WHERE id = ?", (row.id,))[0]
    return bool(found == "w1")


async def test_the_next_claim_goes_out_before_the_queue_runs_dry(database: Database) -> None:
    recipients = [f"r{i:02d}@example.com" for i in range(12)]
    plan(database, 14, "main", recipients)
    database.suppressions.add("main", "r05@example.com", "one-click")
    skipped: list[Delivery] = []
    rows = supply(database, batch=4, skipped=skipped)
    assert rows.take() is None  # nothing claimed yet: the first claim is waited for
    assert await rows.refill()
    taken = [rows.take(), rows.take()]  # two of four left: not under half a batch yet
    assert set(owned(database)) == set(recipients[:4])
    taken.append(rows.take())  # one left: the next claim goes out, the queue not empty
    await until(lambda: len(owned(database)) == 8, "no claim went out ahead")
    # Owned, nothing more: a row claimed ahead is `pending` until its upload starts.
    assert set(owned(database).values()) == {S.PENDING}
    while (row := rows.take()) is not None or await rows.refill():
        taken.append(row)
    sent = [r.recipient for r in taken if r is not None]
    assert sent == [r for r in recipients if r != "r05@example.com"]
    assert [r.recipient for r in skipped] == ["r05@example.com"]
    rows.close()


def test_a_claim_on_its_way_when_the_run_ends_is_waited_for(postgres_url: str) -> None:
    """The claim is still on the server (the suppressions locked by another session) when the
    run ends: `close` waits for it, so retiring the lease next frees the rows it took. Else
    they would stay owned by a worker that is gone, and no run would send them."""
    with open_database(postgres_url) as database:
        plan(database, 14, "main", [f"r{i}@example.com" for i in range(6)])
        database.leases.register("w1", 14, "main", "h", 1, lease=30)
        rows = supply(database, batch=4)
        closing = threading.Event()
        at_close: list[tuple[object, ...]] = []

        async def start() -> None:
            assert await rows.refill()  # the claim's statement prepared (it reads the tables)
            with psycopg.connect(postgres_url) as locker:
                locker.execute("LOCK TABLE suppressions IN ACCESS EXCLUSIVE MODE")
                rows.take()
                rows.take()
                rows.take()  # one left: the next claim goes out, and waits for the lock
                lane = database.backend._lanes["claims"]  # type: ignore[attr-defined]
                args = (postgres_url, lane.conn.info.backend_pid, closing, locker)
                released = threading.Thread(target=release, args=args)
                released.start()
                closing.set()
                rows.close()
                at_close.extend(database.backend.fetch(OWNED))
                database.leases.retire("w1")  # what a run does next
                released.join()

        asyncio.run(start())
        free = database.backend.fetch("SELECT count(*) FROM deliveries WHERE owner IS NULL")
    assert at_close == [(6,)]  # the claim landed before `close` returned
    assert free == [(6,)]


OWNED = "SELECT count(*) FROM deliveries WHERE owner = 'w1'"


def release(
    url: str, pid: int, closing: threading.Event, locker: psycopg.Connection[object]
) -> None:
    """Once the run is closing and its claim (the session `pid`) waits for the lock, let the
    lock go."""
    deadline = time.monotonic() + HANG
    with psycopg.connect(url, autocommit=True) as watcher:
        while not (closing.is_set() and waits_for_a_lock(watcher, pid)):
            assert time.monotonic() < deadline, "the claim never waited for the lock"
            time.sleep(0.01)
    locker.commit()


def waits_for_a_lock(watcher: psycopg.Connection[tuple[int]], pid: int) -> bool:
    found = watcher.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
        (pid,),
    ).fetchone()
    return bool(found and found[0])
