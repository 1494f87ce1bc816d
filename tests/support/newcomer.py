"""A newcomer's project, made as they make it: `newsletter init` (a real process), then the
edits the manual tells them to make (the commented `# signup = true` line uncommented); and
`newsletter serve` started on a free port, its first lines read as they show in a terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

SIGNUP_LINE = "# signup = true"


def clean_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def init_project(where: Path, *args: str) -> Path:
    """`newsletter init mynews --yes ARGS` in `where`; the project's folder."""
    done = subprocess.run(
        [sys.executable, "-m", "newsletter", "init", "mynews", "--yes", *args],
        cwd=where,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return where / "mynews"


def open_signup(project: Path, table: str = "[lists.main]") -> None:
    """Uncomment the generated `# signup = true` of `table`, as the editor does."""
    path = project / "newsletter.toml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = lines.index(f"{table}\n")
    found = next(i for i in range(start, len(lines)) if lines[i].startswith(SIGNUP_LINE))
    lines[found] = lines[found].removeprefix("# ")
    path.write_text("".join(lines), encoding="utf-8")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    lines: list[str]  # its first lines on stderr, up to the one on signup

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM, as systemd or Ctrl-C stops it: (exit code, stdout, the rest of stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, err

    @property
    def url(self) -> str:
        """The address of the first line (`Serving ... at URL ...`), without its slash."""
        return self.lines[0].split(" at ", 1)[1].split()[0].rstrip("/")


@contextmanager
def running_serve(project: Path, *args: str, **env: str) -> Iterator[Served]:
    """`newsletter serve --port 0 ARGS` in `project` until the block ends (then SIGTERM)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "newsletter", "serve", "--port", "0", *args],
        cwd=project,
        env=clean_environment(**env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        # Up to the line on signup, or uvicorn's first (a serve that says nothing of signup).
        while not lines or not lines[-1].startswith(("Signup", "INFO:")):
            line = proc.stderr.readline()
            assert line, f"serve ended before it served: {lines}"
            lines.append(line.rstrip("\n"))
        served = Served(proc, lines)
        # The socket listens before uvicorn serves: one answer means it serves, and a SIGTERM
        # from here on is its graceful stop.
        assert httpx.get(f"{served.url}/healthz", timeout=60).status_code == 200
        yield served
    finally:
        if proc.returncode is None:  # not stopped by the test
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
