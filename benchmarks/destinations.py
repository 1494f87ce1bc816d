"""A send of 10,000 to four destination domains where one throttles, next to the same send with
no throttle, in the same run: how long the other three domains take to be all delivered.

The send is the real engine (`deliver`, as `newsletter send` runs it in one process: lease,
plan, deliver, a fresh SQLite delivery log) against an aiosmtpd server on loopback. In the
throttled run, every message to `d.test` is answered `421 4.7.28 ... rate limited` at RCPT until
the other three domains have all been received, then accepted. The figure is the time from the
start until the last message of the other three arrived; the reference is the same figure for
the run with no throttle. Each row is the middle of `--repeat` pairs, run in turn.

Run: `python benchmarks/destinations.py` (add `--count 2000` for a quick look).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the servers in tests/support/
from aiosmtpd.smtp import SMTP, Envelope, Session  # noqa: E402

from newsletter.config.settings import SmtpSettings  # noqa: E402
from newsletter.database import open_database  # noqa: E402
from newsletter.models import OutgoingMessage, Subscriber  # noqa: E402
from newsletter.send.job import Job, Options  # noqa: E402
from newsletter.send.smtp import Pool  # noqa: E402
from support.database import Listing, deliver  # noqa: E402

DOMAINS = ("a.test", "b.test", "c.test", "d.test")
THROTTLE = "421 4.7.28 [192.0.2.1] unusual rate of unsolicited mail: temporarily rate limited"
OPTIONS = Options(concurrency=4, retry_base=0.05, retry_cap=0.5, breaker_threshold=1000)


def build(sub: Subscriber, stored: str | None = None, row_id: int = 0) -> OutgoingMessage:
    mid = stored or f"<{row_id}.{sub.envelope}>"
    body = ("x" * 76 + "\r\n") * 26  # about 2 KB in lines of 78 octets
    data = f"From: n@example.org\r\nTo: {sub.envelope}\r\nMessage-ID: {mid}\r\n\r\n{body}\r\n"
    return OutgoingMessage(
        message_id=mid, sender="n@example.org", recipient=sub.envelope, data=data.encode()
    )


class Sink:
    """aiosmtpd's handler: `d.test` throttled at RCPT (when `throttling`) until the other three
    domains' messages have all arrived; when the last of them did."""

    def __init__(self, others: set[str], throttling: bool) -> None:
        self.left = set(others)
        self.throttling = throttling
        self.throttles = 0
        self.done_at = 0.0

    async def handle_RCPT(  # noqa: N802 (aiosmtpd's hook name)
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if self.throttling and self.left and address.endswith("@d.test"):
            self.throttles += 1
            return THROTTLE
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 (aiosmtpd's hook name)
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        self.left.difference_update(envelope.rcpt_tos)
        if not self.left and not self.done_at:
            self.done_at = time.perf_counter()
        return "250 OK"


async def one_send(count: int, throttled: bool, folder: Path) -> tuple[float, float, int]:
    """(seconds until the other three domains were all received, seconds for the whole send,
    throttle replies given)."""
    readers = [f"r{i}@{DOMAINS[i % 4]}" for i in range(count)]
    sink = Sink({r for r in readers if not r.endswith("@d.test")}, throttled)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(sink), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    job = Job(14, "main", Listing(lambda: [Subscriber(envelope=r) for r in readers]), build)
    database = open_database(folder / f"outbox-{throttled}.sqlite3")
    try:
        smtp = SmtpSettings(host="127.0.0.1", port=port, security="none")
        pool = Pool(smtp, password=None, size=OPTIONS.concurrency)
        started = time.perf_counter()
        report = await deliver(job, pool, database, OPTIONS)
        ended = time.perf_counter()
    finally:
        database.close()
        server.close()
        await server.wait_closed()
    if not report.complete:
        raise SystemExit(f"the send did not complete: {report.stopped or dict(report.counts)}")
    return sink.done_at - started, ended - started, sink.throttles


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            plain = await one_send(args.count, False, folder)
            slowed = await one_send(args.count, True, folder)
            pairs.append((slowed[0] / plain[0], plain, slowed))
    ratio, plain, slowed = sorted(pairs)[len(pairs) // 2]
    print(f"{args.count:,} messages to 4 domains, {OPTIONS.concurrency} sessions, aiosmtpd")
    print("| figure | one domain throttling | no throttle (same run) | ratio |")
    print("| --- | --- | --- | --- |")
    print(
        f"| the other three domains all delivered | {slowed[0]:.2f} s | {plain[0]:.2f} s"
        f" | {ratio:.2f} |"
    )
    print(
        f"| the whole send | {slowed[1]:.2f} s ({slowed[2]:,} throttle replies) |"
        f" {plain[1]:.2f} s | {slowed[1] / plain[1]:.2f} |"
    )
    print(
        f"(ratios of the {args.repeat} pairs: {statistics.median(p[0] for p in pairs):.2f} median)"
    )


if __name__ == "__main__":
    asyncio.run(main())
