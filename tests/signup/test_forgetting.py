"""Forgetting a person, on both backends: every table loses them in one step, the keyed hash
stays (and is no address in the clear), the delivery log's counts still add up, and the hash
survives a rotation of NEWSLETTER_SECRET."""

from __future__ import annotations

import datetime as dt

import pytest

from newsletter.database import Database
from newsletter.database.bounces import Bounces
from newsletter.database.claims import ConfirmationClaims
from newsletter.database.consent import ERASED, ConsentEvent, ConsentLedger
from newsletter.database.deliveries import FORGOTTEN_REPLY
from newsletter.database.forgotten import Forgotten
from newsletter.database.mailqueue import MailKind, SiteMailQueue
from newsletter.database.roster import Roster
from newsletter.errors import ConfigError
from newsletter.mail.tokens import SigningKey
from newsletter.models import DeliveryStatus
from newsletter.signup.forgetting import forget, forgotten_test, hashing_key, unforget
from newsletter.signup.pending import ConfirmationRule
from support.database import plan, record

OLD = SigningKey(b"old-secret-for-forgetting-0123456789", ephemeral=False)
NEW = SigningKey(b"new-secret-for-forgetting-0123456789", ephemeral=False, previous=(OLD.secret,))
ANN = "ann@example.org"


def _everything_about_ann(database: Database) -> None:
    backend = database.backend
    Roster(backend).add("main", ANN, ANN, ANN, "Ann Lee", "cli")
    Roster(backend).sign_up("weekly", ANN, ANN, ANN, "n", "signup")
    ConsentLedger(backend).record(ConsentEvent("main", ANN, "add", ip="203.0.113.7"))
    SiteMailQueue(backend).queue(MailKind.CONFIRM, "weekly", ANN, ANN, nonce="n")
    ConfirmationRule().claim(ConfirmationClaims(backend), ANN, dt.datetime.now(dt.UTC))
    database.suppressions.add("weekly", ANN, "one-click")
    plan(database, 14, "main", [ANN, "bob@example.org"])
    plan(database, 15, "main", [ANN, "bob@example.org"])


def test_forget_erases_every_trace_and_keeps_a_hash(database: Database) -> None:
    _everything_about_ann(database)
    backend = database.backend
    erased = forget(backend, OLD, ANN)
    assert erased.memberships == 2
    assert erased.consent_events == 1
    assert erased.site_mail == 1
    assert erased.suppressions == 1
    assert erased.claims == 1
    assert erased.deliveries == 2
    assert not erased.already
    assert Roster(backend).of(ANN) == []
    assert ConsentLedger(backend).of(ANN) == []
    assert SiteMailQueue(backend).of(ANN) == []
    assert not database.suppressions.contains("weekly", ANN)
    # The log keeps its rows, without the address; the one waiting can no longer go out.
    rows = database.deliveries.rows(14, "main")
    assert sorted(r.recipient for r in rows)[0] == "bob@example.org"
    gone = [r for r in rows if r.recipient != "bob@example.org"]
    assert len(gone) == 1
    assert gone[0].recipient.startswith("forgotten:")
    assert gone[0].state is DeliveryStatus.SKIPPED
    assert gone[0].smtp_reply == FORGOTTEN_REPLY
    assert gone[0].name == ""
    dump = str(backend.fetch("SELECT * FROM forgotten")) + str(
        backend.fetch("SELECT * FROM forget_keys")
    )
    assert "ann" not in dump
    assert forgotten_test(backend, OLD)(ANN)
    assert not forgotten_test(backend, OLD)("bob@example.org")
    assert forget(backend, OLD, ANN).already


def test_nobody_forgotten_costs_no_key_and_no_hash(database: Database) -> None:
    backend = database.backend
    assert hashing_key(backend, OLD) is None
    assert not forgotten_test(backend, OLD)(ANN)
    assert Forgotten(backend).wrapped_keys() == {}


def test_the_hash_survives_a_rotation_of_the_secret(database: Database) -> None:
    backend = database.backend
    forget(backend, OLD, ANN)
    assert forgotten_test(backend, NEW)(ANN)  # the old secret still configured: wrapped anew
    assert len(Forgotten(backend).wrapped_keys()) == 2
    only_new = SigningKey(NEW.secret, ephemeral=False)
    assert forgotten_test(backend, only_new)(ANN)  # the old one dropped: still known
    stranger = SigningKey(b"another-secret-entirely-0123456789", ephemeral=False)
    with pytest.raises(ConfigError, match="wrapped under a secret this process does not have"):
        forgotten_test(backend, stranger)


def test_forgetting_needs_the_real_secret(database: Database) -> None:
    throwaway = SigningKey(b"x" * 32, ephemeral=True)
    with pytest.raises(ConfigError, match="needs NEWSLETTER_SECRET"):
        forget(database.backend, throwaway, ANN)


def test_unforget_lifts_the_hash(database: Database) -> None:
    backend = database.backend
    assert not unforget(backend, OLD, ANN)
    forget(backend, OLD, ANN)
    assert unforget(backend, OLD, ANN)
    assert not forgotten_test(backend, OLD)(ANN)


def test_forgetting_takes_the_bounce_reports_about_the_person(database: Database) -> None:
    """A held report quotes a stranger's mail about the person: it goes. A recorded one keeps
    what the send's bounce counts are made of and loses the diagnostic, which names them."""
    plan(database, 14, "main", [ANN, "bob@example.org"])
    rows = {r.recipient: r.id for r in database.deliveries.rows(14, "main")}
    bounces = Bounces(database.backend)
    said = f"550 5.1.1 <{ANN}>: no such user"
    bounces.record("r1", rows[ANN], "hard", "5.1.1", said, "dsn")
    bounces.record("r1", rows["bob@example.org"], "hard", "5.1.1", "550 bob", "dsn")
    bounces.hold("r2", rows[ANN], "complaint", "", said, "arf", "x@evil.example", "unproven")
    assert bounces.held_count() == 1

    erased = forget(database.backend, OLD, ANN)

    assert erased.bounce_reports == 2
    assert bounces.held_count() == 0
    assert bounces.counts(14, "main") == {"hard": 2}
    dump = str(database.backend.fetch("SELECT * FROM bounce_reports"))
    assert "ann" not in dump
    assert "550 bob" in dump  # nobody else's report is touched


def test_forgetting_takes_the_address_out_of_the_stored_reply_and_anyones_evidence(
    database: Database,
) -> None:
    """A relay's reply names the person; so does the old address's `change` event after they
    moved: the reply goes, the other person's event keeps ERASED in its place."""
    plan(database, 14, "main", [ANN, "bob@example.org"])
    rows = {r.recipient: r.id for r in database.deliveries.rows(14, "main")}
    refused = f"5.1.1 <{ANN}>: Recipient address rejected"
    assert record(database, rows[ANN], DeliveryStatus.REJECTED, code=550, reply=refused)
    # Bob's row: a relay's reply that quotes Ann (a forward), and one held report she sent.
    quoting = f"550 forwarding to {ANN.upper()}. failed; jo{ANN} and {ANN}.evil are others"
    assert record(database, rows["bob@example.org"], DeliveryStatus.FAILED, code=550, reply=quoting)
    bounces = Bounces(database.backend)
    bounces.hold("r3", rows["bob@example.org"], "complaint", "", "hi", "arf", ANN, "unproven")
    bounces.hold("r4", rows["bob@example.org"], "complaint", "", f"jo{ANN}", "arf", "x@y", "u")
    ledger = ConsentLedger(database.backend)
    old = "ann_old%@example.org"  # LIKE's wildcards in an address match only themselves
    ledger.record(ConsentEvent("main", old, "change", evidence={"moved_to": ANN.upper()}))
    ledger.record(ConsentEvent("main", "cy@example.org", "change", evidence={"moved_to": "x"}))

    forget(database.backend, OLD, ANN)

    (row,) = [r for r in database.deliveries.rows(14, "main") if r.id == rows[ANN]]
    assert (row.state, row.smtp_code, row.smtp_reply) == (
        DeliveryStatus.REJECTED,
        550,
        FORGOTTEN_REPLY,
    )
    (bob,) = [r for r in database.deliveries.rows(14, "main") if r.recipient == "bob@example.org"]
    assert bob.smtp_reply == FORGOTTEN_REPLY
    assert [h.report for h in bounces.held()] == ["r4"]  # joann@ is someone else
    assert ledger.of(old)[0].evidence == {"moved_to": ERASED}
    assert ledger.of("cy@example.org")[0].evidence == {"moved_to": "x"}
    assert "ann@" not in str(database.backend.fetch("SELECT * FROM consent_events")).lower()
