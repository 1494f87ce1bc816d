"""`newsletter outbox migrate` and `outbox info`, on both backends; suppressions written through
one outbox are seen at once by every command pointed at the same database."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from newsletter.cli.main import cli
from newsletter.database import LATEST, MIGRATIONS, open_database


def run(project: Path, *args: str, url: Path | str) -> Result:
    return CliRunner().invoke(
        cli,
        ["--config", str(project / "newsletter.toml"), *args],
        env={"NEWSLETTER_OUTBOX__URL": f"sqlite:///{url}" if isinstance(url, Path) else url},
    )


def test_migrate_applies_every_migration_once(project: Path, database_target: Path | str) -> None:
    first = run(project, "outbox", "migrate", url=database_target)
    assert first.exit_code == 0, first.output
    assert [line for line in first.output.splitlines() if line.startswith("applied ")] == [
        f"applied {m.version}: {m.about}" for m in MIGRATIONS
    ]
    assert f"schema version {LATEST} (was 0)" in first.output
    again = run(project, "outbox", "migrate", url=database_target)
    assert "applied" not in again.output
    assert f"schema version {LATEST} (up to date)" in again.output
    info = run(project, "outbox", "info", url=database_target)
    assert f"schema version {LATEST} (up to date)" in info.output


def test_the_password_is_never_printed(project: Path, postgres_url: str) -> None:
    with_password = postgres_url.replace("postgres@", "postgres:s3cret-pw@")
    result = run(project, "outbox", "info", url=with_password)
    assert result.exit_code == 0, result.output  # trust auth ignores the password
    assert "s3cret-pw" not in result.output
    assert "postgres:***@127.0.0.1" in result.output


def test_an_unsubscribe_on_one_machine_is_seen_by_the_others(
    project: Path, postgres_url: str
) -> None:
    result = run(project, "unsubscribe", "Alice@Example.com", "--list", "main", url=postgres_url)
    assert result.exit_code == 0, result.output
    listed = run(project, "suppressions", url=postgres_url)
    assert "alice@example.com" in listed.output
    with open_database(postgres_url) as database:
        assert database.suppressions.contains("main", "alice@example.com")
