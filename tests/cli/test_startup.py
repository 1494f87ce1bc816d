"""The send command's start: only what sending needs is imported (each of these costs tens of
milliseconds on every `newsletter send`; benchmarks/scale.py times the whole command)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

LOAD_SEND = """
import sys, click
from newsletter.cli.main import cli
assert cli.get_command(click.Context(cli), "send") is not None
# What the command's body imports when it sends (cli/sending.py imports them there).
import newsletter.send.pipeline, newsletter.send.job, newsletter.cli.gatekeeping
print(sorted(sys.modules))
"""

# Other commands' code, and libraries a send of an issue without markup, without [dkim] and
# without a terminal never calls.
NOT_FOR_SEND = [
    "newsletter.web",
    "newsletter.preflight",
    "newsletter.cli.author",
    "newsletter.cli.lists",
    "newsletter.cli.servers",
    "newsletter.bounces.inbox",
    "newsletter.send.processes",  # --processes only
    "ctypes",
    "markdown_it",
    "dkim",
    "flufl.bounce",
    "rich",
    "uvicorn",
    "starlette",
]


@pytest.fixture(scope="module")
def loaded() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", LOAD_SEND], capture_output=True, text=True, check=True
    ).stdout
    return set(ast.literal_eval(out))


@pytest.mark.slow
@pytest.mark.parametrize("module", NOT_FOR_SEND)
def test_the_send_command_does_not_import(module: str, loaded: set[str]) -> None:
    assert module not in loaded


def test_the_send_command_itself_is_loaded(loaded: set[str]) -> None:
    assert {"newsletter.cli.sending", "newsletter.send.engine", "aiosmtplib"} <= loaded


LOAD_SEND_HELP = """
import sys, click
from newsletter.cli.main import cli
assert cli.get_command(click.Context(cli), "send") is not None
print(sorted(sys.modules))
"""

# What `send --help` (and a usage error of send's options) does not need: the send's stack.
NOT_FOR_SEND_HELP = [
    "pydantic",
    "newsletter.config.settings",
    "newsletter.database",
    "newsletter.gate",
    "newsletter.rendering.render",
    "newsletter.send.engine",
    "jinja2",
    "cryptography",
]


@pytest.fixture(scope="module")
def help_loaded() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", LOAD_SEND_HELP], capture_output=True, text=True, check=True
    ).stdout
    return set(ast.literal_eval(out))


@pytest.mark.parametrize("module", NOT_FOR_SEND_HELP)
def test_send_help_does_not_import(module: str, help_loaded: set[str]) -> None:
    assert module not in help_loaded


LOAD_ROOT = """
import sys
import newsletter.cli.main
print(sorted(sys.modules))
"""

# What `newsletter --version`, `newsletter --help` and a mistyped command load: the root group
# alone, not the config's models (~0.1 s) nor any command's code.
NOT_FOR_THE_ROOT = [
    "pydantic",
    "newsletter.config.settings",
    "newsletter.importers.subscribers",
    "email_validator",
]


@pytest.fixture(scope="module")
def root_loaded() -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", LOAD_ROOT], capture_output=True, text=True, check=True
    ).stdout
    return set(ast.literal_eval(out))


@pytest.mark.parametrize("module", NOT_FOR_THE_ROOT)
def test_the_root_group_does_not_import(module: str, root_loaded: set[str]) -> None:
    assert module not in root_loaded
