"""`newsletter doctor`'s checks of this machine, each through the real command (a subprocess,
--json): the secret (where it comes from, its mode, the reminder to back it up), the outbox
(missing, migrated, private), the worker's heartbeat (none, fresh from a real worker, stale)
and the disk; the exit code is 0 only when every check passes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from newsletter.database import open_database
from newsletter.database.schema import LATEST
from support.doctoring import doctor_env, run_doctor
from support.sendcli import newsletter

SECRET = "doctor-test-secret-0123456789"


def _without_secret(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "NEWSLETTER_SECRET"}


@pytest.mark.slow
async def test_a_missing_secret_fails_and_names_the_file_to_write(project: Path) -> None:
    code, checks = await run_doctor(project, _without_secret(doctor_env()))
    assert code == 1
    assert checks["secret"]["ok"] is False
    assert "neither NEWSLETTER_SECRET nor .newsletter/secret" in str(checks["secret"]["detail"])
    assert "token_urlsafe" in str(checks["secret"]["fix"])


@pytest.mark.slow
async def test_a_short_secret_in_the_environment_fails(project: Path) -> None:
    env = doctor_env(NEWSLETTER_SECRET="short-one")
    code, checks = await run_doctor(project, env)
    assert code == 1
    assert checks["secret"]["ok"] is False
    assert "too short (9 characters; at least 16)" in str(checks["secret"]["detail"])
    assert "short-one" not in str(checks)  # never the value


@pytest.mark.slow
async def test_the_secret_file_passes_with_its_mode_and_the_reminder_to_back_it_up(
    project: Path,
) -> None:
    folder = project / ".newsletter"
    folder.mkdir(mode=0o700)
    (folder / "secret").write_text(SECRET + "\n", encoding="utf-8")
    (folder / "secret").chmod(0o600)
    _, checks = await run_doctor(project, _without_secret(doctor_env()))
    secret = checks["secret"]
    assert secret["ok"] is True, secret
    detail = str(secret["detail"])
    assert ".newsletter/secret (mode 0600)" in detail
    assert "back it up" in detail
    assert "every unsubscribe" in detail
    assert SECRET not in str(checks)


@pytest.mark.slow
async def test_the_environment_wins_and_is_named(project: Path) -> None:
    _, checks = await run_doctor(project, doctor_env(NEWSLETTER_SECRET=SECRET))
    assert checks["secret"]["ok"] is True
    assert "from NEWSLETTER_SECRET" in str(checks["secret"]["detail"])


@pytest.mark.slow
async def test_no_outbox_fails_the_database_and_the_worker(project: Path) -> None:
    code, checks = await run_doctor(project, doctor_env())
    assert code == 1
    assert checks["database"]["ok"] is False
    assert "newsletter outbox migrate" in str(checks["database"]["fix"])
    assert checks["worker"]["ok"] is False
    assert not (project / ".newsletter" / "outbox.sqlite3").exists()  # the doctor made none


@pytest.mark.slow
async def test_a_migrated_private_outbox_passes_and_a_readable_one_fails(project: Path) -> None:
    env = doctor_env()
    assert (await newsletter(["outbox", "migrate"], env, project)).code == 0
    path = project / ".newsletter" / "outbox.sqlite3"
    _, checks = await run_doctor(project, env)
    assert checks["database"]["ok"] is True, checks["database"]
    assert "current, mode 0600" in str(checks["database"]["detail"])
    path.chmod(0o644)
    _, checks = await run_doctor(project, env)
    assert checks["database"]["ok"] is False
    assert "readable by other users (mode 0644)" in str(checks["database"]["detail"])
    assert f"chmod 600 {path}" in str(checks["database"]["fix"])


@pytest.mark.slow
async def test_an_outbox_behind_the_schema_fails_with_the_migrate_command(project: Path) -> None:
    env = doctor_env()
    assert (await newsletter(["outbox", "migrate"], env, project)).code == 0
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        database.backend.run("DELETE FROM schema_migrations WHERE version = ?", (LATEST,))
    _, checks = await run_doctor(project, env)
    assert checks["database"]["ok"] is False
    assert "1 migration(s) behind" in str(checks["database"]["detail"])
    assert checks["database"]["fix"] == "Run `newsletter outbox migrate`."


@pytest.mark.slow
async def test_a_worker_that_beat_is_alive_and_a_stale_beat_is_not(project: Path) -> None:
    env = doctor_env(NEWSLETTER_WORKER__POLL="0.05")
    _code, checks = await run_doctor(project, env)
    assert checks["worker"]["ok"] is False
    ran = await newsletter(["worker", "--once"], env, project)
    assert ran.code == 0, ran.err
    _, checks = await run_doctor(project, env)
    assert checks["worker"]["ok"] is True, checks["worker"]
    assert "(pid " in str(checks["worker"]["detail"])
    with open_database(project / ".newsletter" / "outbox.sqlite3") as database:
        database.backend.run("UPDATE heartbeats SET beat_at = ?", (time.time() - 120,))
    _, checks = await run_doctor(project, env)
    assert checks["worker"]["ok"] is False
    assert "older than 30 s" in str(checks["worker"]["detail"])
    assert "restart it" in str(checks["worker"]["fix"])


@pytest.mark.slow
async def test_too_little_disk_space_fails_the_disk(project: Path) -> None:
    env = doctor_env()
    _, checks = await run_doctor(project, env, "--min-free", "1")
    assert checks["disk"]["ok"] is True, checks["disk"]
    huge = str(1 << 40)  # a PiB in MiB: no test machine has it
    _, checks = await run_doctor(project, env, "--min-free", huge)
    assert checks["disk"]["ok"] is False
    assert "[paths] state" in str(checks["disk"]["fix"])


@pytest.mark.slow
async def test_lines_name_each_check_and_its_fix(project: Path) -> None:
    env = doctor_env()
    done = await newsletter(["doctor"], env, project)
    assert done.code == 1
    lines = done.out.splitlines()
    assert any(line.startswith("FAIL  database") for line in lines)
    assert any(line.strip().startswith("fix: Run `newsletter outbox migrate`") for line in lines)
    assert "check(s) to fix" in done.err


@pytest.mark.slow
async def test_on_postgresql_the_database_and_a_workers_beat_are_read_there(
    project: Path, postgres_url: str
) -> None:
    env = doctor_env(NEWSLETTER_OUTBOX__URL=postgres_url, NEWSLETTER_WORKER__POLL="0.05")
    _, checks = await run_doctor(project, env)
    assert checks["database"]["ok"] is False
    assert "newsletter outbox migrate" in str(checks["database"]["fix"])
    assert (await newsletter(["outbox", "migrate"], env, project)).code == 0
    ran = await newsletter(["worker", "--once"], env, project)
    assert ran.code == 0, ran.err
    _, checks = await run_doctor(project, env)
    assert checks["database"]["ok"] is True, checks["database"]
    assert str(checks["database"]["detail"]).startswith("postgres: postgresql://")
    assert checks["worker"]["ok"] is True, checks["worker"]
    assert not (project / ".newsletter" / "outbox.sqlite3").exists()
