"""Per-recipient message building and list loading, measured and printed as a table.

1. Issue 14 rendered once, then one message per recipient: MessageFactory.build (fill the
   placeholders, re-encode the lines they touch, join bytes) against the naive way in the same
   run (a fresh EmailMessage with set_content/add_alternative and as_bytes per recipient).
   Median microseconds per message; the naive way runs on fewer recipients since it is slow.
2. Click tracking: the same build with `[tracking] clicks` per-reader and aggregate against off
   (the factory fills one click token per link per message in per-reader mode), interleaved.
3. DKIM (throwaway keys): what signing adds to MessageFactory.build (signed minus unsigned, the
   two factories built from the same settings), against the floor measured in the same run and on
   the same recipients, interleaved: one RSA-2048 signature with `cryptography` (OpenSSL) plus the
   SHA-256 of that recipient's body, what any signer must spend. Also with an Ed25519 signature
   beside the RSA one, and for the same issue with its non-ASCII letters replaced by ASCII ones
   (quoted-printable parts, whose lines are canonicalized, where base64 lines are not).
4. Unsubscribe and click tokens: making and checking one (AES-SIV), against one HMAC-SHA256 over
   the same list and address in the same run (what the first, readable token format cost).
5. A generated 1,000,000-row CSV loaded by read_subscribers in a child process: wall seconds and
   the child's peak RSS (so nothing of this process's own memory is counted).

Run: `.venv/bin/python benchmarks/messages.py [--rows N] [--recipients N]`.
"""

from __future__ import annotations

import argparse
import email.policy
import email.utils
import hashlib
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

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa, utils

from newsletter.config.settings import DkimSettings, Settings, load_settings
from newsletter.issues import load_issue
from newsletter.mail.clicktokens import LinkTokens, click_token, verify_click
from newsletter.mail.message import MessageFactory
from newsletter.mail.tokens import sign, verify
from newsletter.mail.tracking import render_for_sending
from newsletter.models import Placeholder, RenderedEmail, Subscriber
from newsletter.rendering.places import Place, Region
from newsletter.rendering.render import render_issue

ROOT = Path(__file__).resolve().parents[1]
SECRET = b"benchmark-secret-0123456789abcdef"
PrivateKey = rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
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


def with_dkim(
    settings: Settings, folder: Path, *, ed25519_too: bool = False
) -> tuple[Settings, list[PrivateKey]]:
    """The same settings plus a [dkim] table with a throwaway RSA-2048 key (and an Ed25519 one
    beside it), and the keys."""
    keys: list[PrivateKey] = [rsa.generate_private_key(public_exponent=65537, key_size=2048)]
    (folder / "dkim.pem").write_bytes(pem(keys[0]))
    if ed25519_too:
        keys.append(ed25519.Ed25519PrivateKey.generate())
        (folder / "dkim-ed.pem").write_bytes(pem(keys[1]))
    config = DkimSettings(
        domain="news.example.org",
        selector="bench",
        private_key=folder / "dkim.pem",
        ed25519_key=folder / "dkim-ed.pem" if ed25519_too else None,
        ed25519_selector="bench-ed" if ed25519_too else "",
    )
    return settings.model_copy(update={"dkim": config}), keys


def pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


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
        ("message size factory / naive", f"{size / 1024:.1f} KB / {naive_size / 1024:.1f} KB"),
    ]


def bench_tracking(recipients: int) -> list[tuple[str, str]]:
    """factory.build with `[tracking] clicks` on against off, on the same recipients and rows,
    interleaved: per-reader fills one token per link (one AES call makes them all), aggregate
    fills nothing more per reader."""
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    issue = load_issue(settings.issues_dir, 14)
    factories = {}
    for mode in ("off", "per-reader", "aggregate"):
        chosen = settings.model_copy(
            update={"tracking": settings.tracking.model_copy(update={"clicks": mode})}
        )
        sending = render_for_sending(issue, chosen, "main")
        factories[mode] = MessageFactory(
            sending.rendered, chosen, "main", secret=SECRET, links=sending.links
        )
    links = len(render_for_sending(issue, chosen, "main").links)
    subscribers = people(recipients)
    clock = time.perf_counter_ns
    times: dict[str, list[float]] = {mode: [] for mode in factories}
    for round_ in range(2):  # the first round warms the per-offset line caches
        for row, subscriber in enumerate(subscribers, start=1):
            for mode, factory in factories.items():
                start = clock()
                factory.build(subscriber, None, row)
                if round_:
                    times[mode].append((clock() - start) / 1000)
    off, per_reader, aggregate = (statistics.median(times[m]) for m in factories)
    return [
        (
            f"tracking off / per-reader / aggregate, build ({links} links), median of "
            f"{recipients:,}",
            f"{off:.0f} / {per_reader:.0f} / {aggregate:.0f} µs",
        ),
        (
            "  per-reader / off, aggregate / off",
            f"{per_reader / off:.2f}x  (target <= 1.5x), {aggregate / off:.2f}x",
        ),
    ]


def bench_dkim(recipients: int) -> list[tuple[str, str]]:
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    latin = rendered.model_copy(
        update={
            "html": ascii_letters(rendered.html),
            "text": ascii_letters(rendered.text),
            "subject": ascii_letters(rendered.subject),
        }
    )
    subscribers = people(recipients)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "rsa").mkdir()
        (Path(folder) / "both").mkdir()
        rsa_only = with_dkim(settings, Path(folder) / "rsa")
        both = with_dkim(settings, Path(folder) / "both", ed25519_too=True)
        cases = [
            ("issue 14 (base64 parts), RSA-2048", rendered, rsa_only, "RSA-2048"),
            ("issue 14, RSA-2048 + Ed25519", rendered, both, "RSA-2048 + Ed25519"),
            ("issue 14 in ASCII letters (quoted-printable), RSA", latin, rsa_only, "RSA-2048"),
        ]
        for label, email_, (signed_with, keys), signatures in cases:
            plain = MessageFactory(email_, settings, "main", secret=SECRET)
            signed = MessageFactory(email_, signed_with, "main", secret=SECRET)
            unsigned_us, signed_us, floor_us = time_signing(plain, signed, keys, subscribers)
            added = signed_us - unsigned_us
            rows += [
                (f"{label}: build unsigned / signed", f"{unsigned_us:.0f} / {signed_us:.0f} µs"),
                (
                    f"  added by DKIM / floor ({signatures} + SHA-256 of the body)",
                    f"{added:.0f} / {floor_us:.0f} µs: {added / floor_us:.2f}x"
                    + ("" if rows else "  (target <= 1.2x)"),
                ),
            ]
    return rows


def ascii_letters(text: str) -> str:
    """`text` with every non-ASCII character an ASCII letter (a Latin-script issue's shape)."""
    return "".join(c if c.isascii() else "abcdefghij"[ord(c) % 10] for c in text)


def time_signing(
    plain: MessageFactory,
    signed: MessageFactory,
    keys: list[PrivateKey],
    subscribers: list[Subscriber],
) -> tuple[float, float, float]:
    """Median µs of the unsigned build, the signed build and the floor (the SHA-256 of the
    body and one signature with each key, by `cryptography`), taken in turn per recipient so
    that a change of the machine's load reaches all three alike."""
    clock = time.perf_counter_ns
    unsigned, signed_times, floor = [], [], []
    for round_ in range(2):  # the first round warms the per-offset line caches
        for subscriber in subscribers:
            start = clock()
            message = plain.build(subscriber)
            middle = clock()
            signed.build(subscriber)
            end = clock()
            body = message.data.partition(b"\r\n\r\n")[2]
            floor_start = clock()
            digest = hashlib.sha256(body).digest()
            for key in keys:
                if isinstance(key, rsa.RSAPrivateKey):
                    key.sign(digest, padding.PKCS1v15(), utils.Prehashed(hashes.SHA256()))
                else:
                    key.sign(digest)
            floor_end = clock()
            if round_:
                unsigned.append((middle - start) / 1000)
                signed_times.append((end - middle) / 1000)
                floor.append((floor_end - floor_start) / 1000)
    return statistics.median(unsigned), statistics.median(signed_times), statistics.median(floor)


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
from newsletter.importers.subscribers import ListReport, read_subscribers
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
    parser.add_argument("--signed-recipients", type=int, default=2_000)
    args = parser.parse_args()
    table = bench_messages(args.recipients, args.naive_recipients)
    table += bench_tracking(args.recipients)
    table += bench_dkim(args.signed_recipients)
    table += bench_tokens()
    table += bench_loading(args.rows)
    width = max(len(label) for label, _ in table)
    print(f"{'benchmarks/messages.py':<{width}}  (Python {sys.version.split()[0]})")
    for label, value in table:
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
