"""Per-recipient message building and list loading, measured and printed as a table.

1. Issue 14 rendered once, then one message per recipient: MessageFactory.build (fill the
   placeholders, re-encode the lines they touch, join bytes) against the naive way in the same
   run (a fresh EmailMessage with set_content/add_alternative and as_bytes per recipient).
   Median microseconds per message; the naive way runs on fewer recipients since it is slow.
   Also the factory with DKIM signing (a throwaway RSA-2048 key).
2. Unsubscribe and click tokens: making and checking one (AES-SIV), against one HMAC-SHA256 over
   the same list and address in the same run (what the first, readable token format cost).
3. A generated 1,000,000-row CSV loaded by read_subscribers in a child process: wall seconds and
   the child's peak RSS (so nothing of this process's own memory is counted).

Run: `.venv/bin/python benchmarks/messages.py [--rows N] [--recipients N]`.
"""

from __future__ import annotations

import argparse
import email.policy
import email.utils
import hmac
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from newsletter.issues import load_issue
from newsletter.mail.clicktokens import LinkTokens, click_token, verify_click
from newsletter.mail.message import MessageFactory
from newsletter.mail.tokens import sign, verify
from newsletter.models import Placeholder, RenderedEmail, Subscriber
from newsletter.places import CANARY, Place, Region, issue_links
from newsletter.render import render_issue
from newsletter.settings import DkimSettings, Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
SECRET = b"benchmark-secret-0123456789abcdef"
SURNAMES = "李王张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
GIVEN = "伟芳娜秀英敏静丽强磊军洋勇艳杰娟涛明超秀兰霞平刚桂"
LATIN = ["Alice Chen", "Bob", "Dave O'Neil", "Zoë Ünal", "", "María José", "Kim"]
DOMAINS = ["example.com", "qq.example", "163.example", "example.org", "例子.公司", "mail.example"]


def people(count: int, seed: int = 14) -> list[Subscriber]:
    rng = random.Random(seed)
    result = []
    for i in range(count):
        if rng.random() < 0.7:
            name = rng.choice(SURNAMES) + "".join(rng.choices(GIVEN, k=rng.randint(1, 2)))
        else:
            name = rng.choice(LATIN)
        address = f"reader{i}@{rng.choice(DOMAINS[:4])}"
        result.append(Subscriber(envelope=address, name=name))
    return result


def naive_build(
    rendered: RenderedEmail, settings: Settings, subscriber: Subscriber, factory: MessageFactory
) -> bytes:
    """What one would write without a factory: fill strings, let EmailMessage do the rest."""
    url = factory.unsubscribe_url(subscriber)
    name = subscriber.name or settings.newsletter.greeting_fallback
    values = {Placeholder.NAME: name, Placeholder.UNSUBSCRIBE_URL: url}
    values[Placeholder.WEB_URL] = factory.web_url
    text, html = rendered.text, rendered.html
    for word, value in values.items():
        text = text.replace(word, value)
        html = html.replace(word, value)
    message = EmailMessage()
    message["From"] = settings.newsletter.sender
    message["To"] = email.utils.formataddr((subscriber.name, subscriber.envelope))
    message["Subject"] = rendered.subject
    message["Date"] = email.utils.formatdate()
    message["Message-ID"] = factory.message_id(subscriber)
    message["List-Id"] = "AI系统内容推荐 <ai-systems.news.example.org>"
    message["List-Unsubscribe"] = f"<{url}>"
    message["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    message.set_content(text)
    message.add_alternative(html, subtype="html")
    return message.as_bytes(policy=email.policy.SMTP)


def with_dkim(settings: Settings, folder: Path) -> Settings:
    """The same settings plus a [dkim] table with a throwaway 2048-bit key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path = folder / "dkim.pem"
    path.write_bytes(pem)
    config = DkimSettings(domain="news.example.org", selector="bench", private_key=path)
    return settings.model_copy(update={"dkim": config})


def time_each(build: Callable[[Subscriber], object], subscribers: list[Subscriber]) -> list[float]:
    timings = []
    clock = time.perf_counter_ns
    for subscriber in subscribers:
        start = clock()
        build(subscriber)
        timings.append((clock() - start) / 1000)
    return timings


def bench_messages(recipients: int, naive_recipients: int) -> list[tuple[str, str]]:
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    issue = load_issue(settings.issues_dir, 14)
    rendered = render_issue(issue, settings)
    factory = MessageFactory(rendered, settings, "main", secret=SECRET)
    subscribers = people(recipients)
    time_each(factory.build, subscribers[:200])  # warm the per-offset line caches
    fast = statistics.median(time_each(factory.build, subscribers))
    naive = statistics.median(
        time_each(
            lambda s: naive_build(rendered, settings, s, factory), subscribers[:naive_recipients]
        )
    )
    with tempfile.TemporaryDirectory() as folder:
        signed = MessageFactory(rendered, with_dkim(settings, Path(folder)), "main", secret=SECRET)
    dkim_median = statistics.median(time_each(signed.build, subscribers[:1000]))
    # What `per-reader` click tracking adds per message: a token for each link and the canary.
    links = [(link.place, link.url) for link in issue_links(issue)] + [(CANARY, "")]
    tokens = LinkTokens(SECRET, 14, links)
    per_reader = statistics.median(time_each(lambda s: tokens.for_row(12_345), subscribers[:5000]))
    size = statistics.mean(len(factory.build(s).data) for s in subscribers[:100])
    naive_size = statistics.mean(
        len(naive_build(rendered, settings, s, factory)) for s in subscribers[:100]
    )
    return [
        (
            "issue 14 rendered",
            f"{len(rendered.html.encode()) / 1024:.1f} KB HTML, "
            f"{len(rendered.text.encode()) / 1024:.1f} KB text",
        ),
        ("encodings (text, html)", f"{factory.text_encoder.name}, {factory.html_encoder.name}"),
        (f"factory.build, median of {recipients:,}", f"{fast:.0f} µs  (target < 300 µs)"),
        (f"naive EmailMessage, median of {naive_recipients:,}", f"{naive:.0f} µs"),
        ("ratio naive / factory", f"{naive / fast:.1f}x  (target >= 10x)"),
        ("factory.build + DKIM (RSA-2048), median of 1,000", f"{dkim_median:.0f} µs"),
        (
            f"per-reader click tokens of one message ({len(links)} links)",
            f"{per_reader:.0f} µs  ({per_reader / fast:.2f}x factory.build)",
        ),
        ("message size factory / naive", f"{size / 1024:.1f} KB / {naive_size / 1024:.1f} KB"),
    ]


def bench_tokens(count: int = 20_000) -> list[tuple[str, str]]:
    address = "li.lei@example.com"
    token = sign(SECRET, "main", address)

    def each(call: Callable[[], object]) -> float:
        start = time.perf_counter()
        for _ in range(count):
            call()
        return (time.perf_counter() - start) / count * 1e6

    reference = min(
        each(lambda: hmac.digest(SECRET, b"main\n" + address.encode(), "sha256")) for _ in range(3)
    )
    made = min(each(lambda: sign(SECRET, "main", address)) for _ in range(3))
    checked = min(each(lambda: verify(SECRET, token)) for _ in range(3))
    # Click tokens for links deep in a long issue, for the 1,000,000th row of a list.
    url, row = "https://github.com/Oneflow-Inc/oneflow", 10**6
    place = Place(Region.LINKS, 11, 39, 2)
    links = [(Place(Region.LINKS, 11, n // 3, n % 3), url) for n in range(30)]
    tokens = LinkTokens(SECRET, 14, links)
    per_link = min(each(lambda: tokens.for_row(row)) for _ in range(3)) / len(links)
    box_link = min(each(lambda: tokens.for_list("main")) for _ in range(3)) / len(links)
    alone = min(each(lambda: click_token(SECRET, 14, place, url, row=row)) for _ in range(3))
    click = click_token(SECRET, 14, place, url, row=row)
    aggregate = click_token(SECRET, 14, place, url, list_name="main")
    checked_row = min(each(lambda: verify_click(SECRET, click)) for _ in range(3))
    checked_box = min(each(lambda: verify_click(SECRET, aggregate)) for _ in range(3))
    return [
        ("reference: one HMAC-SHA256 of list + address", f"{reference:.1f} µs"),
        ("token made (AES-SIV)", f"{made:.1f} µs  ({made / reference:.1f}x the reference)"),
        ("token checked", f"{checked:.1f} µs  ({checked / reference:.1f}x the reference)"),
        ("token length", f"{len(token)} characters"),
        (
            "click tokens of a message (30 links), per link: per-reader / aggregate",
            f"{per_link:.2f} / {box_link:.1f} µs  "
            f"({per_link / reference:.2f}x / {box_link / reference:.1f}x the reference)",
        ),
        ("a per-reader click token made alone", f"{alone:.1f} µs"),
        (
            "click token checked: per-reader / aggregate",
            f"{checked_row:.1f} / {checked_box:.1f} µs  "
            f"({checked_row / reference:.1f}x / {checked_box / reference:.1f}x the reference)",
        ),
        (
            "click token length, per-reader / aggregate",
            f"{len(click)} / {len(aggregate)} characters",
        ),
    ]


def generate_csv(path: Path, rows: int) -> None:
    rng = random.Random(1)
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write("email,name,status,company\n")
        for i in range(rows):
            name = rng.choice(SURNAMES) + rng.choice(GIVEN) if i % 3 else rng.choice(LATIN)
            status = "unsubscribed" if i % 50 == 0 else "subscribed"
            domain = DOMAINS[i % len(DOMAINS)]
            handle.write(f"user.{i}@{domain},{name},{status},Company {i % 997}\n")
        handle.write(f"not-an-address,Broken,subscribed,\nUSER.1@{DOMAINS[1].upper()},Dup,,\n")


CHILD = """
import resource, sys, time
from pathlib import Path
from newsletter.subscribers import ListReport, read_subscribers
path = Path(sys.argv[1])
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
report = ListReport(path)
count = sum(1 for _ in read_subscribers(path, report))
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(seconds, peak, baseline, count, report.duplicate, report.invalid, report.unsubscribed)
"""


def bench_loading(rows: int) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "list.csv"
        generate_csv(path, rows)
        size = path.stat().st_size
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True
        ).stdout.split()
    seconds, peak_kb, base_kb = float(out[0]), int(out[1]), int(out[2])
    valid, dup, invalid, unsub = (int(x) for x in out[3:7])
    return [
        (f"CSV of {rows:,} rows", f"{size / 2**20:.0f} MB on disk"),
        ("load time", f"{seconds:.1f} s ({rows / seconds:,.0f} rows/s)"),
        (
            "peak RSS",
            f"{peak_kb / 1024:.0f} MB  (target < 200 MB; after imports {base_kb / 1024:.0f} MB)",
        ),
        (
            "valid / duplicate / invalid / unsubscribed",
            f"{valid:,} / {dup} / {invalid} / {unsub:,}",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=10_000)
    parser.add_argument("--naive-recipients", type=int, default=500)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    table = bench_messages(args.recipients, args.naive_recipients)
    table += bench_tokens()
    table += bench_loading(args.rows)
    width = max(len(label) for label, _ in table)
    print(f"{'benchmarks/messages.py':<{width}}  (Python {sys.version.split()[0]})")
    for label, value in table:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
