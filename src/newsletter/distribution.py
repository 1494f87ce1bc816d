"""This copy of the tool -> its distribution's name and version, and the command that adds an
extra to it the way it was installed (pip, pipx or uv tool).

The command and the import package are `newsletter`; the distribution on the package index is
not: that name belongs to another project there, so `pip install newsletter` (and a CI step that
ran it) would install someone else's code.
"""

from __future__ import annotations

import sys
from pathlib import Path

DISTRIBUTION = "git-newsletter"


def installed_version() -> str | None:
    """The installed distribution's version; None when run from a source tree never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None


def requirement(extra: str | None = None) -> str:
    """What pip installs for this version (`git-newsletter[shots]==0.1.0`): the newest release
    when this copy was never installed."""
    name = f"{DISTRIBUTION}[{extra}]" if extra else DISTRIBUTION
    current = installed_version()
    return f"{name}=={current}" if current else name


def extra_command(extra: str) -> str:
    """The command that adds `extra` to the environment this copy runs in: pipx and uv keep
    each tool in its own venv, where a plain `pip install` never reaches."""
    prefix = Path(sys.prefix)
    if (prefix / "pipx_metadata.json").is_file():  # pipx writes it in each venv it makes
        return f"pipx inject {DISTRIBUTION} " + " ".join(f"'{r}'" for r in _extra_needs(extra))
    if (prefix / "uv-receipt.toml").is_file():  # uv tool's record of the install
        return f"uv tool install '{DISTRIBUTION}[{extra}]'"
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def _extra_needs(extra: str) -> list[str]:
    """The requirements `extra` adds, read from the installed metadata (pyproject.toml's
    optional-dependencies, so the list is kept in one place)."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    needs = []
    for line in requires(DISTRIBUTION) or []:
        wanted = Requirement(line)
        marker = wanted.marker
        # Only what the extra adds: a marker true without it (a platform's) is a base need.
        if (
            marker is not None
            and marker.evaluate({"extra": extra})
            and not marker.evaluate({"extra": ""})
        ):
            wanted.marker = None
            needs.append(str(wanted))
    return needs
