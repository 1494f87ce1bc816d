"""SpamAssassin as a check: the real `spamassassin -L -t` on sample messages as they go out.

Issue 14 must score <= 0.0 for the main list and the staging list alike, also with images, and
so must both weeklies of tests/data/weeklies and the image-heavy digest of tests/data/phones; a
template that hides
the preheader with a colour trick, and a message that is spam by definition (GTUBE), show the
warning and the error. Without SpamAssassin these tests skip, except in CI (CI=true).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from newsletter.checks.spamscore import (
    INSTALL_HINT,
    SPAM_ERROR,
    SpamScore,
    SpamUnavailable,
    score_message,
    score_message_async,
    spam_findings,
)
from newsletter.config.settings import Settings
from newsletter.draft import review
from newsletter.issues import load_issue
from newsletter.mail.message import sample_message
from newsletter.mail.tracking import render_for_sending
from newsletter.rendering.render import render_issue
from support.images import png
from support.weeklies import CHINESE, ENGLISH, add_weekly, weekly_settings

pytestmark = pytest.mark.spamassassin  # its projects start with no kept scores

PHONES = Path(__file__).resolve().parent / "data" / "phones"
# The Generic Test for Unsolicited Bulk Email: every SpamAssassin scores it 1000.
GTUBE = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"


@pytest.fixture
def spamassassin() -> None:
    if shutil.which("spamassassin") is None:
        reason = "spamassassin is not installed (apt-get install spamassassin)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the real program: {reason}")
        pytest.skip(reason)


def sample_bytes(settings: Settings, list_name: str = "main") -> bytes:
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    return sample_message(rendered, settings, list_name)[0].data


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.parametrize("list_name", ["main", "staging"])
@pytest.mark.slow
def test_issue_14_scores_nothing_on_either_list(settings: Settings, list_name: str) -> None:
    result = score_message(sample_bytes(settings, list_name))
    assert isinstance(result, SpamScore), result
    assert result.score <= 0.0, result.summary()
    assert result.scored == ()
    assert {rule.name for rule in result.rules} >= {"HTML_MESSAGE"}  # the report was read
    assert spam_findings(result) == []
    assert result.summary().startswith("spam score 0.0 (SpamAssassin ")


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.slow
def test_a_colour_hidden_preheader_is_a_warning(settings: Settings) -> None:
    """MJML's mj-preview hides the preheader as white 1 px text, which SpamAssassin scores."""
    template = settings.templates_dir / "issue.mjml"
    source = template.read_text(encoding="utf-8")
    start = source.index('    <mj-raw>\n      <div class="nl-preheader"')
    end = source.index("</mj-raw>", start) + len("</mj-raw>")
    source = source[:start] + source[end:]
    template.write_text(
        source.replace("<mj-head>", "<mj-head><mj-preview>{{ preheader }}</mj-preview>", 1),
        encoding="utf-8",
    )
    result = score_message(sample_bytes(settings))
    assert isinstance(result, SpamScore), result
    assert [rule.name for rule in result.scored] == ["HTML_FONT_LOW_CONTRAST"]
    # Its description runs over two lines of the report.
    assert (
        result.scored[0].description == "BODY: HTML font color similar or identical to background"
    )
    [finding] = spam_findings(result)
    assert finding.level == "warning"
    assert "HTML_FONT_LOW_CONTRAST" in finding.message
    assert f"scores the sample message {result.score:.1f} (aim for 0.0)" in finding.message


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.slow
def test_spam_is_an_error(settings: Settings) -> None:
    issue_file = settings.issues_dir / "14.yaml"
    text = issue_file.read_text(encoding="utf-8")
    escaped = GTUBE.replace("*", "\\*")  # not Markdown emphasis
    issue_file.write_text(text.replace("sections:", f"intro: {escaped}\nsections:", 1), "utf-8")
    result = score_message(sample_bytes(settings))
    assert isinstance(result, SpamScore), result
    assert result.score >= SPAM_ERROR
    assert "GTUBE" in {rule.name for rule in result.scored}
    [finding] = spam_findings(result)
    assert finding.level == "error"
    assert "which it calls spam: +1000.0 GTUBE" in finding.message


def test_a_missing_program_says_how_to_install_it(tmp_path: Path) -> None:
    result = score_message(b"Subject: x\r\n\r\nx\r\n", program=str(tmp_path / "spamassassin"))
    assert isinstance(result, SpamUnavailable)
    assert INSTALL_HINT in result.summary()
    assert "apt-get install spamassassin" in result.summary()
    assert spam_findings(result) == []


def test_a_program_without_a_report_is_named_with_its_exit_code() -> None:
    result = score_message(b"Subject: x\r\n\r\nx\r\n", program="false")
    assert result == SpamUnavailable("`false` exited with code 1 without a report")


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.slow
async def test_the_preview_s_async_run_gives_the_same_verdict(settings: Settings) -> None:
    data = sample_bytes(settings, "staging")
    assert await score_message_async(data) == score_message(data)
    missing = await score_message_async(data, program="no-such-spamassassin")
    assert isinstance(missing, SpamUnavailable)


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.slow
def test_an_issue_with_images_scores_nothing(settings: Settings) -> None:
    # issue 20: issue 14 with a cover and an image in every section, one of them linked.
    (settings.issues_dir / "images").mkdir()
    for name in ("cover", "chart"):
        (settings.issues_dir / "images" / f"{name}.png").write_bytes(png(1200, 675))
    path = settings.issues_dir / "14.yaml"
    text = path.read_text(encoding="utf-8").replace(
        "sections:", "cover: {src: images/cover.png, alt: 一台服务器机柜的正面}\nsections:", 1
    )
    for summary in (
        "【OneFlow深度学习框架论文正式公开】",
        "该研究提出了一个可用于下游任务性能的模型",
    ):
        text = text.replace(
            summary,
            f"[![一张训练速度的对比图](images/chart.png)](https://arxiv.org/abs/1) {summary}",
        )
    path.write_text(text, encoding="utf-8")
    result = score_message(sample_bytes(settings))
    assert isinstance(result, SpamScore), result
    assert result.scored == (), result.summary()
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    assert rendered.html.count("<img ") == 3


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.slow
@pytest.mark.parametrize("number", [CHINESE, ENGLISH], ids=["chinese", "english"])
def test_the_weeklies_score_nothing(project: Path, number: int) -> None:
    # The Chinese weekly's titles "1、[title](url)" once put a tag between their number and
    # their link, which SpamAssassin counts as obfuscation (0.6, HTML_OBFUSCATE_05_10).
    path = add_weekly(project, number)
    result = score_message(review(weekly_settings(project, number), path, "main").message)
    assert isinstance(result, SpamScore), result
    assert result.scored == (), result.summary()


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.slow
def test_an_image_heavy_digest_scores_nothing(settings: Settings) -> None:
    """issue 30, point 7: a monthly digest of "[name](url)：description" titles, twelve with a
    screenshot each and twenty in a compact list. Each title put a tag between its number and
    its link and between its link and the Chinese text after it, which SpamAssassin's
    HTML_OBFUSCATE rules count (made for Latin words split by tags): 2.5, HTML_OBFUSCATE_20_30.
    A title with one link is that link as a whole, as a plain title is."""
    path = settings.issues_dir / "31.md"
    shutil.copy2(PHONES / "31.md", path)
    draft = review(settings, path, "main")
    assert draft.html.count("<img ") == 12
    result = score_message(draft.message)
    assert isinstance(result, SpamScore), result
    assert result.scored == (), result.summary()
    assert result.score <= 0.0
    assert spam_findings(result) == []


@pytest.mark.usefixtures("spamassassin")
@pytest.mark.parametrize("mode", ["aggregate", "per-reader"])
@pytest.mark.slow
def test_tracked_links_and_the_canary_score_nothing(settings: Settings, mode: str) -> None:
    tracked = settings.model_copy(
        update={"tracking": settings.tracking.model_copy(update={"clicks": mode})}
    )
    sending = render_for_sending(load_issue(settings.issues_dir, 14), tracked, "main")
    data = sample_message(sending.rendered, tracked, "main", sending.links)[0].data
    assert len(sending.links) > 20  # the links are tracked, the canary among them
    result = score_message(data)
    assert isinstance(result, SpamScore), result
    assert result.score <= 0.0, result.summary()
    assert result.scored == ()
