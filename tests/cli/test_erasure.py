"""`newsletter subscribers forget` erases the person from every row and column of the outbox and
from the SQLite file's bytes, the stored SMTP replies age out with a bounce's text, an import
keeps client addresses as `[privacy]` says, and the project's state is private whatever the
umask (issue 29, points 1, 4, 5 and 6)."""

from __future__ import annotations

import os
import stat
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from newsletter.bounces.retention import DAY
from newsletter.cli.main import cli
from newsletter.database import open_database
from newsletter.models import DeliveryStatus
from newsletter.send.coordinator import send_lock
from newsletter.state.statecache import Cache
from support.database import plan, record
from support.erasure import dump, raw_bytes

SECRET = "cli-test-secret-0123456789abcdef"
DEAD = "dead@example.org"
EXPORTS = Path(__file__).resolve().parents[1] / "data" / "exports"
REFUSED = f"5.1.1 <{DEAD}>: Recipient address rejected: User unknown"


def run(project: Path, *args: str) -> Result:
    return CliRunner().invoke(
        cli,
        ["--config", str(project / "newsletter.toml"), *args],
        env={"NEWSLETTER_SECRET": SECRET},
    )


def _database(project: Path) -> Path:
    return project / ".newsletter" / "outbox.sqlite3"


def _refused(project: Path, address: str = DEAD) -> None:
    """Issue 14 went to `address` on main, and the relay refused it naming the address."""
    with open_database(_database(project)) as database:
        plan(database, 14, "main", [address, "bob@example.org"])
        rows = {r.recipient: r.id for r in database.deliveries.rows(14, "main")}
        assert record(database, rows[address], DeliveryStatus.REJECTED, code=550, reply=REFUSED)
        assert record(database, rows["bob@example.org"], DeliveryStatus.SENT, code=250, reply="ok")


def test_forget_takes_the_address_out_of_the_stored_smtp_reply(project: Path) -> None:
    assert run(project, "subscribers", "add", DEAD).exit_code == 0
    _refused(project)
    before = run(project, "status", "--issue", "14", "--list", "main")
    assert DEAD in before.output  # the relay's reply, shown beside the row

    done = run(project, "subscribers", "forget", DEAD, "--yes")
    assert done.exit_code == 0, done.output

    status = run(project, "status", "--issue", "14", "--list", "main")
    assert status.exit_code == 0, status.output
    assert "forgotten:" in status.output
    assert "550 forgotten: erased on request" in status.output
    assert "dead@" not in status.output
    assert "dead@" not in dump(_database(project))


def test_stored_replies_age_out_with_a_bounces_text(project: Path) -> None:
    """`newsletter bounces` applies [privacy] bounce_text_days to the replies too: the state and
    code stay for the counts; a newer reply and a row still in doubt keep theirs."""
    _refused(project)
    path = _database(project)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000+00:00", time.gmtime(time.time() - 91 * DAY))
    with open_database(path) as database, database.backend.transaction():
        database.backend.run(
            "UPDATE deliveries SET updated_at = ? WHERE recipient = ?", (stamp, DEAD)
        )
    for part in ("new", "cur", "tmp"):
        (project / "returned" / part).mkdir(parents=True)
    done = run(project, "bounces", "--maildir", str(project / "returned"))
    assert done.exit_code == 0, done.output
    assert "1 stored SMTP reply(ies) cleared after 90 days ([privacy] bounce_text_days)" in (
        done.output
    )
    with open_database(path) as database:
        kept = {
            r.recipient: (r.state, r.smtp_code, r.smtp_reply)
            for r in database.deliveries.rows(14, "main")
        }
    assert kept == {
        DEAD: (DeliveryStatus.REJECTED, 550, ""),
        "bob@example.org": (DeliveryStatus.SENT, 250, "ok"),
    }


def test_forget_leaves_no_copy_in_the_sqlite_files_bytes(project: Path) -> None:
    """With a second connection held open as `serve` holds it (so no close checkpoints the
    WAL), the erased rows are in neither the database file's bytes nor its WAL's."""
    assert run(project, "subscribers", "add", DEAD, "--name", "Dead Reader").exit_code == 0
    _refused(project)
    path = _database(project)
    with open_database(path) as serving:
        assert serving.roster.get("main", DEAD) is not None  # it has read the file
        assert DEAD.encode() in raw_bytes(path)

        done = run(project, "subscribers", "forget", DEAD, "--yes")
        assert done.exit_code == 0, done.output
        assert "warning" not in done.output

        assert serving.roster.get("main", DEAD) is None  # the open connection sees it gone
        on_disk = raw_bytes(path)
        assert DEAD.encode() not in on_disk
        assert b"Dead Reader" not in on_disk


def test_an_import_keeps_client_addresses_as_privacy_says(project: Path) -> None:
    """Mailchimp's OPTIN_IP and CONFIRM_IP follow `[privacy] ip = "none"` as a signup's
    address does: not in the ledger, its evidence, `export` or `show`."""
    config = project / "newsletter.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + '\n[privacy]\nip = "none"\n', encoding="utf-8"
    )
    export = project / "mailchimp-audience.zip"
    with zipfile.ZipFile(export, "w") as archive:
        for member in sorted((EXPORTS / "mailchimp").iterdir()):
            archive.write(member, f"audience/{member.name}")
    imported = run(project, "subscribers", "import", str(export))
    assert "imported 4 subscriber(s)" in imported.output

    exported = run(project, "subscribers", "export", "--out", "-")
    shown = run(project, "subscribers", "show", "ada.lovelace@example.org", "--json")

    assert exported.exit_code == 0, exported.output
    assert "ada.lovelace@example.org" in exported.output
    assert '"LEID": "118244031"' in shown.output  # the tool's other columns are kept
    for said in (exported.output, shown.output, dump(_database(project))):
        assert "198.51.100" not in said
        assert "203.0.113.9" not in said


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The common umask, under which a plain open() makes 0644 files in 0755 folders."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_the_projects_state_is_private_whatever_the_umask(project: Path) -> None:
    state = project / ".newsletter"
    assert not state.exists()
    assert run(project, "subscribers", "add", DEAD).exit_code == 0
    path = _database(project)
    with open_database(path) as serving:  # as serve holds it: the -wal and -shm are there
        serving.roster.get("main", DEAD)
        assert run(project, "subscribers", "add", "bob@example.org").exit_code == 0
        wal, shm = (path.with_name(path.name + end) for end in ("-wal", "-shm"))
        assert {p.name: _mode(p) for p in (state, path, wal, shm)} == {
            ".newsletter": 0o700,
            "outbox.sqlite3": 0o600,
            "outbox.sqlite3-wal": 0o600,
            "outbox.sqlite3-shm": 0o600,
        }
    with send_lock(state, 14, "main"):
        assert _mode(state / "send-14-main.lock") == 0o600
    cache = Cache(state / "preflight-cache.json")
    cache.put("dns:example.org", ["192.0.2.1"], 60)
    cache.save()
    assert _mode(state / "preflight-cache.json") == 0o600


@pytest.mark.usefixtures("umask_022")
def test_a_state_folder_made_by_an_earlier_version_is_tightened(project: Path) -> None:
    state = project / ".newsletter"
    state.mkdir(mode=0o755)
    assert run(project, "subscribers", "add", DEAD).exit_code == 0
    _database(project).chmod(0o644)
    assert run(project, "subscribers", "add", "bob@example.org").exit_code == 0
    # Other users lose access; the group keeps its (a shared deployment's choice).
    assert (_mode(state), _mode(_database(project))) == (0o750, 0o640)
