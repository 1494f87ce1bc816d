"""Old links against an erasure, over real HTTP against `newsletter serve`'s app, the erasure
made by the real `newsletter subscribers forget` while the site runs: a forgotten reader's
token keeps nothing and creates nothing; forgetting a moved address takes it out of the old
address's change event; a change link moves the address once (issue 29, points 2 and 3, and the
change link's nonce)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.database import open_database
from newsletter.database.consent import ERASED
from newsletter.database.mailqueue import MailKind
from newsletter.database.roster import Status
from newsletter.mail.tokens import LinkTarget, Purpose, sign, sign_link
from newsletter.models import DeliveryStatus
from support.database import record
from support.erasure import dump, raw_bytes
from support.signups import SIGNUP_ENV, ledger, member, post_signup, queued, solved
from support.site import SECRET, RunningService, running_service
from support.tracked import tracked_send

ANN = "ann@example.org"
NEW = "ann@new.example"


def forget(project: Path, address: str) -> None:
    done = CliRunner().invoke(
        cli,
        ["--config", str(project / "newsletter.toml"), "subscribers", "forget", address, "--yes"],
        env={"NEWSLETTER_SECRET": SECRET},
    )
    assert done.exit_code == 0, done.output


def change_link(site: RunningService, old: str, new: str) -> str:
    """The link of the change mail queued to `new`, as the worker would sign it."""
    (mail,) = [m for m in queued(site.settings.database_target) if m.kind is MailKind.CHANGE]
    assert (mail.recipient, mail.detail) == (new, old)
    target = LinkTarget(Purpose.CHANGE, "main", new, mail.nonce, int(time.time()) + 600, old)
    return f"{site.url}/move/{sign_link(SECRET, target)}"


def request_move(site: RunningService, token: str, new: str) -> httpx.Response:
    return httpx.post(
        f"{site.url}/preferences/{token}",
        data={"action": "move", "email": new, "altcha": solved(site.url)},
    )


@pytest.mark.slow
def test_an_old_token_of_a_forgotten_reader_keeps_nothing_and_creates_nothing(
    project: Path,
) -> None:
    with running_service(project, **SIGNUP_ENV) as site:
        target = site.settings.database_target
        token = sign(SECRET, "main", ANN)
        assert (
            CliRunner()
            .invoke(
                cli,
                ["--config", str(project / "newsletter.toml"), "subscribers", "add", ANN],
                env={"NEWSLETTER_SECRET": SECRET},
            )
            .exit_code
            == 0
        )
        forget(project, ANN)

        one_click = httpx.post(
            f"{site.url}/unsubscribe/{token}", data={"List-Unsubscribe": "One-Click"}
        )
        assert one_click.status_code == 200
        assert one_click.text == "unsubscribed\n"
        again = httpx.post(f"{site.url}/resubscribe/{token}", data={"Resubscribe": "Yes"})
        assert again.status_code == 409
        page = httpx.get(f"{site.url}/preferences/{token}")
        assert page.status_code == 200
        assert 'value="main" checked' not in page.text
        lists = httpx.post(
            f"{site.url}/preferences/{token}", data={"action": "lists", "list": "main"}
        )
        assert lists.status_code == 200
        assert 'value="main" checked' not in lists.text
        moved = request_move(site, token, NEW)
        assert moved.status_code == 200

        assert member(target, ANN) is None
        assert ledger(target, ANN) == []
        assert queued(target) == []  # no change mail carrying the erased address
        assert ANN not in dump(target)  # type: ignore[arg-type]


def test_forgetting_a_moved_address_takes_it_out_of_the_old_ones_change(project: Path) -> None:
    with running_service(project, **SIGNUP_ENV) as site:
        target = site.settings.database_target
        token = sign(SECRET, "main", ANN)
        assert request_move(site, token, NEW).status_code == 200
        assert httpx.post(change_link(site, ANN, NEW), data={"Move": "Yes"}).status_code == 200
        (moved_to,) = ledger(target, ANN)
        assert moved_to.evidence == {"moved_to": NEW}

        forget(project, NEW)

        assert NEW not in dump(target)  # type: ignore[arg-type]
        (kept,) = ledger(target, ANN)  # the old address's own record stays, without the new
        assert (kept.event, kept.evidence) == ("change", {"moved_to": ERASED})


def test_a_change_link_moves_the_address_once(project: Path) -> None:
    """Replayed after the reader came back to the old address, the link must not move (and
    unsubscribe) it again."""
    with running_service(project, **SIGNUP_ENV) as site:
        target = site.settings.database_target
        token = sign(SECRET, "main", ANN)
        assert request_move(site, token, NEW).status_code == 200
        link = change_link(site, ANN, NEW)
        assert httpx.post(link, data={"Move": "Yes"}).status_code == 200
        assert member(target, NEW).status is Status.CONFIRMED  # type: ignore[union-attr]
        back = httpx.post(f"{site.url}/resubscribe/{token}", data={"Resubscribe": "Yes"})
        assert back.status_code == 200  # the old address gets the list again

        replay = httpx.post(link, data={"Move": "Yes"})

        assert replay.status_code == 409
        assert "链接已使用过" in replay.text  # "This link was used already"
        with open_database(target) as database:
            assert not database.suppressions.contains("main", ANN)
        assert [e.event for e in ledger(target, ANN)] == ["change", "resubscribe"]


@pytest.mark.slow
def test_a_click_on_a_forgotten_readers_link_leads_on_and_keeps_nothing(project: Path) -> None:
    """forget keeps their delivery rows (without them) for the counts: a per-reader click
    token still names such a row, and must not start a new record of the person."""
    with running_service(project, NEWSLETTER_TRACKING__CLICKS="per-reader") as site:
        ann, bob = tracked_send(site.settings, [ANN, "bob@example.org"])
        forget(project, ANN)

        assert httpx.get(ann.tracked()[2], follow_redirects=False).status_code == 302
        assert httpx.get(bob.tracked()[2], follow_redirects=False).status_code == 302

        deadline = time.monotonic() + 10  # the endpoint writes its events in batches
        while True:
            with open_database(site.settings.database_target) as database:
                kept = [e.row for e in database.clicks.events(14, "main")]
            if kept or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert kept == [bob.row]  # Ann's click came first and was not kept


@pytest.mark.slow
def test_after_forget_no_table_and_no_byte_of_the_outbox_holds_the_address(
    project: Path,
) -> None:
    """Everything a reader leaves, made through the running site (signup, confirmation, a
    tracked click, an address change and back) and by a send (a refused reply, bounce reports):
    after `forget`, run while the site holds the outbox open, no column of any table and no byte
    of the file or its WAL holds the address."""
    env = {**SIGNUP_ENV, "NEWSLETTER_TRACKING__CLICKS": "per-reader"}
    with running_service(project, **env) as site:
        target = site.settings.database_target
        assert isinstance(target, Path)
        post_signup(site.url, ANN)
        found = member(target, ANN)
        assert found is not None
        when = int(time.time()) + 600
        confirm = sign_link(SECRET, LinkTarget(Purpose.CONFIRM, "main", ANN, found.nonce, when))
        assert httpx.post(f"{site.url}/confirm/{confirm}", data={"Confirm": "Yes"}).is_success
        ann, _ = tracked_send(site.settings, [ANN, "bob@example.org"])
        assert httpx.get(ann.tracked()[2], follow_redirects=False).status_code == 302
        with open_database(target) as database:
            said = f"550 5.1.1 <{ANN}>: Recipient address rejected"
            assert record(database, ann.row, DeliveryStatus.REJECTED, code=550, reply=said)
            database.bounces.record("<r1@x>", ann.row, "hard", "5.1.1", said, "dsn")
            database.bounces.hold("<r2@x>", ann.row, "complaint", "", said, "arf", "x@y", "u")
        token = sign(SECRET, "main", ANN)
        assert request_move(site, token, NEW).status_code == 200
        assert httpx.post(change_link(site, ANN, NEW), data={"Move": "Yes"}).is_success
        deadline = time.monotonic() + 10  # the click is written in a batch
        while _clicks(target) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)

        forget(project, ANN)

        assert ANN not in dump(target).lower()
        assert ANN.encode() not in raw_bytes(target)
        assert _clicks(target) == 0  # the click named Ann's row
        assert NEW in dump(target)  # the new address was not asked to be forgotten


def _clicks(path: Path) -> int:
    with open_database(path) as database:
        ((n,),) = database.backend.fetch("SELECT count(*) FROM clicks")
        return int(n)
