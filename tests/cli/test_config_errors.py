"""A fault in the configuration, through the real `newsletter` process: one error line naming
where it came from (the variable, or the file's line and key), exit code 1, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def newsletter(project: Path, extra: dict[bytes, bytes]) -> tuple[int, str]:
    env = {k.encode(): v.encode() for k, v in os.environ.items() if not k.startswith("NEWSLETTER")}
    env.update(extra)
    result = subprocess.run(
        [sys.executable, "-m", "newsletter", "subscribers"],
        cwd=project,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err
    return result.returncode, err


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # issue 18.13: blamed on `newsletter.toml:33: smtp: Input should be a valid string`.
        (b"NEWSLETTER_SMTP__\xff", "error: NEWSLETTER_SMTP__\\xff: the variable's name is not"),
        # issue 18.13: blamed on `newsletter.toml: bogus: Extra inputs are not permitted`.
        (b"NEWSLETTER_BOGUS__X", "error: NEWSLETTER_BOGUS__X: bogus: is not a known setting"),
        (b"NEWSLETTER_SMTP__HOTS", "error: NEWSLETTER_SMTP__HOTS: smtp.hots: is not a known"),
    ],
)
@pytest.mark.slow
def test_a_bad_variable_name_is_named(project: Path, name: bytes, expected: str) -> None:
    code, err = newsletter(project, {name: b"1"})
    assert code == 1
    assert err.startswith(expected)
    assert "newsletter.toml" not in err


@pytest.mark.slow
def test_a_placeholder_word_in_the_file_names_its_line_and_key(project: Path) -> None:
    # issue 18.14: the config let __NL_ words through into every message.
    config = project / "newsletter.toml"
    lines = config.read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if line.startswith("name = "))
    lines[number - 1] = 'name = "AI系统 __NL_UNSUBSCRIBE_URL__"'
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, err = newsletter(project, {})
    assert code == 1
    assert err.startswith(
        f"error: newsletter.toml:{number}: newsletter.name: contains __NL_UNSUBSCRIBE_URL__:"
        " words starting with __NL_ are filled in per reader"
    )


@pytest.mark.slow
def test_a_placeholder_word_from_the_environment_names_its_variable(project: Path) -> None:
    code, err = newsletter(project, {b"NEWSLETTER_LISTS__MAIN__NAME": b"x __NL_NAME__"})
    assert code == 1
    assert err.startswith(
        "error: NEWSLETTER_LISTS__MAIN__NAME: lists.main.name: contains __NL_NAME__:"
    )


def test_a_language_without_the_tools_words_is_refused_at_its_line(project: Path) -> None:
    # Issue 41: `language = "fr"` was taken silently and the email and pages came out English.
    config = project / "newsletter.toml"
    config.write_text(
        config.read_text(encoding="utf-8").replace('language = "zh-CN"', 'language = "fr"'),
        encoding="utf-8",
    )
    code, err = newsletter(project, {})
    assert code == 1
    lines = config.read_text(encoding="utf-8").splitlines()
    line = lines.index('language = "fr"') + 1
    assert err.splitlines()[0] == (
        f"error: newsletter.toml:{line}: newsletter.language: 'fr': newsletter's own words (the "
        "email's footer, its pages) have no translation in it; the languages it has: en "
        "(English), zh (Chinese)"
    )


def test_init_with_a_language_it_has_no_words_for_writes_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from newsletter.cli.main import cli

    folder = tmp_path / "mynews"
    result = CliRunner().invoke(cli, ["init", str(folder), "--yes", "--language", "fr"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        "error: --language: 'fr': newsletter's own words (the email's footer, its pages) have "
        "no translation in it; the languages it has: en (English), zh (Chinese)"
    )
    assert not folder.exists() or not any(folder.iterdir())
    # A regional tag of a language it has is fine.
    result = CliRunner().invoke(cli, ["init", str(folder), "--yes", "--language", "en-GB"])
    assert result.exit_code == 0, result.stderr
