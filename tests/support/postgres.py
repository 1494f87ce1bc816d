"""A throwaway PostgreSQL cluster for the tests: Debian's binaries in, a loopback URL out.

The cluster lives in a temporary folder, listens on a free port on 127.0.0.1 only (its socket in
the same folder), runs with fsync off (a test database need not survive a power cut) and is
stopped at the end of the session. PostgreSQL refuses to run as root: as root, the folder is
given to the `postgres` user (or `nobody`) and every server command runs as that user.
Each test gets its own schema, as good as a database of its own.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

USERS = ("postgres", "nobody")


def binaries() -> Path | None:
    """The folder of initdb and pg_ctl: NEWSLETTER_PG_BIN, else the newest Debian version."""
    chosen = os.environ.get("NEWSLETTER_PG_BIN")
    if chosen:
        return Path(chosen)
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    found = shutil.which("pg_ctl")
    if versions:
        return versions[-1].parent
    return Path(found).parent if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    folder: Path
    port: int
    bin: Path
    run_as: str | None
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def command(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else list(args)

    def create_database(self) -> str:
        """A fresh, empty schema of its own (what a test sees as its database); its URL.
        A schema takes milliseconds where CREATE DATABASE takes a second."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url()}?options=-csearch_path%3D{name}"

    def stop(self) -> None:
        subprocess.run(
            self.command(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.folder / "data"),
                "-m",
                "immediate",
                "-w",
                "stop",
            ),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster(*, durable: bool = False) -> Cluster:
    """initdb + pg_ctl start on a free port; raises RuntimeError with the server's log.
    `durable` keeps the server's own flushes (fsync, full pages): what a benchmark of
    `durability = "power"` needs; the tests' cluster does without."""
    folder_bin = binaries()
    if folder_bin is None or not (folder_bin / "initdb").exists():
        raise FileNotFoundError("PostgreSQL not found (apt-get install postgresql)")
    run_as = None
    folder = Path(tempfile.mkdtemp(prefix="newsletter-pg-"))
    if os.geteuid() == 0:
        for name in USERS:
            try:
                user = pwd.getpwnam(name)
            except KeyError:
                continue
            run_as = name
            os.chown(folder, user.pw_uid, user.pw_gid)
            break
        else:
            raise RuntimeError("PostgreSQL will not run as root and there is no postgres user")
    cluster = Cluster(folder, free_port(), folder_bin, run_as)
    data, log = folder / "data", folder / "server.log"
    steps = [
        [
            str(folder_bin / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        ],
        [
            str(folder_bin / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {cluster.port} -k {folder} -c listen_addresses=127.0.0.1"
            " -c max_connections=200"
            + (
                "" if durable else " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            ),
            "start",
        ],
    ]
    for step in steps:
        done = subprocess.run(cluster.command(*step), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            detail = log.read_text() if log.exists() else ""
            cluster.stop()
            raise RuntimeError(f"{step[0]} failed: {done.stdout}{done.stderr}{detail}")
    return cluster


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """The session's cluster: skipped without PostgreSQL, except in CI (CI=true) where it fails."""
    try:
        cluster = start_cluster()
    except FileNotFoundError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the real PostgreSQL: {exc}")
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> str:
    """A new empty database on the session's cluster."""
    return postgres_cluster.create_database()
