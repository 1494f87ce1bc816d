"""A scheduled send is checked once, by the send itself: the worker starts its process without
checking first. What is counted is SpamAssassin's runs, each check's one: a `spamassassin` on
PATH that logs each run and gives no report (so no score is kept and none cuts a run short),
seen across the worker and the send's process alike. A real `newsletter worker --once`, a real
send, aiosmtpd on loopback."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.database.schedules import ScheduleState
from support.sendcli import environment, newsletter, write_list
from support.smtp import FaultyHandler, start

pytestmark = pytest.mark.slow


def _counting_spamassassin(folder: Path, log: Path) -> str:
    """A folder to put first on PATH, with a `spamassassin` that logs a line per run."""
    folder.mkdir()
    program = folder / "spamassassin"
    # Logged once the message is read: a run ended early (a file that does not load) is not one.
    program.write_text(f'#!/bin/sh\ncat > /dev/null\necho run >> "{log}"\n', encoding="utf-8")
    program.chmod(0o755)
    return str(folder)


@pytest.mark.parametrize("valid", [True, False], ids=["valid", "failing"])
async def test_a_scheduled_send_is_checked_once_across_the_worker_and_its_send(
    project: Path, tmp_path: Path, valid: bool
) -> None:
    addresses = write_list(project / "big.csv", 5)
    runs = tmp_path / "spamassassin.log"
    handler = FaultyHandler()
    async with start(handler) as server:
        env = environment(server.port, NEWSLETTER_LISTS__MAIN__PATH="big.csv")
        env["PATH"] = f"{_counting_spamassassin(tmp_path / 'bin', runs)}:{env['PATH']}"
        at = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S Z")
        booked = await newsletter(["send", "--issue", "14", "--at", at, "--yes"], env, project)
        assert booked.code == 0, booked.err
        runs.unlink()  # the booking's own check
        if not valid:  # the template leaves its own code in every email: `check` errs
            template = project / "templates" / "email" / "issue.txt"
            template.write_text(
                template.read_text(encoding="utf-8") + "{% raw %}{{ name }}{% endraw %}\n",
                encoding="utf-8",
            )
        with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
            database.backend.run("UPDATE schedules SET due_at = ?", (time.time() - 1,))
            done = await newsletter(["worker", "--once"], env, project, timeout=90)
            (schedule,) = database.schedules.listing()
    assert done.code == 0, done.err
    assert runs.read_text(encoding="utf-8").splitlines() == ["run"]
    if valid:
        assert schedule.state is ScheduleState.DONE, schedule.outcome
        assert sorted(handler.by_recipient) == addresses
    else:
        assert schedule.state is ScheduleState.FAILED
        assert schedule.outcome.startswith("not sent: the issue fails `newsletter check` now: ")
        assert "1 check error(s):\n" in schedule.outcome
        assert "[markers]" in schedule.outcome
        assert handler.received == []
