"""Sequence files: sequences/NAME/NN-slug.md read by the issue loader, with `after`, `from` and
`lists` of their own; every fault named at its file and line; the lists a confirming reader
joins read from the first step's front matter alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsletter.errors import IssueError
from newsletter.issues.sequencefiles import joining, load_sequence, parse_delay, sequence_names
from support.sequences import welcome, write_step


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45s", 45.0),
        ("30m", 1800.0),
        ("12h", 43200.0),
        ("2d", 172800.0),
        ("1w", 604800.0),
        (0, 0.0),
    ],
)
def test_delays(text: object, seconds: float) -> None:
    assert parse_delay(text) == seconds


@pytest.mark.parametrize("text", ["2 days", "soon", "-1s", True, None, 1.5])
def test_what_is_not_a_delay(text: object) -> None:
    assert parse_delay(text) is None


def test_a_sequence_is_its_steps_in_order_each_an_issue(tmp_path: Path) -> None:
    welcome(tmp_path, second="2d")
    write_step(tmp_path, "welcome", "10-last", after="1w", title="Last", body="# x\n\nText.")
    (tmp_path / "sequences" / "welcome" / "notes.txt").write_text("not a step")
    sequence = load_sequence(tmp_path / "sequences", "welcome")
    assert [(s.number, s.slug, s.after) for s in sequence.steps] == [
        (1, "hello", 0.0),
        (2, "tips", 172800.0),
        (10, "last", 604800.0),
    ]
    assert sequence.lists == ("main",)
    assert sequence.steps[1].issue.title == "Tips"
    assert sequence.steps[1].issue.number == 2  # from the file name
    assert sequence_names(tmp_path / "sequences") == ["welcome"]


def test_every_fault_is_named_at_its_file_and_line(tmp_path: Path) -> None:
    write_step(tmp_path, "welcome", "01-hello", after="soon", title="Hello")
    write_step(tmp_path, "welcome", "02-tips", after="2d", title="Tips", lists="main")
    with pytest.raises(IssueError) as caught:
        load_sequence(tmp_path / "sequences", "welcome")
    text = str(caught.value)
    assert "sequences/welcome/01-hello.md:3: after: is 'soon'" in text
    assert "01-hello.md: lists: must name the lists" in text
    assert "sequences/welcome/02-tips.md:4: lists: is read from the sequence's first step" in text


def test_two_files_of_one_step_and_a_misnamed_file_are_refused(tmp_path: Path) -> None:
    welcome(tmp_path)
    write_step(tmp_path, "welcome", "02-again", after="1d", title="Again")
    write_step(tmp_path, "welcome", "three", after="1d", title="Three")
    with pytest.raises(IssueError) as caught:
        load_sequence(tmp_path / "sequences", "welcome")
    assert "step 2 has two files, 02-again.md and 02-tips.md" in str(caught.value)
    assert "three.md: is not a step's name" in str(caught.value)


def test_a_missing_sequence_names_the_ones_there_are(tmp_path: Path) -> None:
    welcome(tmp_path)
    with pytest.raises(IssueError, match=r"no such sequence \(sequences: welcome\)"):
        load_sequence(tmp_path / "sequences", "onboarding")


def test_joining_reads_the_first_steps_lists_and_passes_over_broken_sequences(
    tmp_path: Path,
) -> None:
    welcome(tmp_path)
    write_step(tmp_path, "other", "01-x", after="0s", title="X", lists="staging, main")
    broken = tmp_path / "sequences" / "broken"
    broken.mkdir()
    (broken / "01-a.md").write_text("---\nlists: [main\n---\n")
    assert joining(tmp_path / "sequences", "main") == ["other", "welcome"]
    assert joining(tmp_path / "sequences", "staging") == ["other"]
    assert joining(tmp_path / "nowhere", "main") == []
