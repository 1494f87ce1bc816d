"""`newsletter check` on real-shaped weeklies (issue 24.6): a repeated link is one warning in the
newsletter's quotation marks, and a warning the issue file silences is named, not shown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from support.weeklies import ENGLISH, add_weekly, weekly_environ

# The real weekly's events are list entries that start with the meetup's page (so each is an
# item whose title links it); the fixture's start with the date. This puts the page first.
_EVENT = re.compile(r"^\* (\S+) \| (.+?) \| (\[[^\]]+\]\([^)]+\))$", re.MULTILINE)


def check(*args: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", *args], env=environ)
    return result.exit_code, result.stdout, result.stderr


def english_weekly(project: Path) -> Path:
    path = add_weekly(project, ENGLISH)
    text, events = _EVENT.subn(r"* \3 \1 | \2", path.read_text(encoding="utf-8"))
    assert events == 30
    # A list is items only right under its section's heading (issue 30): the virtual events'
    # dates line goes, so that they are items like the other sections' events.
    dates = "Crab events between 2026-03-04 and 2026-04-01.\n\n"
    assert dates in text
    text = text.replace(dates, "")
    path.write_text(text, encoding="utf-8")
    return path


def front_matter(path: Path, line: str) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("\ndate: ", f"\n{line}\ndate: ", 1), encoding="utf-8")


@pytest.mark.slow
def test_links_repeated_within_one_sections_text_are_not_duplicates(project: Path) -> None:
    # As written, the events are a list in each section's intro: a meetup's page repeated there
    # is meant (one per event), not a slip between two items.
    add_weekly(project, ENGLISH)
    code, out, _ = check("--issue", "580", environ=weekly_environ(ENGLISH))
    assert code == 0
    assert "[duplicate-url]" not in out


@pytest.mark.slow
def test_a_weekly_repeating_meetup_pages_gets_one_warning_per_page(project: Path) -> None:
    english_weekly(project)
    code, out, _ = check("--issue", "580", environ=weekly_environ(ENGLISH))
    assert code == 0
    repeated = [line for line in out.splitlines() if line.endswith("[duplicate-url]")]
    # 13 pages repeat (Lisbon's under three events): 13 lines, not one per pair.
    assert len(repeated) == 13
    assert len({line.split()[1] for line in repeated}) == 13
    assert repeated[0] == (
        "warning: https://meet.example.org/lisbon-crabs is linked under 3 items: "
        "“Lisbon Crabs 2026-03-05 | Virtual (Lisbon, PT)”, "
        "“Lisbon Crabs 2026-03-17 | Virtual (Lisbon, PT)” and "
        "“Lisbon Crabs 2026-03-29 | Virtual (Lisbon, PT)” in “Upcoming events: Virtual” "
        "[duplicate-url]"
    )
    assert "「" not in out  # an English newsletter is quoted in English
    assert out.splitlines()[-1] == "issue 580: 0 error(s), 14 warning(s)"


@pytest.mark.slow
def test_the_issue_file_silences_them_and_check_says_so(project: Path) -> None:
    path = english_weekly(project)
    front_matter(path, "silence: [duplicate-url]")
    code, out, _ = check("--issue", "580", environ=weekly_environ(ENGLISH))
    assert code == 0
    assert "[duplicate-url]" not in out
    assert "silenced by the issue file: duplicate-url (13)" in out.splitlines()
    assert out.splitlines()[-1] == "issue 580: 0 error(s), 1 warning(s), 13 silenced"


@pytest.mark.slow
def test_a_silence_can_name_the_urls_it_is_about(project: Path) -> None:
    path = english_weekly(project)
    front_matter(
        path,
        "silence:\n  - duplicate-url: [https://meet.example.org/lisbon-crabs, "
        "https://meet.example.org/gone]",
    )
    code, out, _ = check("--issue", "580", environ=weekly_environ(ENGLISH))
    assert code == 0
    assert "lisbon-crabs is linked" not in out
    assert "https://meet.example.org/denver-crabs is linked under 2 items" in out
    assert (
        "silenced by the issue file: duplicate-url https://meet.example.org/lisbon-crabs "
        "https://meet.example.org/gone (1)"
    ) in out.splitlines()
    assert out.splitlines()[-1] == "issue 580: 0 error(s), 13 warning(s), 1 silenced"


@pytest.mark.slow
def test_issue_14s_duplicate_kept_on_purpose_can_be_silenced(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("sections:\n", "silence: [duplicate-url]\nsections:\n", 1))
    code, out, _ = check("--issue", "14")
    assert code == 0
    assert "[duplicate-url]" not in out
    assert out.splitlines()[-2:] == [
        "silenced by the issue file: duplicate-url (1)",
        "issue 14: 0 error(s), 1 warning(s), 1 silenced",
    ]


@pytest.mark.slow
def test_a_silence_with_nothing_left_to_silence_is_named(project: Path) -> None:
    path = project / "issues" / "14.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("sections:\n", "silence: [bidi]\nsections:\n", 1))
    code, out, _ = check("--issue", "14")
    assert code == 0
    assert "[duplicate-url]" in out  # not silenced: only bidi was
    assert out.splitlines()[-2:] == [
        "silenced by the issue file: bidi (nothing to silence)",
        "issue 14: 0 error(s), 2 warning(s)",
    ]


@pytest.mark.slow
def test_errors_are_never_silenced(project: Path) -> None:
    # The template loses its unsubscribe link: no silence can hide that, and naming the check
    # is itself an error at its line.
    template = project / "templates" / "email" / "issue.mjml"
    text = template.read_text(encoding="utf-8")
    template.write_text(text.replace("{{ placeholders.unsubscribe_url }}", "https://x.example"))
    path = project / "issues" / "14.yaml"
    issue = path.read_text(encoding="utf-8")
    path.write_text(issue.replace("sections:\n", "silence: [unsubscribe, markers]\nsections:\n"))
    code, out, err = check("--issue", "14")
    assert (code, out) == (1, "")
    line = issue.splitlines().index("sections:") + 1
    assert err.splitlines() == [
        f"error: issues/14.yaml:{line}: silence[0]: unsubscribe cannot be silenced: every "
        "reader must be able to leave, from either part",
        f"issues/14.yaml:{line}: silence[1]: markers cannot be silenced: readers would see "
        "the template's code instead of the text",
        "hint: Fix the lines named above and run `newsletter check` again.",
    ]
    path.write_text(issue)
    code, out, _ = check("--issue", "14")
    assert code == 1
    assert "error: the HTML has no visible unsubscribe link" in out


def test_a_misspelt_check_is_an_error_at_its_line_naming_the_ones_there_are(
    project: Path,
) -> None:
    path = english_weekly(project)
    front_matter(path, "silence:\n  - duplicate-urls")
    code, out, err = check("--issue", "580", environ=weekly_environ(ENGLISH))
    assert (code, out) == (1, "")
    assert err.startswith(
        "error: issues/580.md:5: silence[0]: 'duplicate-urls' is not the name of a check that "
        "can be silenced; those are: bidi, clip, duplicate-url, empty-section, http, "
    )
