"""The capture server against the real SMTP client: what it stores, and reading it back."""

from __future__ import annotations

import mailbox
from pathlib import Path

import pytest

from newsletter.config.settings import SmtpSettings
from newsletter.send.mailbox import captured_messages, serve_mailbox
from newsletter.send.replies import Outcome
from newsletter.send.smtp import Pool
from support.smtp import Marks, make_message, send_one


@pytest.mark.slow
async def test_mailbox_stores_each_message_in_a_maildir(tmp_path: Path) -> None:
    seen: list[str] = []
    server = await serve_mailbox(tmp_path / "mailbox", lambda c: seen.append(c.recipient), port=0)
    port = server.sockets[0].getsockname()[1]
    settings = SmtpSettings(host="127.0.0.1", port=port, security="none")
    pool = Pool(settings, password=None, size=1)
    for n in range(3):
        assert (await send_one(pool, make_message(n), Marks())).outcome == Outcome.SENT
    await pool.close()
    server.close()
    await server.wait_closed()
    box = mailbox.Maildir(tmp_path / "mailbox", create=False)
    subjects = sorted(str(m["Subject"]) for m in box)
    assert subjects == ["t0", "t1", "t2"]
    assert seen == ["r0@example.com", "r1@example.com", "r2@example.com"]
    assert all(m["Delivered-To"] for m in box)
    listed = captured_messages(tmp_path / "mailbox")
    assert sorted(c.subject for c in listed) == ["t0", "t1", "t2"]
    assert {c.recipient for c in listed} == {"r0@example.com", "r1@example.com", "r2@example.com"}
    assert {c.sender for c in listed} == {"a@example.org"}
    assert {c.key for c in listed} == set(box.keys())
    assert captured_messages(tmp_path / "nothing-here") == []
