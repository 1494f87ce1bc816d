"""The state cache read as hostile (statecache.py) and a spam score kept by fingerprint in the
user's cache (spamscore.Scoring): nothing a stale, hand-edited or damaged file holds lets a
spammy message pass, and the file is private."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from newsletter.checks import spamkept
from newsletter.checks.spamscore import Scoring, SpamResult, SpamScore, spam_findings
from newsletter.state import usercache
from newsletter.state.statecache import Cache

MESSAGE = b"Subject: hello\r\n\r\nhello\r\n"
# `spamassassin -L -t`'s report, as parse_report reads it; the points come from a file the
# fake reads on each run (the user's preferences, or a file beside it).
REPORT = """#!/bin/sh
cat > /dev/null
points=$(cat "{source}")
echo "X-Spam-Checker-Version: SpamAssassin 4.0.1 (2022-12-14) on test"
echo ""
echo "Content analysis details:   ($points points, 5.0 required)"
echo ""
echo " pts rule name              description"
echo "---- ---------------------- --------------------------------------------------"
echo "$points BAD_WORDS              Body says things spammers say"
echo ""
"""


def score_message_once(data: bytes, fingerprint: str, *, program: str) -> SpamResult:
    """A check's score as the gate takes it: started, fed, read (kept, or scored and kept)."""
    with Scoring(program=program) as scoring:
        scoring.feed(data, fingerprint)
        return scoring.result()


def fake_spamassassin(folder: Path, source: Path) -> Path:
    program = folder / "spamassassin"
    program.write_text(REPORT.format(source=source))
    program.chmod(0o755)
    return program


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user of their own: home folder, SpamAssassin preferences and cache folder."""
    found = tmp_path / "home"
    (found / ".spamassassin").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(found))
    monkeypatch.setenv("XDG_CACHE_HOME", str(found / ".cache"))
    return found


def kept_scores(home: Path) -> list[Path]:
    return sorted((home / ".cache" / "newsletter" / "spam-scores").iterdir())


def test_a_huge_or_non_finite_expiry_is_dropped_not_kept_forever(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    entries = '{"huge": [1' + "0" * 400 + ', 1], "inf": [Infinity, 2], "nan": [NaN, 3]}'
    path.write_text('{"version": 1, "entries": ' + entries + "}")
    cache = Cache(path, clock=lambda: 1e300)  # far in the future: every real entry expired
    assert [cache.get(key) for key in ("huge", "inf", "nan")] == [None, None, None]


def test_an_entry_meant_to_live_longer_than_the_longest_ttl_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    writer = Cache(path, clock=lambda: 1000.0)
    writer.put("short", "kept", 60)
    writer.put("long", "written by a clock a year ahead", 365 * 86400)
    writer.save()
    reader = Cache(path, clock=lambda: 1000.0, longest=86400)
    assert reader.get("short") == "kept"
    assert reader.get("long") is None


def test_a_poisoned_kept_score_does_not_let_a_spammy_message_pass(
    tmp_path: Path, home: Path
) -> None:
    points = tmp_path / "points"
    points.write_text("6.0")
    program = fake_spamassassin(tmp_path, points)
    first = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(first, SpamScore)
    assert first.score == 6.0
    (kept,) = kept_scores(home)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    # The kept score edited to NaN: neither above 0.0 nor 5.0, it would be no finding at all.
    data = json.loads(kept.read_text())
    data["score"]["score"] = "nan"
    kept.write_text(json.dumps(data))
    again = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(again, SpamScore)
    assert again.score == 6.0
    assert [f.level for f in spam_findings(again)] == ["error"]


@pytest.mark.parametrize(
    "written",
    [
        '{"expires": 1' + "0" * 400 + ', "score": {"score": 0.0}}',
        '{"expires": Infinity, "score": {"score": 0.0}}',
        '{"expires": NaN, "score": {"score": 0.0}}',
        '{"expires": "soon", "score": {"score": 0.0}}',
        "[1, 2]",
        "not json",
    ],
)
def test_a_hostile_kept_score_is_no_score_not_a_traceback(
    tmp_path: Path, home: Path, written: str
) -> None:
    points = tmp_path / "points"
    points.write_text("6.0")
    program = fake_spamassassin(tmp_path, points)
    score_message_once(MESSAGE, "f1", program=str(program))
    (kept,) = kept_scores(home)
    kept.write_text(written)
    points.write_text("6.5")  # what a real run finds now: the kept file is not used
    found = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(found, SpamScore)
    assert found.score == 6.5


def test_a_score_kept_longer_than_a_day_is_not_trusted(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    points = tmp_path / "points"
    points.write_text("0.5")
    program = fake_spamassassin(tmp_path, points)
    # Written by a clock a year ahead: it would keep this score for a year.
    monkeypatch.setattr(spamkept.time, "time", lambda: 1_000_000_000.0 + 365 * 86400)
    score_message_once(MESSAGE, "f1", program=str(program))
    monkeypatch.setattr(spamkept.time, "time", lambda: 1_000_000_000.0)
    points.write_text("7.0")
    found = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(found, SpamScore)
    assert found.score == 7.0
    # One written now is kept: the same message is not scored again.
    points.write_text("1.0")
    assert score_message_once(MESSAGE, "f1", program=str(program)) == found


def test_the_score_of_one_project_s_draft_serves_another_project(
    tmp_path: Path, home: Path
) -> None:
    # The score depends on the message and the rules, not on the project's folder: the state
    # folder is not where it is kept.
    points = tmp_path / "points"
    points.write_text("0.5")
    program = fake_spamassassin(tmp_path, points)
    first = score_message_once(MESSAGE, "f1", program=str(program))
    points.write_text("9.0")
    assert score_message_once(MESSAGE, "f1", program=str(program)) == first
    assert usercache.root() == home / ".cache" / "newsletter"


def test_the_user_s_preferences_changed_is_a_new_score(tmp_path: Path, home: Path) -> None:
    prefs = home / ".spamassassin" / "user_prefs"
    prefs.write_text("0.5")
    # Times past the folder's own (it was just made): the file's time is what must count.
    os.utime(prefs, ns=(3_000_000_000_000_000_000, 3_000_000_000_000_000_000))
    program = fake_spamassassin(tmp_path, prefs)
    first = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(first, SpamScore)
    assert first.score == 0.5
    prefs.write_text("7.0")  # `score BAD_WORDS 7.0`, as the fake reads it
    os.utime(prefs, ns=(3_100_000_000_000_000_000, 3_100_000_000_000_000_000))
    second = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(second, SpamScore)
    assert second.score == 7.0


@pytest.mark.slow
def test_a_second_score_of_the_same_message_does_not_run_spamassassin_again(
    tmp_path: Path,
) -> None:
    """The real SpamAssassin writes beside the user's preferences (Bayes locks, its journal) on
    every run: that must not count as a change of rules, or no score is ever kept."""
    real = shutil.which("spamassassin")
    assert real is not None, "SpamAssassin is part of the test setup (.ci/run installs it)"
    runs = tmp_path / "runs.log"
    program = tmp_path / "bin" / "spamassassin"
    program.parent.mkdir()
    # A run is logged once it has its message: Scoring starts the program before it knows
    # whether a score is kept, and kills it unfed when one is, so a start is not a run.
    message = tmp_path / "message.eml"
    program.write_text(
        f'#!/bin/sh\ncat > "{message}"\necho run >> "{runs}"\nexec "{real}" "$@" < "{message}"\n'
    )
    program.chmod(0o755)
    first = score_message_once(MESSAGE, "f1", program=str(program))
    second = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(first, SpamScore)
    assert second == first
    assert runs.read_text().splitlines() == ["run"]


def test_rules_sa_update_wrote_two_folders_down_are_a_new_score(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "var-lib-spamassassin"
    updates = rules / "4.000001" / "updates_spamassassin_org"
    updates.mkdir(parents=True)
    cf = updates / "50_scores.cf"
    cf.write_text("0.5")
    os.utime(cf, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    for folder in (updates, updates.parent, rules):
        os.utime(folder, ns=(900_000_000_000_000_000, 900_000_000_000_000_000))
    monkeypatch.setattr(spamkept, "RULES", (rules,))
    program = fake_spamassassin(tmp_path, cf)
    first = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(first, SpamScore)
    assert first.score == 0.5
    cf.write_text("7.0")  # sa-update rewrote a rule file in place: no folder changed
    os.utime(cf, ns=(1_100_000_000_000_000_000, 1_100_000_000_000_000_000))
    second = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(second, SpamScore)
    assert second.score == 7.0


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path: Path, home: Path) -> None:
    # The cache folder a file (or a read-only home): the score is found, only not kept.
    points = tmp_path / "points"
    points.write_text("6.0")
    program = fake_spamassassin(tmp_path, points)
    (home / ".cache").mkdir()
    blocked = home / ".cache" / "newsletter"
    blocked.write_text("not a folder")
    found = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(found, SpamScore)
    assert found.score == 6.0
    assert blocked.read_text() == "not a folder"
    points.write_text("7.0")
    again = score_message_once(MESSAGE, "f1", program=str(program))
    assert isinstance(again, SpamScore)
    assert again.score == 7.0
