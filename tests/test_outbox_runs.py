"""outbox runs on both backends: the list streamed in batches, claims, leases and dead workers."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from newsletter.database import DEPARTED, IN_DOUBT, UNSUBSCRIBED, Database, Planned, open_database
from newsletter.models import DeliveryStatus as S
from support.database import mark_sending, record


def planned(*names: str) -> list[Planned]:
    return [
        Planned(f"{n}@example.com", f"{n.title()}@example.com", f"Reader {n}", f"<{n}@x>")
        for n in names
    ]


def plan(database: Database, *batches: list[Planned], worker: str = "w0") -> tuple[int, int, int]:
    start = database.plans.start(14, "main", worker)
    for batch in batches:
        database.plans.add(14, "main", start.generation, batch)
    result = database.plans.finish(14, "main", start)
    return result.added, result.skipped, result.total


def claim(database: Database, worker: str, limit: int = 100, max_tries: int = 5) -> list[str]:
    rows = database.leases.claim(14, "main", worker, limit, max_tries=max_tries, at=time.time())
    return [r.recipient.split("@")[0] for r in rows]


def test_the_row_is_the_snapshot_and_batches_dedupe(database: Database) -> None:
    assert plan(database, planned("a", "b"), planned("b", "c")) == (3, 0, 3)
    rows = {r.recipient: r for r in database.deliveries.rows(14, "main")}
    assert (rows["a@example.com"].envelope, rows["a@example.com"].name) == (
        "A@example.com",
        "Reader a",
    )
    assert rows["c@example.com"].message_id == "<c@x>"
    # A second plan keeps the snapshot: a renamed reader keeps the name the row was planned with.
    renamed = [Planned("a@example.com", "a@example.com", "New name", "<a@x>")]
    assert plan(database, renamed, planned("b", "c")) == (0, 0, 3)
    assert database.deliveries.rows(14, "main")[0].name == "Reader a"


def test_a_reader_who_left_or_unsubscribed_between_runs_is_skipped(database: Database) -> None:
    plan(database, planned("a", "b", "c", "d"))
    (first,) = database.leases.claim(14, "main", "w0", 1, max_tries=5, at=time.time())
    mark_sending(database, first.id, None)
    record(database, first.id, S.SENT, code=250)
    database.suppressions.add("main", "C@example.com", "one-click")
    assert plan(database, planned("b", "c")) == (0, 2, 4)  # a sent, b waits, c off, d gone
    state = {r.recipient[0]: (r.state, r.smtp_reply) for r in database.deliveries.rows(14, "main")}
    assert state["a"][0] == S.SENT  # a sent row stays sent, wherever its reader went
    assert state["b"] == (S.PENDING, "")
    assert state["c"] == (S.SKIPPED, UNSUBSCRIBED)
    assert state["d"] == (S.SKIPPED, DEPARTED)
    counts = database.deliveries.counts(14, "main")
    assert sum(counts.values()) == 4


def test_two_workers_never_claim_the_same_row(database_target: Path | str) -> None:
    with open_database(database_target) as one, open_database(database_target) as two:
        plan(one, planned(*"abcdefghij"))
        first = claim(one, "w1", 4)
        second = claim(two, "w2", 4)
        rest = claim(one, "w1", 10)
        assert first == list("abcd")
        assert second == list("efgh")
        assert rest == list("ij")
        assert claim(two, "w2") == []
        assert one.leases.held_by_others(14, "main", "w1") == 4


def test_an_outcome_frees_the_row_and_deferred_rows_wait_their_turn(database: Database) -> None:
    plan(database, planned("a", "b"))
    a, b = database.leases.claim(14, "main", "w1", 10, max_tries=2, at=time.time())
    record(database, a.id, S.DEFERRED, code=451, next_attempt_at=time.time() + 60)
    record(database, b.id, S.DEFERRED, code=451, next_attempt_at=time.time() - 1)
    assert claim(database, "w1", max_tries=2) == ["b"]  # a is not due yet
    record(database, b.id, S.DEFERRED, code=451, next_attempt_at=time.time() - 1)
    assert claim(database, "w1", max_tries=2) == []  # b was tried twice in this run
    due = database.leases.next_due(14, "main", max_tries=2)
    assert due is not None
    assert due > time.time() + 50
    plan(database, planned("a", "b"))  # a new run: attempts count from zero again
    assert database.leases.claim(14, "main", "w1", 10, max_tries=2, at=time.time() + 61) != []


def test_a_dead_workers_rows_go_back_or_become_unknown(database_target: Path | str) -> None:
    with open_database(database_target) as alive, open_database(database_target) as dying:
        plan(alive, planned(*"abcdef"))
        alive.leases.register("w1", 14, "main", "host1", 1, lease=30)
        dying.leases.register("w2", 14, "main", "host2", 2, lease=0.2)
        assert [w.id for w in alive.leases.workers(14, "main")] == ["w1", "w2"]
        rows = dying.leases.claim(14, "main", "w2", 3, max_tries=5, at=time.time())
        assert mark_sending(dying, rows[0].id, None, owner="w2")  # a upload in flight
        record(dying, rows[1].id, S.SENT, code=250)  # b done
        # c claimed, never started. Then w2 stops renewing (killed).
        time.sleep(0.4)
        assert [w.id for w in alive.leases.workers(14, "main")] == ["w1"]
        lost = alive.leases.reap(14, "main")
        assert [(r.recipient, r.state, r.smtp_reply) for r in lost] == [
            ("a@example.com", S.UNKNOWN, IN_DOUBT)
        ]
        assert claim(alive, "w1") == ["c", "d", "e", "f"]
        # The dead worker cannot start an upload of a row that is no longer its own.
        assert not mark_sending(dying, rows[2].id, None, owner="w2")
        # Nor record a late outcome over it: a 451 would make a row w1 holds (c) due again,
        # and the upload it had in flight (a) stays `unknown`, as it was reported.
        assert not record(dying, rows[2].id, S.DEFERRED, code=451, owner="w2")
        assert not record(dying, rows[0].id, S.SENT, code=250, owner="w2")
        assert [d.state for d in alive.deliveries.by_id([rows[0].id])] == [S.UNKNOWN]
        assert not dying.leases.renew("w2", lease=30)
        assert alive.leases.renew("w1", lease=30)
        assert alive.leases.reap(14, "main") == []
        alive.leases.retire("w1")
        assert alive.leases.workers(14, "main") == []
        assert claim(alive, "w3") == ["c", "d", "e", "f"]  # retiring freed the unstarted rows


def test_a_reaped_worker_claims_nothing_and_rows_it_holds_anyway_go_back(
    database_target: Path | str,
) -> None:
    with open_database(database_target) as alive, open_database(database_target) as paused:
        plan(alive, planned(*"abcd"))
        alive.leases.register("w1", 14, "main", "host1", 1, lease=30)
        paused.leases.register("w2", 14, "main", "host2", 2, lease=30)
        assert claim(paused, "w2", limit=1) == ["a"]
        alive.leases.reap(14, "main", dead=["w2"])  # reaped while paused
        assert claim(paused, "w2") == []  # woken, it claims nothing before it renews
        # A row it holds all the same (it claimed in the moment of the reap, then died) goes
        # back at the next reap: no later run waits for it for ever.
        alive.backend.run("UPDATE deliveries SET owner = 'w2' WHERE recipient = 'b@example.com'")
        alive.leases.reap(14, "main")
        assert claim(alive, "w1") == ["a", "b", "c", "d"]


def test_a_claim_tells_whose_recipient_is_suppressed_now(database: Database) -> None:
    """The claim and the suppressions read in one statement: a reader who unsubscribed since
    the plan is claimed (to be skipped), not queued; another list's suppression is not ours."""
    plan(database, planned("a", "b", "c", "d"))
    database.suppressions.add("main", "B@example.com", "one-click")
    database.suppressions.add("other", "c@example.com", "one-click")
    claim = database.leases.send_claim(14, "main", "w1", 10, max_tries=5, at=time.time())
    claim.landing.wait()
    send, suppressed = claim.taken()
    assert [r.recipient for r in send] == ["a@example.com", "c@example.com", "d@example.com"]
    assert [r.recipient for r in suppressed] == ["b@example.com"]
    # Claimed is owned, nothing more: no row is `sending` before its upload.
    assert {r.state for r in database.deliveries.rows(14, "main")} == {S.PENDING}
    assert database.leases.claim(14, "main", "w2", 10, max_tries=5, at=time.time()) == []


def test_a_claim_on_postgres_goes_out_without_waiting_for_its_reply(postgres_url: str) -> None:
    """A claim the server cannot answer yet (the suppressions locked by another session) is
    on its way, not waited for: the send goes on, its own connection free meanwhile; the rows
    come once the server answers."""
    with open_database(postgres_url) as database:
        plan(database, planned("a", "b"))
        # Prepared once, before the lock (preparing reads the tables' definitions).
        database.leases.send_claim(99, "main", "w1", 10, max_tries=5, at=time.time()).landing.wait()
        with psycopg.connect(postgres_url) as locker:
            locker.execute("LOCK TABLE suppressions IN ACCESS EXCLUSIVE MODE")
            claim = database.leases.send_claim(14, "main", "w1", 10, max_tries=5, at=time.time())
            assert claim.landing.fileno is not None
            assert not claim.landing.ready()
            assert database.deliveries.counts(14, "main")[S.PENDING] == 2  # not blocked
            locker.commit()
        claim.landing.wait()
        send, suppressed = claim.taken()
    assert ([r.recipient for r in send], suppressed) == (["a@example.com", "b@example.com"], [])


def test_only_one_planner_at_a_time_and_a_live_plan_is_shared(database_target: Path | str) -> None:
    with open_database(database_target) as one, open_database(database_target) as two:
        assert not one.plans.is_current(14, "main")
        one.leases.register("w1", 14, "main", "h", 1, lease=30)
        with one.plans.lock(14, "main"):
            plan(one, planned("a"), worker="w1")
        with two.plans.lock(14, "main"):
            assert two.plans.is_current(14, "main")  # w1 planned and still runs
        one.leases.retire("w1")
        assert not two.plans.is_current(14, "main")


def test_a_plan_its_live_planner_never_finished_is_not_shared(database: Database) -> None:
    # issue 18.3: a planner killed halfway left a plan naming it while its lease still ran;
    # the next worker shared that half plan and sent only the rows it held.
    database.leases.register("w1", 14, "main", "h", 1, lease=30)
    start = database.plans.start(14, "main", "w1")
    database.plans.add(14, "main", start.generation, planned("a"))
    assert not database.plans.is_current(14, "main")  # w1 is still planning (or dead)
    database.plans.finish(14, "main", start)
    assert database.plans.is_current(14, "main")
