"""A list's recipients: its CSV and its confirmed subscribers in the outbox, each once, less the
suppressed (a `skipped` row) and the forgotten (no row at all), streamed where planning reads
the list; a list may have no CSV. Real `newsletter send` runs against a real SMTP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.mail.tokens import SigningKey
from newsletter.signup.forgetting import forget
from support.sendcli import SECRET, environment, newsletter, sqlite_states
from support.smtp import FaultyHandler, start

CSV = ["alice@example.net", "bob@example.org", "carol@example.com"]


def _fill(project: Path) -> None:
    (project / "list.csv").write_text(
        "email,name\n" + "".join(f"{a},{a[0].upper()}\n" for a in CSV), encoding="utf-8"
    )
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        roster = database.roster
        for address in ("dan@example.org", "erin@example.org", "bob@example.org"):
            roster.add("main", address, address, address, "In the outbox", "signup")
        roster.sign_up("main", "pending@example.org", "pending@example.org", "p", "n", "signup")
        roster.add("staging", "other@example.org", "other@example.org", "o", "", "signup")
        database.suppressions.add("main", "erin@example.org", "one-click")
        forget(
            database.backend,
            SigningKey(SECRET.encode(), ephemeral=False),
            "carol@example.com",  # still in the CSV: never mailed again
        )


@pytest.mark.slow
async def test_the_csv_and_the_confirmed_subscribers_each_once(project: Path) -> None:
    _fill(project)
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
        done = await newsletter(["send", "--issue", "14", "--yes"], env, project)
    assert done.code == 0, done.err
    assert sorted(handler.by_recipient) == [
        "alice@example.net",
        "bob@example.org",
        "dan@example.org",
    ]
    assert max(handler.by_recipient.values()) == 1
    states = sqlite_states(project)
    assert states["erin@example.org"][0] == "skipped"  # suppressed: accounted for
    assert "pending@example.org" not in states  # never confirmed
    assert not [r for r in states if r.startswith("carol")]
    bob = next(r for r in handler.received if r.recipients == ["bob@example.org"])
    assert b"To: B <bob@example.org>" in bob.data  # the CSV's row, named as it names him


@pytest.mark.slow
async def test_a_list_without_a_csv_sends_to_its_subscribers(project: Path) -> None:
    config = project / "newsletter.toml"
    config.write_text(config.read_text() + "\n[lists.signups]\nsignup = true\n", encoding="utf-8")
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        database.roster.add("signups", "dan@example.org", "dan@example.org", "d", "", "x")
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        done = await newsletter(
            ["send", "--issue", "14", "--list", "signups", "--yes"], env, project
        )
    assert done.code == 0, done.err
    assert list(handler.by_recipient) == ["dan@example.org"]


@pytest.mark.slow
async def test_a_dry_run_counts_them_all(project: Path) -> None:
    _fill(project)
    env = environment(1, NEWSLETTER_LISTS__MAIN__PATH="list.csv")
    done = await newsletter(["send", "--issue", "14", "--dry-run", "--out", "out"], env, project)
    assert done.code == 0, done.err
    assert (
        "main (list.csv): 2 valid, 0 duplicate, 0 invalid, 0 unsubscribed, 1 suppressed,"
        " 1 subscribers, 1 also in the CSV, 1 forgotten"
    ) in done.out
    assert sorted(p.name.split("-", 1)[1] for p in (project / "out").glob("*.eml")) == [
        "alice@example.net.eml",
        "bob@example.org.eml",
        "dan@example.org.eml",
    ]
