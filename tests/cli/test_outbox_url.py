"""The database password in NEWSLETTER_OUTBOX__URL, in every form libpq reads, never reaches
stdout or stderr of the real `newsletter` process: not in `outbox info`, not in any error
(issue 18.7: `?password=` was printed by both)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from support.postgres import free_port
from support.zygote import run

MARK = "7f3a9c"  # in every secret below, and nowhere else
SECRET = f"Sk-{MARK}-secret"


def with_secret(url: str, form: str) -> str:
    """`url` (postgresql://postgres@HOST:PORT/DB?options=...) carrying SECRET in `form`."""
    if form == "userinfo":
        return url.replace("postgres@", f"postgres:{SECRET}@", 1)
    return f"{url}&{form}={SECRET}"


FORMS = [
    "userinfo",
    "password",
    "pass%77ord",
    " password ",
    "sslpassword",
    "oauth_client_secret",
]


def newsletter(project: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEWSLETTER_", "PG"))}
    env["NEWSLETTER_OUTBOX__URL"] = url
    return run(list(args), env, project)


def shown(result: subprocess.CompletedProcess[str]) -> str:
    both = result.stdout + result.stderr
    assert "Traceback" not in both
    assert MARK not in both
    return both


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
def test_outbox_info_masks_the_password(project: Path, postgres_url: str, form: str) -> None:
    result = newsletter(project, with_secret(postgres_url, form), "outbox", "info")
    assert result.returncode == 0, result.stderr  # trust auth: the password is not needed
    out = shown(result)
    port = postgres_url.split(":")[2].split("/")[0]
    assert re.match(rf"postgres: postgresql://postgres(:\*\*\*)?@127\.0\.0\.1:{port}/postgres", out)
    assert "***" in out


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("fault", ["unreachable", "no such database"])
@pytest.mark.slow
def test_a_connection_error_masks_the_password(
    project: Path, postgres_url: str, form: str, fault: str
) -> None:
    url = with_secret(postgres_url, form)
    if fault == "unreachable":
        url = re.sub(r":\d+/", f":{free_port()}/", url, count=1)
    else:
        url = url.replace("/postgres?", "/nl_missing?")
    for command in (["outbox", "info"], ["status", "--issue", "14"]):
        result = newsletter(project, url, *command)
        assert result.returncode == 1
        err = shown(result)
        assert "cannot connect to the outbox database" in err
        assert ("Connection refused" if fault == "unreachable" else '"nl_missing"') in err


@pytest.mark.parametrize(
    ("query", "libpq_says"),
    [
        # libpq's own messages quote the value they cannot read.
        (f"password=%zz{SECRET}", 'invalid percent-encoded token: "***"'),
        (f"password={SECRET}%20and more", 'unexpected spaces found in "***"'),
        (f"scram_client_key={SECRET}", "invalid SCRAM client key"),
    ],
)
@pytest.mark.slow
def test_libpqs_own_message_is_scrubbed(
    project: Path, postgres_url: str, query: str, libpq_says: str
) -> None:
    result = newsletter(project, f"{postgres_url}&{query}", "outbox", "info")
    assert result.returncode == 1
    assert libpq_says in shown(result)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        # libpq would connect to the host "secret@127.0.0.1" and name it in its error.
        (f"postgresql://postgres:Sk@{MARK}@127.0.0.1:1/nl", "has more than one @"),
        (f"postgresql://127.0.0.1:1?password={MARK}@x", "has an @ after its ?"),
    ],
)
@pytest.mark.slow
def test_a_url_libpq_would_misread_is_refused_before_connecting(
    project: Path, url: str, reason: str
) -> None:
    result = newsletter(project, url, "outbox", "info")
    assert result.returncode == 1
    err = shown(result)
    assert f"error: NEWSLETTER_OUTBOX__URL: outbox.url: {reason}" in err
    assert "%40" in err
