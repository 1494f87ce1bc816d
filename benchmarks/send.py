"""Send issue 14 to 10,000 recipients against Postfix's smtp-sink, next to Postfix's smtp-source.

Both senders talk to the same smtp-sink on loopback in the same run, with the same number of
SMTP sessions and messages of the same size; smtp-source runs just before and just after ours and
the faster of the two is the reference (the stricter choice: smtp-source itself swings by a third
between runs here), so the ratio (ours / smtp-source) is fair on this machine. Each row is the
middle of `--repeat` such trials (three by default).
Ours is the real `newsletter send` (a fresh delivery log, the real message factory, the shipped
connection recycling); its time is the send phase its own summary reports, and the whole
command's wall time is shown too, and what the command spends before its send phase (its wall
time less the send phase its summary reports: the start, the checks, SpamAssassin's score of a
fresh project, which keeps none, and the planning of the first batch). Peak RSS is the largest
`newsletter send` process's.

Then the same send DKIM-signed (a [dkim] table with a throwaway RSA-2048 key) against it
unsigned, the two run in turn against the same sink, `--repeat` times each; the middle trial by
the ratio of their whole commands is shown.

Run: `make bench` or `python benchmarks/send.py` (needs the Debian package postfix).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from newsletter.config.settings import load_settings
from newsletter.issues import load_issue
from newsletter.mail.message import MessageFactory
from newsletter.models import Subscriber
from newsletter.rendering.render import render_issue

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from support.project import copy_project  # noqa: E402

# Debian installs both into sbin, which is not on every PATH.
_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
SINK = shutil.which("smtp-sink", path=_SEARCH) or "smtp-sink"
SOURCE = shutil.which("smtp-source", path=_SEARCH) or "smtp-source"
SECRET = "benchmark-secret-0123456789abcdef"
SUMMARY = re.compile(r"\((\d+) sent by this run in ([\d.]+) s")


def require_postfix() -> None:
    """smtp-sink and smtp-source, or a clear stop."""
    for tool in (SINK, SOURCE):
        if shutil.which(tool, path=_SEARCH) is None:
            raise SystemExit(f"{tool} not found: install the Debian package postfix")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_sink(port: int) -> subprocess.Popen[bytes]:
    args = [SINK]
    if os.geteuid() == 0:
        args += ["-u", "nobody"]
    proc = subprocess.Popen([*args, f"127.0.0.1:{port}", "1024"], stdout=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("smtp-sink did not start")


def message_size() -> int:
    settings = load_settings(ROOT / "newsletter.toml", environ={})
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    factory = MessageFactory(rendered, settings, "main", secret=SECRET.encode())
    sample = Subscriber(envelope="reader00001@example.com")
    return len(factory.build(sample).data)


def run_source(port: int, sessions: int, messages: int, size: int) -> float:
    start = time.perf_counter()
    args = [SOURCE, "-d", "-s", str(sessions), "-m", str(messages), "-l", str(size)]
    args += ["-f", "digest@news.example.org", "-t", "reader@example.com", f"127.0.0.1:{port}"]
    subprocess.run(
        args,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return messages / (time.perf_counter() - start)


def temporary_project(prefix: str) -> Path:
    """The repo's config, issues and templates in a fresh temporary folder."""
    return copy_project(Path(tempfile.mkdtemp(prefix=prefix)))


def make_project(messages: int, dkim_key: bytes | None = None) -> Path:
    """A project with a list of `messages` readers; with `dkim_key` (PEM), a [dkim] table."""
    folder = temporary_project("newsletter-bench-")
    rows = "".join(f"reader{i:05d}@example.com,Reader {i}\n" for i in range(messages))
    (folder / "bench.csv").write_text("email,name\n" + rows, encoding="utf-8")
    if dkim_key is not None:
        (folder / "dkim.pem").write_bytes(dkim_key)
        with (folder / "newsletter.toml").open("a", encoding="utf-8") as config:
            config.write(
                '\n[dkim]\ndomain = "news.example.org"\nselector = "bench"\n'
                'private_key = "dkim.pem"\n'
            )
    return folder


def dkim_key() -> bytes:
    """A throwaway RSA-2048 private key, PEM."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def run_ours(
    port: int, sessions: int, processes: int, messages: int, dkim: bytes | None = None
) -> tuple[float, float, float, float]:
    """(msg/s of the send phase, msg/s of the whole command, peak RSS in MB, seconds before the
    send phase); signed with the PEM key `dkim` when given."""
    project = make_project(messages, dkim)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")}
    env.update(
        NEWSLETTER_SECRET=SECRET,
        NEWSLETTER_SMTP__PORT=str(port),
        NEWSLETTER_SMTP__SECURITY="none",
        NEWSLETTER_LISTS__MAIN__PATH="bench.csv",
    )
    args = [sys.executable, "-m", "newsletter", "send", "--issue", "14", "--yes"]
    args += ["--concurrency", str(sessions), "--processes", str(processes)]
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(
            args, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _, status, usage = os.wait4(proc.pid, 0)
        # ru_maxrss of wait4 is the largest single process (the parent or one worker).
        wall = time.perf_counter() - start
        out = proc.stdout.read().decode() if proc.stdout else ""
        err = proc.stderr.read().decode() if proc.stderr else ""
        code = os.waitstatus_to_exitcode(status)
        match = SUMMARY.search(out)
        if code != 0 or match is None:
            raise SystemExit(f"newsletter send failed ({code}):\n{out}\n{err}")
        sent, seconds = int(match.group(1)), float(match.group(2))
        if sent != messages:
            raise SystemExit(f"sent {sent} of {messages}")
        return sent / seconds, messages / wall, usage.ru_maxrss / 1024, wall - seconds
    finally:
        shutil.rmtree(project, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument(
        "--runs",
        nargs="*",
        default=["1x1", "4x1", "4x2"],
        help="SESSIONSxPROCESSES for newsletter (smtp-source always runs one process)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--signed-runs",
        nargs="*",
        default=["4x1", "4x2"],
        help="SESSIONSxPROCESSES sent signed and unsigned in turn (none: skip)",
    )
    options = parser.parse_args()
    require_postfix()
    size = message_size()
    port = free_port()
    sink = start_sink(port)
    rows = []
    signed_rows = []
    key = dkim_key()
    try:
        for run in options.runs:
            sessions, processes = (int(x) for x in run.split("x"))
            trials = []
            for _ in range(options.repeat):
                # smtp-source runs just before and just after ours: the machine's load drifts,
                # and the faster of the two is the reference.
                before = run_source(port, sessions, options.messages, size)
                ours, whole, rss, start = run_ours(port, sessions, processes, options.messages)
                after = run_source(port, sessions, options.messages, size)
                trials.append((max(before, after), ours, whole, rss, start))
            trials.sort(key=lambda t: t[1] / t[0])
            rows.append((sessions, processes, *trials[len(trials) // 2]))
        for run in options.signed_runs:
            sessions, processes = (int(x) for x in run.split("x"))
            pairs = []
            for _ in range(options.repeat):
                unsigned = run_ours(port, sessions, processes, options.messages)
                signed = run_ours(port, sessions, processes, options.messages, key)
                pairs.append((unsigned, signed))
            pairs.sort(key=lambda pair: pair[1][1] / pair[0][1])
            signed_rows.append((sessions, processes, *pairs[len(pairs) // 2]))
    finally:
        sink.terminate()
        sink.wait()
    print(
        f"issue 14, {options.messages} recipients, {size / 1024:.1f} KB per message, "
        f"smtp-sink on loopback, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print(
        f"{'sessions':>8}  {'processes':>9}  {'smtp-source':>11}  {'newsletter':>10}  {'ratio':>5}"
        f"  {'whole cmd':>9}  {'whole/src':>9}  {'before 1st':>10}  {'peak RSS':>8}"
    )
    for sessions, processes, reference, ours, whole, rss, start in rows:
        print(
            f"{sessions:>8}  {processes:>9}  {reference:>7.0f} m/s  {ours:>6.0f} m/s"
            f"  {ours / reference:>5.2f}  {whole:>5.0f} m/s  {whole / reference:>9.2f}"
            f"  {start:>8.2f} s  {rss:>5.0f} MB"
        )
    print("ratio = newsletter's send phase / smtp-source, same sink, same run (target >= 0.5)")
    print("before 1st = the whole command's wall time less its send phase (start, checks, plan)")
    if not signed_rows:
        return
    print()
    print("DKIM-signed (RSA-2048) against unsigned, the same send in turn (send phase, whole cmd)")
    print(
        f"{'sessions':>8}  {'processes':>9}  {'unsigned':>17}  {'signed':>17}"
        f"  {'signed/unsigned':>15}"
    )
    for sessions, processes, unsigned, signed in signed_rows:
        print(
            f"{sessions:>8}  {processes:>9}  {unsigned[0]:>5.0f}, {unsigned[1]:>5.0f} m/s"
            f"  {signed[0]:>5.0f}, {signed[1]:>5.0f} m/s"
            f"  {signed[0] / unsigned[0]:>6.2f}, {signed[1] / unsigned[1]:>5.2f}"
        )


if __name__ == "__main__":
    main()
