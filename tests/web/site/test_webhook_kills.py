"""A webhook batch and a mailbox of reports, each cut short by SIGKILL part-way and delivered
again: every event applied exactly once, none "already counted" without having been applied.
The site is a real `newsletter serve` process, the outbox a SQLite file or the test session's
PostgreSQL; the kill waits on rows appearing in the outbox, never on a sleep."""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from newsletter.bounces.verp import make_tag
from newsletter.database import Database, open_database
from newsletter.models import DeliveryStatus
from support.database import due, plan
from support.site import SECRET, serve_process
from support.webhooks import sendgrid_signed

KEY = ec.generate_private_key(ec.SECP256R1())
PUBLIC = base64.b64encode(
    KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
).decode()
READERS = [f"reader{n:03}@example.net" for n in range(400)]
KILLS = 3  # each kill a new chance to land between a claim and its application


def sent_to_all(database: Database) -> dict[str, str]:
    """Issue 14 sent to every reader on main: each reader's signed tag."""
    plan(database, 14, "main", READERS)
    journal = database.journal(None)
    rows = due(database, 14, "main")
    for row in rows:
        journal.record(row.id, DeliveryStatus.SENT, code=250, reply="ok")
    journal.commit()
    return {row.recipient: make_tag(SECRET.encode(), row.id) for row in rows}


def complaints(tags: dict[str, str]) -> bytes:
    """One SendGrid batch: a spam report (SendGrid's documented `spamreport` event) per reader."""
    items = [
        {
            "email": reader,
            "timestamp": 1513299569,
            "event": "spamreport",
            "sg_event_id": f"complaint-{n:03}",
            "sg_message_id": f"14c5d75ce93.dfd.64b469.filter0001.{n}.5515E0B88.0",
            "newsletter_tag": tags[reader],
        }
        for n, reader in enumerate(READERS)
    ]
    return json.dumps(items).encode()


def counts(target: Path | str) -> tuple[int, int, int]:
    """Events claimed, complaints recorded, readers suppressed."""
    with open_database(target) as database:
        ((claimed,),) = database.backend.fetch(
            "SELECT count(*) FROM webhook_events WHERE provider = 'sendgrid' AND event_id <> '*'"
        )
        ((recorded,),) = database.backend.fetch(
            "SELECT count(*) FROM bounce_reports WHERE kind = 'complaint'"
        )
        ((suppressed,),) = database.backend.fetch(
            "SELECT count(*) FROM suppressions WHERE list = 'main' AND source = 'complained'"
        )
    return int(claimed), int(recorded), int(suppressed)


@pytest.mark.slow
def test_a_batch_killed_part_way_and_posted_again_applies_each_complaint_once(
    project: Path, database_target: Path | str
) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")},
        "NEWSLETTER_SECRET": SECRET,
        "NEWSLETTER_WEBHOOK_SENDGRID_KEY": PUBLIC,
    }
    if isinstance(database_target, str):
        env["NEWSLETTER_OUTBOX__URL"] = database_target
    else:
        database_target = project / ".newsletter" / "outbox.sqlite3"
    with open_database(database_target) as database:
        tags = sent_to_all(database)
    body = complaints(tags)

    def deliver(base: str, answers: list[object]) -> None:
        try:
            answers.append(
                httpx.post(
                    f"{base}/webhooks/sendgrid",
                    content=body,
                    headers=sendgrid_signed(KEY, body),
                    timeout=60,
                )
            )
        except httpx.TransportError as exc:  # the server died under it: the provider retries
            answers.append(exc)

    claimed = 0
    for _ in range(KILLS):
        answers: list[object] = []
        with serve_process(project, env) as (base, serve):
            poster = threading.Thread(target=deliver, args=(base, answers))
            poster.start()
            while counts(database_target)[0] == claimed:  # being applied: kill it there
                time.sleep(0.002)
            serve.send_signal(signal.SIGKILL)
            serve.wait(timeout=30)
            poster.join(timeout=60)
        claimed, recorded, suppressed = counts(database_target)
        assert claimed < len(READERS), "the kill came after the batch: nothing was cut short"
        assert isinstance(answers[0], httpx.TransportError)  # no 200: the provider retries
        # What the killed process left: each claimed event applied, none claimed but undone.
        assert recorded == claimed
        assert suppressed == claimed
    with serve_process(project, env) as (base, serve):
        again = httpx.post(
            f"{base}/webhooks/sendgrid",
            content=body,
            headers=sendgrid_signed(KEY, body),
            timeout=60,
        )
        assert again.status_code == 200
    assert counts(database_target) == (len(READERS), len(READERS), len(READERS))
    with open_database(database_target) as database:
        per_row = database.backend.fetch(
            "SELECT delivery_id, count(*) FROM bounce_reports GROUP BY delivery_id"
        )
    assert len(per_row) == len(READERS)
    assert {n for _, n in per_row} == {1}
