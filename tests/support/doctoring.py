"""`newsletter doctor` run as a real process against a project copy, its --json parsed."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from support.sendcli import environment, newsletter

Checks = dict[str, dict[str, object]]


def doctor_env(smtp_port: int = 9, **extra: str) -> dict[str, str]:
    """The test environment (its secret, SMTP on 127.0.0.1:`smtp_port`), private addresses
    allowed for the loopback servers."""
    return environment(smtp_port, NEWSLETTER_CHECK__ALLOW_PRIVATE="true", **extra)


async def run_doctor(project: Path, env: dict[str, str], *args: str) -> tuple[int, Checks]:
    """Exit code and every check by name, from `newsletter doctor --json`."""
    done = await newsletter(["doctor", "--json", *args], env, project)
    assert done.err == "", done.err  # never a traceback
    found = json.loads(done.out)
    assert all(set(d) == {"name", "ok", "detail", "fix"} for d in found)
    return done.code, {str(d["name"]): d for d in found}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)
