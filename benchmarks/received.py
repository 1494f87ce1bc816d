"""Opening a captured message in the preview's Mailbox, next to the same bytes opened unbounded.

For each message (issue 14's test send, and messages built to be slow), both sides run in a
fresh process that reads the file and reports its time and how much its peak memory grew:
  - ours: what the message page and its frame cost, `open_received` (bounded read, structure
    measure, parse, headers, parts) then `email_document(disarm_frames(html))`;
  - the reference: the standard library taking the same bytes apart with nothing bounded
    (BytesParser with compat32, every leaf part decoded in its declared charset, every header
    decoded, the HTML's <style> blocks found with one pattern), killed after CAP seconds.
Times are the median of warm repeats (one run when a side takes over 0.5 s).
Run: `.venv/bin/python benchmarks/received.py [--cap SECONDS]`.
"""

from __future__ import annotations

import argparse
import email.header
import email.parser
import email.policy
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from newsletter.config.settings import load_settings
from newsletter.web.preview.pages import email_document
from newsletter.web.preview.received import READ_LIMIT, disarm_frames, open_received
from newsletter.web.preview.workspace import build_view

ROOT = Path(__file__).resolve().parents[1]


def nested(depth: int, tail: bytes = b"") -> bytes:
    opening = b"".join(
        b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (n, n)
        for n in range(depth)
    )
    return b"Subject: nested\r\n" + opening + b"Content-Type: text/plain\r\n\r\ndeep\r\n" + tail


def messages() -> dict[str, bytes]:
    view = build_view(load_settings(ROOT / "newsletter.toml", environ={}), 14)
    html = b"<html><head></head><body>" + b"<style " * 100_000 + b"</body></html>"
    return {
        "issue 14 test send": view.message,
        "900 nested multiparts": nested(900),
        "40 nested, then 1M lines": nested(40, b"\r\n" * 1_000_000),
        "200,000 sibling parts": b"Subject: s\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n"
        + b"--x\r\n\r\n" * 200_000,
        "Content-Type with 100,000 semicolons": b'Content-Type: multipart/mixed; x="'
        + b";" * 100_000
        + b'"; boundary=b\r\n\r\n--b\r\n\r\nhi\r\n--b--\r\n',
        "200 KB of punycode": b"Content-Type: text/plain; charset=punycode\r\n\r\n"
        + b"a" * 100_000
        + b"-"
        + b"b" * 100_000,
        "HTML of 100,000 unclosed `<style`": b"Content-Type: text/html\r\n\r\n" + html,
    }


def run_ours(path: Path) -> None:
    with path.open("rb") as handle:
        data = handle.read(READ_LIMIT)
    message = open_received(data, path.stat().st_size)
    if message.html is not None:
        email_document(disarm_frames(message.html), "dark")


def run_reference(path: Path) -> None:
    message = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(path.read_bytes())
    for part in message.walk():
        for value in part.values():
            email.header.decode_header(str(value))
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            text = payload.decode(part.get_content_charset() or "utf-8", "replace")
            if part.get_content_type() == "text/html":
                # The usual way to switch a message's dark rules (the preview's, until it met
                # hostile markup): one DOTALL pattern over the whole document.
                _STYLE.sub(lambda block: block.group(0), text)


_STYLE = re.compile(r"<style\b.*?</style\s*>", re.IGNORECASE | re.DOTALL)


def measure(side: str, path: Path, cap: float) -> tuple[float | None, float | None]:
    """(seconds, MB the peak memory grew) of one side in a fresh process; (None, None) past
    `cap`."""
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--run", side, str(path)],
            capture_output=True,
            text=True,
            timeout=cap,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None, None
    except subprocess.CalledProcessError as exc:
        print(f"{side} failed on {path.name}: {exc.stderr.strip().splitlines()[-1]}")
        return None, None
    seconds, peak = done.stdout.split()
    return float(seconds), float(peak)


def shown(seconds: float | None, grown: float | None, cap: float) -> str:
    if seconds is None or grown is None:
        return f"> {cap:.0f} s (killed)"
    return f"{seconds * 1000:,.1f} ms, +{grown:.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cap", type=float, default=60.0)
    parser.add_argument("--run", nargs=2, metavar=("SIDE", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        side, file = args.run
        work = run_ours if side == "ours" else run_reference
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        work(Path(file))
        times = [time.perf_counter() - started]
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        # Warm (regexes compiled, codecs imported), as a running preview is; the slow ones once.
        while times[0] < 0.5 and len(times) < 31:
            started = time.perf_counter()
            work(Path(file))
            times.append(time.perf_counter() - started)
        print(statistics.median(times[1:] or times), grown / 1024)
        return
    print(
        "| message | size | ours: open + frame | reference: stdlib, unbounded | ours ÷ reference |"
    )
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as folder:
        for name, data in messages().items():
            path = Path(folder) / "message.eml"
            path.write_bytes(data)
            ours = measure("ours", path, args.cap)
            reference = measure("reference", path, args.cap)
            if ours[0] is None:
                ratio = "—"
            elif reference[0] is None:
                ratio = f"< 1/{args.cap / ours[0]:,.0f}"
            elif ours[0] < reference[0] / 10:
                ratio = f"1/{reference[0] / ours[0]:,.0f}"
            else:
                ratio = f"{ours[0] / reference[0]:.2f}×"
            print(
                f"| {name} | {len(data) / 1024:,.0f} KB | {shown(*ours, args.cap)} |"
                f" {shown(*reference, args.cap)} | {ratio} |"
            )


if __name__ == "__main__":
    main()
