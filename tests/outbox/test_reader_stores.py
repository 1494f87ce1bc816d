"""The stores of readers in the database, on both backends: the roster's statuses, the consent
ledger, the one-confirmation claim (atomic across connections), forgotten digests and their
wrapped key, the site mail queue's claims, marks, outcomes and reaping."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest

from newsletter.database import Database, open_database
from newsletter.database.consent import ConsentEvent
from newsletter.database.mailqueue import MailKind, MailState
from newsletter.database.roster import Status
from newsletter.signup.pending import ConfirmationRule

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
ANN = ("ann@example.org", "ann@example.org", "ann@example.org")


def test_a_signup_is_pending_until_its_nonce_confirms_it(database: Database) -> None:
    roster = database.roster
    first = roster.sign_up("main", *ANN, "n1", "signup")
    assert first.before is None
    assert first.membership.status is Status.PENDING
    again = roster.sign_up("main", *ANN, "n2", "signup")
    assert again.before is Status.PENDING
    assert again.membership.nonce == "n1"
    assert roster.confirm("main", "ann@example.org", "n2") is None  # another nonce
    assert roster.confirm("main", "ann@example.org", "") is None
    confirmed = roster.confirm("main", "ann@example.org", "n1")
    assert confirmed is not None
    assert confirmed.status is Status.CONFIRMED
    assert confirmed.confirmed_at is not None
    assert confirmed.nonce == ""
    assert roster.confirm("main", "ann@example.org", "n1") == confirmed  # idempotent
    assert roster.sign_up("main", *ANN, "n3", "signup").before is Status.CONFIRMED
    assert roster.leave("main", "ann@example.org") is Status.CONFIRMED
    assert roster.confirm("main", "ann@example.org", "n1") is None  # left: the old link is dead
    back = roster.sign_up("main", *ANN, "n4", "signup")
    assert back.before is Status.LEFT
    assert back.membership.nonce == "n4"
    assert roster.counts("main")[Status.PENDING] == 1


def test_the_editor_adds_and_an_import_does_not_undo_a_departure(database: Database) -> None:
    roster = database.roster
    assert roster.add("main", *ANN, "Ann", "cli") is None
    roster.leave("main", "ann@example.org")
    assert roster.add("main", *ANN, "Ann", "import", rejoin=False) is Status.LEFT
    member = roster.get("main", "ann@example.org")
    assert member is not None
    assert member.status is Status.LEFT
    assert roster.add("main", *ANN, "", "cli") is Status.LEFT
    member = roster.get("main", "ann@example.org")
    assert member is not None
    assert member.status is Status.CONFIRMED
    assert member.name == "Ann"


def test_confirmed_members_stream_in_pages(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from newsletter.database import roster as module

    monkeypatch.setattr(module, "PAGE", 7)
    roster = database.roster
    for n in range(30):
        address = f"r{n:02d}@example.org"
        roster.add("main", address, address, address, f"R{n}", "cli")
    roster.sign_up("main", "pending@example.org", "pending@example.org", "p", "x", "signup")
    roster.add("other", "r00@example.org", "r00@example.org", "r", "", "cli")
    roster.leave("main", "r05@example.org")
    keys = [k for k, _, _ in roster.confirmed("main")]
    assert keys == sorted(f"r{n:02d}@example.org" for n in range(30) if n != 5)
    assert len(list(roster.members("main"))) == 31


def test_a_move_keeps_the_row_and_merges_into_an_existing_one(database: Database) -> None:
    roster = database.roster
    roster.add("main", *ANN, "Ann", "cli")
    assert roster.move("main", "ann@example.org", "a@new.example", "a@new.example", "m") is (
        Status.CONFIRMED
    )
    assert roster.get("main", "ann@example.org") is None
    moved = roster.get("main", "a@new.example")
    assert moved is not None
    assert moved.name == "Ann"
    assert moved.status is Status.CONFIRMED
    roster.add("main", "b@example.org", "b@example.org", "b", "", "cli")
    roster.move("main", "b@example.org", "a@new.example", "a@new.example", "m")
    gone = roster.get("main", "b@example.org")
    assert gone is not None
    assert gone.status is Status.LEFT


def test_the_ledger_keeps_every_event_in_order(database: Database) -> None:
    ledger = database.consent
    ledger.record(ConsentEvent("main", "ann@example.org", "signup", ip="203.0.113.0/24"))
    ledger.record_all(
        [
            ConsentEvent("main", "ann@example.org", "confirm", evidence={"page": "/confirm"}),
            ConsentEvent("main", "bob@example.org", "import", evidence={"OPTIN_IP": "1.2.3.4"}),
        ]
    )
    events = ledger.of("ann@example.org")
    assert [e.event for e in events] == ["signup", "confirm"]
    assert events[0].ip == "203.0.113.0/24"
    assert events[1].evidence == {"page": "/confirm"}
    latest = ledger.latest("main", ["ann@example.org", "bob@example.org"], ["confirm", "import"])
    assert set(latest) == {("ann@example.org", "confirm"), ("bob@example.org", "import")}
    with pytest.raises(ValueError, match="unknown consent event"):
        ConsentEvent("main", "x", "hacked")
    assert ledger.erase("ann@example.org") == 2
    assert ledger.of("ann@example.org") == []


def test_one_claim_per_mailbox_per_window(database: Database) -> None:
    rule, claims = ConfirmationRule(), database.claims
    variants = ["annlee@gmail.com", "Ann.Lee+1@gmail.com", "a.nnlee+2@googlemail.com"]
    assert [rule.claim(claims, v, NOW) for v in variants] == [True, False, False]
    assert not rule.claim(claims, "annlee@gmail.com", NOW + dt.timedelta(hours=23))
    assert rule.claim(claims, "annlee+3@gmail.com", NOW + dt.timedelta(days=1))
    assert claims.last("annlee@gmail.com") == NOW + dt.timedelta(days=1)
    # A clock set back: the claim in the future holds the gate shut.
    assert not rule.claim(claims, "annlee@gmail.com", NOW)


def test_concurrent_claims_on_separate_connections_let_one_through(
    database_target: Path | str,
) -> None:
    open_database(database_target).close()  # migrated once, before the race
    rule, results, start = ConfirmationRule(), [], threading.Barrier(12)

    def post(n: int) -> None:
        with open_database(database_target, migrate=False) as box:
            claims = box.claims
            start.wait()
            results.append(rule.claim(claims, f"victim+{n}@example.org", NOW))

    threads = [threading.Thread(target=post, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 11 + [True]


def test_forgotten_digests_and_the_first_wrapped_key_wins(database: Database) -> None:
    forgotten = database.forgotten
    assert forgotten.add("d1")
    assert not forgotten.add("d1")
    assert forgotten.digests() == {"d1"}
    assert forgotten.when("d1") is not None
    assert forgotten.keep_key("kid", "wrapped-1")
    assert not forgotten.keep_key("kid", "wrapped-2")
    assert forgotten.wrapped_keys() == {"kid": "wrapped-1"}
    assert forgotten.remove("d1")
    assert forgotten.count() == 0


def test_site_mail_is_claimed_once_marked_and_recorded_by_its_owner(database: Database) -> None:
    queue = database.site_mail
    first = queue.queue(MailKind.CONFIRM, "main", "ann@example.org", "ann@example.org", nonce="n")
    second = queue.queue(MailKind.WELCOME, "main", "bob@example.org", "bob@example.org")
    assert queue.next_due() == 0.0
    claimed = queue.claim("w1", 10, 30)
    assert [m.id for m in claimed] == [first, second]
    assert queue.claim("w2", 10, 30) == []  # nothing left for another worker
    assert not queue.mark_sending(first, "w2")
    assert queue.mark_sending(first, "w1")
    assert queue.record(first, "w1", MailState.SENT, 250, "ok queued")
    assert not queue.record(first, "w1", MailState.SENT, 250, "twice")  # recorded once
    assert queue.record(second, "w1", MailState.DUE, 451, "later", retry_in=3600)
    mail = queue.get(first)
    assert mail is not None
    assert mail.state is MailState.SENT
    assert mail.sent_at is not None
    assert queue.claim("w2", 10, 30) == []  # the deferred one is not due yet
    assert queue.next_due() is not None
    assert queue.next_due() > 3000


def test_a_dead_workers_claims_go_back_and_its_uploads_become_unknown(database: Database) -> None:
    queue = database.site_mail
    waiting = queue.queue(MailKind.CONFIRM, "main", "a@example.org", "a@example.org")
    uploading = queue.queue(MailKind.CONFIRM, "main", "b@example.org", "b@example.org")
    queue.claim("dead", 10, -1.0)  # its lease ended a second ago
    assert queue.mark_sending(uploading, "dead")
    assert queue.reap(keep="alive")
    assert queue.get(waiting).state is MailState.DUE
    lost = queue.get(uploading)
    assert lost is not None
    assert lost.state is MailState.UNKNOWN
    assert [m.id for m in queue.claim("alive", 10, 30)] == [waiting]  # never the unknown one
    assert not queue.record(uploading, "dead", MailState.SENT, 250, "late reply")
    assert queue.release("alive") == 1
    assert queue.get(waiting).state is MailState.DUE


def test_a_live_workers_claims_are_not_reaped_unless_everyone_else_is_dead(
    database: Database,
) -> None:
    queue = database.site_mail
    mail = queue.queue(MailKind.CONFIRM, "main", "a@example.org", "a@example.org")
    queue.claim("other", 10, 60)
    assert queue.reap(keep="me") == []
    assert queue.get(mail).state is MailState.CLAIMED
    queue.reap(keep="me", everyone=True)
    assert queue.get(mail).state is MailState.DUE  # type: ignore[union-attr]
    assert queue.renew("me", 30) == 0
