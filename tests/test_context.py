"""One context per command (issue 31, point 3): a send, from the library or from `newsletter send`
(and a booking, `send --at`), and every other command that reads or writes the log (status,
report, subscribers, sequences, schedules, the outbox's own) opens the project's database once
in its own process, against a real SMTP server and a real SQLite file; a read-only step or
command creates no log."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from newsletter import Project
from newsletter.cli.main import cli
from newsletter.config.settings import load_settings
from newsletter.context import CommandContext
from newsletter.database import Database, open_database
from newsletter.database.backend import Backend
from newsletter.errors import DatabaseError
from newsletter.gate import SendVerdict
from newsletter.models import DeliveryStatus
from newsletter.send.pipeline import Quiet
from newsletter.send.preparation import Prepared
from newsletter.send.recipients import RecipientsReport
from support.database import plan
from support.sendcli import environment
from support.sequences import confirmed, welcome
from support.smtp import FaultyHandler, start


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pid of each Database made from here on: every way of opening the database makes one
    (a forked child's are made in its own memory, so only this process's are counted)."""
    made: list[int] = []
    original = Database.__init__

    def counting(self: Database, backend: Backend) -> None:
        made.append(os.getpid())
        original(self, backend)

    monkeypatch.setattr(Database, "__init__", counting)
    return made


def use_server(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    for name in [k for k in os.environ if k.startswith("NEWSLETTER_")]:
        monkeypatch.delenv(name)
    for name, value in environment(port).items():
        if name.startswith("NEWSLETTER_"):
            monkeypatch.setenv(name, value)


class Surveying(Quiet):
    """Confirms as `newsletter send` does on a terminal: the recipients counted first."""

    def __init__(self) -> None:
        self.counted: RecipientsReport | None = None

    def confirm(self, verdict: SendVerdict, prepared: Prepared) -> bool:
        self.counted = prepared.survey()
        return True


@pytest.mark.slow
async def test_a_library_send_opens_the_database_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, opened: list[int]
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        use_server(monkeypatch, server.port)
        api = Project.open()
        # The first send: no log yet; the run creates it.
        test = await asyncio.to_thread(api.send, 14, "staging")
        assert test.exit_code == 0
        assert opened == [os.getpid()]
        # With a log: the checks' date, the test decision, the list's counts, the question's
        # survey, the subject test's look and the run all read it through one connection.
        opened.clear()
        listener = Surveying()
        with api:
            outcome = await asyncio.to_thread(api.send, 14, ask=True, listener=listener)
            assert api.status(14)[DeliveryStatus.SENT] == 5
        assert outcome.exit_code == 0
        assert listener.counted is not None
        assert listener.counted.recipients == 5
        assert opened == [os.getpid()]
    assert len(handler.received) == 7


@pytest.mark.slow
async def test_newsletter_send_opens_the_database_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, opened: list[int]
) -> None:
    handler = FaultyHandler()
    async with start(handler) as server:
        use_server(monkeypatch, server.port)
        soon = dt.datetime.now(dt.UTC) + dt.timedelta(hours=20)
        booking = ["--list", "staging", "--at", f"{soon:%Y-%m-%d %H:%M}", "--timezone", "UTC"]
        for args in (["--list", "staging"], ["--yes"], booking):
            opened.clear()
            result = await asyncio.to_thread(
                CliRunner().invoke, cli, ["send", "--issue", "14", *args]
            )
            assert result.exit_code == 0, result.output
            assert opened == [os.getpid()], args
    assert len(handler.received) == 7


def test_a_read_only_command_creates_no_log(project: Path, opened: list[int]) -> None:
    settings = load_settings(project / "newsletter.toml", environ={})
    target = settings.database_target
    assert isinstance(target, Path)
    with CommandContext(settings) as context:
        assert context.existing_database() is None
        assert context.first_sent() == {}
        assert Project(settings).status(14)[DeliveryStatus.SENT] == 0
        assert not target.exists()
        assert opened == []
        database = context.database  # a step that writes creates it, once
        assert context.existing_database() is database
        assert context.database is database
    assert target.exists()
    assert opened == [os.getpid()]
    with pytest.raises(DatabaseError, match="closed"):  # closed when the command ended
        database.deliveries.counts(14, "main")


def test_a_project_block_shares_one_connection_until_the_outermost_block_ends(
    project: Path, opened: list[int]
) -> None:
    settings = load_settings(project / "newsletter.toml", environ={})
    with CommandContext(settings) as context:
        context.database.deliveries.counts(14, "main")  # the log made, as a send would
    api = Project(settings)
    with api:
        with api:
            assert api.status(14)[DeliveryStatus.SENT] == 0
        assert api.status(14)[DeliveryStatus.SENT] == 0  # the inner block closed nothing
        assert len(opened) == 2
    assert api.status(14)[DeliveryStatus.SENT] == 0  # a call of its own: its own connection
    assert len(opened) == 3


SECRET = "context-tests-secret-0123456789abcdef"
SUBSTACK = Path(__file__).resolve().parent / "data" / "exports" / "substack-email_list.csv"


def newsletter(*args: str) -> Result:
    """A command through click's CliRunner, in this process (so its opens are counted)."""
    return CliRunner().invoke(cli, list(args), env={"NEWSLETTER_SECRET": SECRET})


@pytest.fixture
def logged(project: Path) -> int:
    """The project with a delivery log: a reader of main in sequence welcome (two steps), issue
    14 planned to a list since dropped from the config (`gone`); the first step's key."""
    welcome(project)
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        confirmed(database, "ann@example.org")
        database.enrolments.enrol_list("welcome", "main", 0.0)
        plan(database, 14, "gone", ["bob@example.org"])
        return database.enrolments.step_key("welcome", 1)


# Each command that reads or writes the log, as `newsletter` runs it: its arguments, with "KEY"
# for the first step's key and "SITE" for a folder to write in. The ones with an id opened it
# more than once before they took the command's context (terminal.pass_context).
WITH_A_LOG = [
    ("status", "--issue", "14"),
    pytest.param(("status", "--issue", "14", "--list", "gone"), id="status-dropped-list"),
    ("report", "--issue", "14", "--list", "main"),
    pytest.param(("report", "--issue", "KEY", "--list", "main"), id="report-sequence-step"),
    pytest.param(("subscribers",), id="subscribers-every-list"),
    ("subscribers", "add", "cy@example.org"),
    ("subscribers", "remove", "ann@example.org"),
    ("subscribers", "import", str(SUBSTACK), "--format", "substack"),
    ("subscribers", "export"),
    ("subscribers", "show", "ann@example.org"),
    ("subscribers", "forget", "ann@example.org", "--yes"),
    ("unsubscribe", "ann@example.org"),
    ("suppressions",),
    ("bounces", "--held"),
    ("sequences",),
    ("sequences", "enrol", "welcome", "--list", "main"),
    pytest.param(("sequences", "check", "welcome"), id="sequences-check-every-step"),
    ("schedule",),
    ("outbox", "info"),
    ("outbox", "migrate"),
    pytest.param(("check", "--issue", "14", "--offline"), marks=pytest.mark.slow),  # SpamAssassin
    pytest.param(("build", "--issue", "14", "--site", "SITE"), id="build-site-every-page"),
]


def arguments(args: tuple[str, ...], project: Path, key: int = 0) -> list[str]:
    return [{"KEY": str(key), "SITE": str(project / "site")}.get(a, a) for a in args]


@pytest.mark.parametrize("args", WITH_A_LOG)
def test_each_command_opens_the_database_once(
    project: Path, logged: int, opened: list[int], args: tuple[str, ...]
) -> None:
    result = newsletter(*arguments(args, project, logged))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "error:" not in result.output, result.output
    assert opened == [os.getpid()], result.output


# The commands that only read: with no log they read nothing, and make none.
READ_ONLY = [
    ("status", "--issue", "14"),
    ("report", "--issue", "14"),
    ("subscribers",),
    ("subscribers", "remove", "ann@example.org"),
    ("subscribers", "export"),
    ("subscribers", "show", "ann@example.org"),
    ("suppressions",),
    ("bounces", "--held"),
    ("schedule",),
    ("schedule", "cancel", "--issue", "14"),
    pytest.param(("check", "--issue", "14", "--offline"), marks=pytest.mark.slow),
    ("build", "--issue", "14", "--site", "SITE"),
]


@pytest.mark.parametrize("args", READ_ONLY)
def test_a_read_only_command_with_no_log_opens_none(
    project: Path, opened: list[int], args: tuple[str, ...]
) -> None:
    result = newsletter(*arguments(args, project))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert opened == []
    assert not (project / ".newsletter" / "outbox.sqlite3").exists()


def test_a_command_closes_its_database_when_it_ends_and_its_error_is_two_lines(
    project: Path, logged: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Database] = []
    original = Database.__init__

    def keeping(self: Database, backend: Backend) -> None:
        made.append(self)
        original(self, backend)

    monkeypatch.setattr(Database, "__init__", keeping)
    result = newsletter("status", "--issue", "14", "--list", "nowhere")  # read, then refused
    assert result.exit_code == 1
    assert result.output.startswith("error: no list named 'nowhere'"), result.output
    assert "\nhint: " in result.output
    assert "Traceback" not in result.output
    (database,) = made
    with pytest.raises(DatabaseError, match="closed"):
        database.deliveries.counts(14, "main")
