"""`make demo`: the whole loop on the shipped project, the same on every run.

The capture server first (`newsletter mailbox`, in the background until the end), then `check`,
`build`, a real SMTP test send of issue 14 to the staging list through it with a VERP return
path, the bounce it answers for one staging address read back (`newsletter bounces --maildir`),
the suppression that made, and the send's status. It ends with the two lines a new editor needs
next: how to put `newsletter` on PATH (the venv's activate) and how to make a secret of their own.

Every run starts from nothing: the outbox, the capture Maildir and the build are in out/demo/,
emptied first, so a second run shows what the first did, and the project's own .newsletter/ is
never read or written. Any NEWSLETTER_* setting exported in the shell is left out (the demo runs
on the shipped defaults), except NEWSLETTER_SECRET.

The demo sends only to its own capture server: it waits for that process's first line, which
names the port it listens on. When the server cannot listen (another program holds the port) the
demo stops with one line, before anything is checked or sent, and exits 1.

Run from the project root: `python tools/demo.py [--port 1025]` (`make demo DEMO_PORT=N`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from newsletter.errors import KEY_EXPORT_LINE

# DEMO ONLY: a publicly known key, so a fresh clone can sign unsubscribe links. A real send must
# use your own NEWSLETTER_SECRET (an exported one is used here too).
DEMO_SECRET = "demo-only-publicly-known-never-use-for-real-sends"  # noqa: S105
ISSUE = "14"
HOST = "127.0.0.1"
RETURN_PATH = "bounces@news.example.org"  # VERP: each message's envelope sender is derived from it
BOUNCING = "proofreader@news.example.org"  # the staging address the capture server bounces
FOLDER = Path("out") / "demo"
KEPT = ("NEWSLETTER_SECRET", "NEWSLETTER_SECRET_PREVIOUS")
READY_TIMEOUT = 30.0  # seconds for the capture server to say it listens
STOP_TIMEOUT = 10.0
_READY = re.compile(rb"^Capturing mail on (?P<host>.+):(?P<port>\d+) into ")


class DemoError(Exception):
    """The demo cannot go on: the message is the one line it ends with."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make demo", description="The whole loop, every time.")
    parser.add_argument(
        "--port", type=int, default=1025, help="the capture server's port; 0 picks a free one"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return run(Path.cwd(), args.port)
    except DemoError as stopped:
        say(f"error: {stopped}", sys.stderr)
        return stopped.code
    except KeyboardInterrupt:
        say("error: interrupted; run `make demo` again to start over", sys.stderr)
        return 128 + signal.SIGINT


def run(root: Path, port: int) -> int:
    """Every step in order, each a `newsletter` command as a user would type it."""
    if not (root / "newsletter.toml").is_file():
        raise DemoError("run the demo from the project root (where newsletter.toml is)")
    if not 0 <= port <= 65535:
        raise DemoError(f"DEMO_PORT={port} is not a port: use 1 to 65535, or 0 for a free one")
    folder = fresh_folder(root / FOLDER)
    state = folder / "state"
    maildir = shown(state / "mailbox")
    env = demo_environment(os.environ, state)
    mailbox = ["mailbox", "--host", HOST, "--port", str(port), "--bounce", BOUNCING]
    with capture_server(mailbox, env, port) as (bound, ready):
        say(f"--- the demo's own state is in {shown(folder)}/ (emptied at every run)")
        say(f"$ {command_line(mailbox)} &")
        say(ready)
        env |= smtp_environment(bound)
        steps = [
            ["check", "--issue", ISSUE],
            ["build", "--issue", ISSUE, "--out", shown(folder / ISSUE)],
            ["send", "--issue", ISSUE, "--list", "staging"],
            ["bounces", "--maildir", maildir],
            ["suppressions", "--list", "staging"],
            ["status", "--issue", ISSUE, "--list", "staging"],
        ]
        for step in steps:
            if step[0] == "bounces":
                say("--- the bounce mailbox (here the capture server's Maildir):")
            run_step(step, env, root)
    say(f"--- done: look at {maildir}/ in any mail client; `make demo` starts over")
    say_next_steps()
    return 0


def say_next_steps() -> None:
    """The two lines a new editor needs next (README, "The editor's day"): `newsletter` is in
    the venv, not on PATH, and a real send wants a secret of their own, not the demo's."""
    bin_dir = Path(sys.prefix) / "bin"
    say('--- your turn (README, "The editor\'s day"): in this shell, first')
    if sys.prefix != sys.base_prefix:
        say(f"$ . {shown(bin_dir / 'activate')}   # puts `newsletter` on PATH")
    else:
        say(f'$ export PATH="{shown(bin_dir)}:$PATH"   # where `newsletter` is installed')
    say(f"$ {KEY_EXPORT_LINE}   # yours, kept for every send")


def fresh_folder(folder: Path) -> Path:
    """The demo's folder, emptied: what an earlier run left is gone."""
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def demo_environment(environ: Mapping[str, str], state: Path) -> dict[str, str]:
    """The shell's environment without its NEWSLETTER_* settings, and the demo's own state: the
    outbox and the Maildir in `state`, the VERP return path, a secret."""
    env = {k: v for k, v in environ.items() if not k.startswith("NEWSLETTER_") or k in KEPT}
    env["NEWSLETTER_SECRET"] = environ.get("NEWSLETTER_SECRET") or DEMO_SECRET
    env["NEWSLETTER_PATHS__STATE"] = str(state)
    env["NEWSLETTER_OUTBOX__URL"] = f"sqlite:///{state / 'outbox.sqlite3'}"
    env["NEWSLETTER_BOUNCES__RETURN_PATH"] = RETURN_PATH
    env["PYTHONUNBUFFERED"] = "1"
    return env


def smtp_environment(port: int) -> dict[str, str]:
    """The demo's capture server as the SMTP server: plain SMTP on loopback, no AUTH."""
    return {
        "NEWSLETTER_SMTP__HOST": HOST,
        "NEWSLETTER_SMTP__PORT": str(port),
        "NEWSLETTER_SMTP__SECURITY": "none",
        "NEWSLETTER_SMTP__USERNAME": "",
    }


def run_step(args: list[str], env: Mapping[str, str], root: Path) -> None:
    say(f"$ {command_line(args)}")
    done = subprocess.run(newsletter(args), env=env, cwd=root, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise DemoError(
            f"`{command_line(args)}` exited with code {done.returncode}; the demo stops here",
            done.returncode,
        )


@contextlib.contextmanager
def capture_server(args: list[str], env: Mapping[str, str], port: int) -> Iterator[tuple[int, str]]:
    """Start `newsletter mailbox`, wait for its first line and yield the port it names (with the
    line); stop it on the way out. A server that ends, or says anything else, raises DemoError."""
    with tempfile.TemporaryFile() as errors:
        server = subprocess.Popen(
            newsletter(args),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        assert server.stdout is not None
        first: queue.Queue[bytes] = queue.Queue(maxsize=1)
        relay = threading.Thread(target=relay_lines, args=(server.stdout, first), daemon=True)
        relay.start()
        try:
            yield wait_until_listening(server, first, errors, port)
        finally:
            stop(server)
            relay.join(STOP_TIMEOUT)
            server.stdout.close()


def wait_until_listening(
    server: subprocess.Popen[bytes], first: queue.Queue[bytes], errors: IO[bytes], port: int
) -> tuple[int, str]:
    try:
        line = first.get(timeout=READY_TIMEOUT)
    except queue.Empty:
        raise DemoError(
            f"the capture server did not say it listens within {READY_TIMEOUT:.0f} s"
        ) from None
    found = _READY.match(line)
    if found is not None and found["host"] == HOST.encode():
        return int(found["port"]), line.decode("utf-8", "replace").rstrip("\n")
    stop(server)
    errors.seek(0)
    said = errors.read().decode("utf-8", "replace").strip()
    raise DemoError(not_listening(port, server.returncode, said or line.decode().strip()))


def not_listening(port: int, code: int | None, said: str) -> str:
    """The line the demo ends with when its capture server did not start."""
    other = 2526 if port == 2525 else 2525
    how = f"choose another port, e.g. make demo DEMO_PORT={other} (0 picks a free one)"
    if port and port_taken(HOST, port):
        return f"port {port} on {HOST} is busy (another program listens there): {how}"
    # Not the port (or no longer): pass on what the server said, on one line.
    reason = " / ".join(line.strip() for line in said.splitlines() if line.strip())
    return f"the capture server did not start (exit code {code}: {reason}); {how}"


def port_taken(host: str, port: int) -> bool:
    """Whether another socket holds `port`, tried as the capture server binds (SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def relay_lines(stream: IO[bytes], first: queue.Queue[bytes]) -> None:
    """The server's first line to `first` (b"" if it ends without one); every later line (one
    per captured message) to our stdout as it comes."""
    first.put(stream.readline())
    for line in stream:
        sys.stdout.flush()
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()


def stop(server: subprocess.Popen[Any]) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def newsletter(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "newsletter", *args]


def command_line(args: list[str]) -> str:
    return shlex.join(["newsletter", *args])


def shown(path: Path) -> str:
    """`path` as the user would type it from the project root."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def say(line: str, stream: IO[str] = sys.stdout) -> None:
    print(line, file=stream, flush=True)


if __name__ == "__main__":
    sys.exit(main())
