"""The library (issue 31): its public names, README's example run as it is written against a real
SMTP server, and a send that sends the draft it checked, whatever is saved to the file meanwhile
(in the library, and on a real terminal while `newsletter send` asks)."""

from __future__ import annotations

import asyncio
import email
import email.policy
import importlib
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

import newsletter
from newsletter import Project
from newsletter.gate import SendVerdict
from newsletter.models import DeliveryStatus
from newsletter.send.pipeline import Quiet
from support.sendcli import HANG, environment
from support.smtp import FaultyHandler, start

ROOT = Path(__file__).resolve().parents[1]
OLD, NEW = "AI系统内容推荐第14期", "AI系统内容推荐第14期（改过）"


def subjects(handler: FaultyHandler) -> list[str]:
    return [
        str(email.message_from_bytes(r.data, policy=email.policy.default)["Subject"])
        for r in handler.received
    ]


def edit_title(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    assert f"title: {OLD}" in text
    path.write_text(text.replace(f"title: {OLD}", f"title: {NEW}", 1), encoding="utf-8")


def use_environment(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    for name in [k for k in os.environ if k.startswith("NEWSLETTER_")]:
        monkeypatch.delenv(name)
    for name, value in environment(port).items():
        if name.startswith("NEWSLETTER_"):
            monkeypatch.setenv(name, value)


def test_every_public_name_imports_and_is_documented() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in newsletter.__all__:
        value = getattr(newsletter, name)
        if name == "__version__":
            continue
        home = importlib.import_module(value.__module__)
        assert name in home.__all__, f"{value.__module__} does not list {name} in __all__"
        assert f"`{name}`" in readme or f"import {name}" in readme, f"{name} is not in README"
    with pytest.raises(AttributeError):
        _ = newsletter.Nothing  # type: ignore[attr-defined]
    assert (ROOT / "src" / "newsletter" / "py.typed").is_file()


def test_dir_offers_every_public_name_before_it_is_used() -> None:
    # A fresh interpreter: in this one another test may have loaded the names already.
    shown = subprocess.run(
        [sys.executable, "-c", "import newsletter; print(' '.join(dir(newsletter)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert set(newsletter.__all__) <= set(shown)


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## From Python", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found.group(1)


@pytest.mark.slow
async def test_readme_example_runs_against_a_real_server(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        use_environment(monkeypatch, server.port)
        scope: dict[str, object] = {}
        await asyncio.to_thread(exec, readme_example(), scope)
    out = capsys.readouterr().out
    assert "0 error(s)" in out
    assert "2 sent by this run" in out  # the staging list's two readers
    assert "0 {" in out  # exit code 0, then the counts
    recipients = [address for r in handler.received for address in r.recipients]
    assert len(recipients) == 7
    assert len(set(recipients)) == 7
    project_api = scope["project"]
    assert isinstance(project_api, Project)
    assert project_api.status(14)[DeliveryStatus.SENT] == 5


class EditsWhileChecked(Quiet):
    """Saves a new title to the issue file the moment the checks have run."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def checked(self, verdict: SendVerdict) -> None:
        assert verdict.subject == OLD
        edit_title(self.project)


@pytest.mark.slow
async def test_an_edit_saved_while_the_checks_run_does_not_go_out(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        use_environment(monkeypatch, server.port)
        api = Project.open()
        outcome = await asyncio.to_thread(api.send, 14, listener=EditsWhileChecked(project))
    assert outcome.exit_code == 0
    assert subjects(handler) == [OLD] * 5
    # The edit was real: the next look at the file sees it.
    assert api.render(14).subject == NEW


@pytest.mark.slow
async def test_an_edit_saved_while_the_question_waits_does_not_go_out(project: Path) -> None:
    """`newsletter send` on a real pseudo-terminal: the file is edited while it asks."""
    handler = FaultyHandler()
    async with start(handler) as server:
        main, child = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "newsletter", "send", "--issue", "14"],
            cwd=project,
            env=environment(server.port),
            stdin=child,
            stdout=child,
            stderr=child,
            close_fds=True,
        )
        os.close(child)
        try:
            seen = await asyncio.wait_for(asyncio.to_thread(read_until, main, b"Send now?"), HANG)
            assert OLD in seen
            edit_title(project)
            os.write(main, b"y\n")
            seen += await asyncio.wait_for(asyncio.to_thread(read_until, main, None), HANG)
            code = await asyncio.wait_for(asyncio.to_thread(proc.wait), HANG)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(main)
    assert code == 0, seen
    assert "5 sent by this run" in seen
    assert subjects(handler) == [OLD] * 5


def read_until(fd: int, marker: bytes | None) -> str:
    """The terminal's output up to `marker` (None: until the program closes it)."""
    data = b""
    while marker is None or marker not in data:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")
