"""A list's CSV as `check` and `send` see it before anything goes out (issue 41): rows a send
would skip are a warning with counts and the rows named; another tool's header is pointed at
`subscribers import`; a semicolon-separated file is read as one. Real subprocesses, real SMTP."""

from __future__ import annotations

import email
import email.policy
from pathlib import Path

import pytest

from support.sendcli import environment, newsletter
from support.smtp import FaultyHandler, start

# 6 rows: one good, 4 invalid, one unsubscribed (counted, not a fault).
SIX_ROWS = (
    "email,name,status\n"
    "good@example.org,Good,\n"
    "not-an-address,Bad,\n"
    ",Empty,\n"
    "two@@example.org,Two,\n"
    "left@example.org,Left,unsubscribed\n"
    "x@,X,\n"
)
WARNING = (
    "warning: subscribers.example.csv: 4 of 6 row(s) get nothing (4 invalid): "
    "subscribers.example.csv:3, subscribers.example.csv:4, subscribers.example.csv:5, "
    "subscribers.example.csv:7; `newsletter subscribers` names each row's fault [list]"
)


@pytest.mark.slow
async def test_invalid_rows_are_a_check_warning_before_the_send(project: Path) -> None:
    (project / "subscribers.example.csv").write_text(SIX_ROWS, encoding="utf-8")
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        checked = await newsletter(["check", "--issue", "14"], env, project)
        sent = await newsletter(["send", "--issue", "14", "--yes"], env, project)
    assert checked.code == 0, checked.err
    assert WARNING in checked.out
    assert sent.code == 0, sent.err
    assert WARNING in sent.err + sent.out  # the send's own check says it before planning
    assert list(handler.by_recipient) == ["good@example.org"]


async def test_a_mailchimp_header_points_to_subscribers_import(project: Path) -> None:
    (project / "subscribers.example.csv").write_text(
        "Email Address,First Name,Last Name\nann@example.org,Ann,Lee\n", encoding="utf-8"
    )
    env = environment(1)
    checked = await newsletter(["check", "--issue", "14"], env, project)
    listed = await newsletter(["subscribers"], env, project)
    assert checked.code == 1, checked.out
    assert "[list]" in checked.out
    for done in (checked, listed):
        text = done.out + done.err
        assert "has no `email` column" in text
        assert "newsletter subscribers import subscribers.example.csv --format mailchimp" in text
        assert "Traceback" not in text


@pytest.mark.slow
async def test_a_semicolon_separated_list_is_read_as_its_columns(project: Path) -> None:
    (project / "subscribers.example.csv").write_text(
        "email;name\r\nann@example.org;Ann Lee\r\nbob@example.org;Bob, Jr.\r\n",
        encoding="utf-8",
    )
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port)
        listed = await newsletter(["subscribers"], env, project)
        sent = await newsletter(["send", "--issue", "14", "--yes"], env, project)
    assert listed.code == 0, listed.out + listed.err
    assert "main (subscribers.example.csv): 2 valid, 0 duplicate, 0 invalid" in listed.out
    assert sent.code == 0, sent.err
    assert sorted(handler.by_recipient) == ["ann@example.org", "bob@example.org"]
    to = [
        email.message_from_bytes(r.data, policy=email.policy.default)["To"]
        for r in handler.received
    ]
    assert '"Bob, Jr." <bob@example.org>' in to  # the comma inside the field stayed in the name
