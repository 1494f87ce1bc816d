"""The schedules store on both backends: one open schedule per send, exactly one claimer of a
due one among several connections, a dead claimer's schedule taken again once its lease ran out,
the missed ones, and outcomes fenced to the worker that holds the claim."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from newsletter.database import Database, backend, open_database, schema
from newsletter.database.schedules import Schedules, ScheduleState, kept_options


def _store(database: Database) -> Schedules:
    return database.schedules


def test_one_open_schedule_per_send(database: Database) -> None:
    store = _store(database)
    first = store.book(15, "main", time.time() + 60, "Asia/Shanghai", "ann@laptop")
    assert first is not None
    assert first.state is ScheduleState.DUE
    assert store.book(15, "main", time.time() + 120, "UTC", "ann@laptop") is None
    assert store.book(15, "staging", time.time() + 120, "UTC", "ann@laptop") is not None
    assert [s.list for s in store.cancel(15, "main", "ann@laptop")] == ["main"]
    again = store.book(15, "main", time.time() + 120, "UTC", "ann@laptop")
    assert again is not None  # the cancelled one no longer holds the send
    assert store.pending(15, "main") == again


def test_exactly_one_connection_claims_a_due_schedule(database_target: Path | str) -> None:
    boxes = [open_database(database_target) for _ in range(3)]
    try:
        stores = [_store(box) for box in boxes]
        assert stores[0].book(15, "main", time.time() - 1, "UTC", "t") is not None
        assert stores[0].book(16, "main", time.time() + 3600, "UTC", "t") is not None
        claims = [store.claim(f"w{i}", 30) for i, store in enumerate(stores)]
        won = [c for c in claims if c is not None]
        assert len(won) == 1
        assert won[0].issue == 15  # the one not due yet stays
        assert won[0].owner in ("w0", "w1", "w2")
    finally:
        for box in boxes:
            box.close()


def test_a_claim_whose_lease_ran_out_is_taken_again_and_resumed(database: Database) -> None:
    store = _store(database)
    store.book(15, "main", time.time() - 1, "UTC", "t")
    claimed = store.claim("dead", 0.2)
    assert claimed is not None
    assert store.launched(claimed.id, "dead")
    assert store.claim("alive", 30) is None  # the lease still runs
    time.sleep(0.4)
    taken = store.claim("alive", 30)
    assert taken is not None
    assert taken.started_at is not None  # it had started: resumed, never missed
    assert store.launched(taken.id, "alive")
    # The dead worker's late outcome is not recorded over the live one's claim.
    assert not store.finish(taken.id, "dead", ScheduleState.DONE, "late")
    assert not store.release(taken.id, "dead")
    assert store.finish(taken.id, "alive", ScheduleState.DONE, "issue 15 -> main: 3 sent")
    (done,) = store.listing()
    assert done.state is ScheduleState.DONE
    assert done.started_by == "dead, alive"
    assert done.owner is None


def test_a_send_its_check_refused_keeps_only_its_earlier_starts(database: Database) -> None:
    """The worker marks a send launched as it starts its process, whose own check may refuse
    it: that start is undone, an earlier worker's kept."""
    store = _store(database)
    store.book(15, "main", time.time() - 1, "UTC", "t")
    first = store.claim("w1", 30)
    assert first is not None
    assert store.launched(first.id, "w1")
    assert store.refuse(first, "w1", "not sent: the issue fails `newsletter check` now: x")
    (refused,) = store.listing()
    assert refused.state is ScheduleState.FAILED
    assert (refused.started_at, refused.started_by, refused.owner) == (None, "", None)
    store.book(16, "main", time.time() - 1, "UTC", "t")
    earlier = store.claim("dead", 30)
    assert earlier is not None
    assert store.launched(earlier.id, "dead")
    assert store.release(earlier.id, "dead")
    resumed = store.claim("w2", 30)
    assert resumed is not None
    assert resumed.started_by == "dead"
    assert store.launched(resumed.id, "w2")
    assert not store.refuse(resumed, "other", "late")  # fenced to the claim's owner
    assert store.refuse(resumed, "w2", "not sent")
    (again,) = [s for s in store.listing() if s.issue == 16]
    assert (again.started_at, again.started_by) == (resumed.started_at, "dead")


def test_past_the_grace_a_schedule_that_never_started_is_missed(database: Database) -> None:
    store = _store(database)
    store.book(15, "main", time.time() - 7 * 3600, "UTC", "t")
    store.book(16, "main", time.time() - 3600, "UTC", "t")
    started = store.book(17, "main", time.time() - 9 * 3600, "UTC", "t")
    assert started is not None
    assert store.claim("w", 30) is not None  # the oldest first: 17
    store.launched(started.id, "w")
    store.release(started.id, "w", "handed back")
    missed = store.miss(6 * 3600, "not sent: late")
    assert [m.issue for m in missed] == [15]
    states = {s.issue: s.state for s in store.listing()}
    assert states == {15: ScheduleState.MISSED, 16: ScheduleState.DUE, 17: ScheduleState.DUE}


def test_release_others_hands_back_every_claim_but_ours(database: Database) -> None:
    store = _store(database)
    store.book(15, "main", time.time() - 1, "UTC", "t")
    assert store.claim("gone", 3600) is not None
    assert store.release_others("me") == 1
    assert store.next_due() == 0.0
    claimed = store.claim("me", 30)
    assert claimed is not None
    assert claimed.owner == "me"


def test_a_schedule_keeps_rate_and_concurrency(database: Database) -> None:
    store = _store(database)
    kept = store.book(15, "main", time.time() + 60, "UTC", "t", rate=2.5, concurrency=3)
    plain = store.book(15, "staging", time.time() + 60, "UTC", "t", rate=0.0)
    bare = store.book(16, "main", time.time() + 60, "UTC", "t")
    assert kept is not None
    assert plain is not None
    assert bare is not None
    assert (kept.rate, kept.concurrency) == (2.5, 3)
    assert (plain.rate, plain.concurrency) == (0.0, None)  # 0 (unlimited) is not "not given"
    assert (bare.rate, bare.concurrency) == (None, None)
    assert kept_options(kept) == ["--rate", "2.5", "--concurrency", "3"]
    assert kept_options(plain) == ["--rate", "0"]
    assert kept_options(bare) == []
    assert store.pending(15, "main") == kept


def test_an_outbox_from_before_kept_options_keeps_its_schedules(
    database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 10 on an outbox at version 9 with a schedule waiting: the schedule stays, and
    keeps no option (its send runs on the config's, as it would have)."""
    with monkeypatch.context() as before:
        before.setattr(backend, "MIGRATIONS", schema.MIGRATIONS[:9])
        before.setattr(backend, "LATEST", 9)
        with open_database(database_target) as old:
            assert old.backend.version() == 9
            old.backend.run(
                "INSERT INTO schedules (issue, list, due_at, zone, created_at, created_by,"
                " updated_at) VALUES (15, 'main', ?, 'UTC', 't', 'ann', 't')",
                (time.time() + 60,),
            )
    with open_database(database_target) as database:
        assert database.backend.version() >= 10
        (waiting,) = database.schedules.listing()
        assert (waiting.issue, waiting.created_by, waiting.state) == (15, "ann", ScheduleState.DUE)
        assert (waiting.rate, waiting.concurrency) == (None, None)
