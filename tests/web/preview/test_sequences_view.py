"""The preview's Sequences view over real HTTP: each sequence and its steps with their checks,
a step's page with its email on its own URL under the email's policy, a step's fault shown on
the page (never a 500), and what a step's file holds escaped."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from support.preview import running_preview
from support.sequences import welcome, write_step

pytestmark = pytest.mark.slow  # a preview server started and stopped per test


def test_the_sequences_view_lists_each_step_and_shows_its_email(project: Path) -> None:
    welcome(project, second="2d")
    write_step(project, "welcome", "03-more", after="1w", title="<b>More</b>", body="Third.")
    with running_preview(project) as preview:
        index = httpx.get(f"{preview.url}/sequences")
        step = httpx.get(f"{preview.url}/sequences/welcome/2")
        email = httpx.get(f"{preview.url}/sequences/welcome/2/email.html")
        missing = httpx.get(f"{preview.url}/sequences/welcome/9")
        home = httpx.get(f"{preview.url}/")
    assert index.status_code == 200
    assert 'href="/sequences/welcome/2">02-tips</a>' in index.text
    assert "2.0 days after the previous step" in index.text
    assert "&lt;b&gt;More&lt;/b&gt;" in index.text  # a title is text, never markup
    assert "New readers of main join at step 1." in index.text
    assert step.status_code == 200
    assert 'src="/sequences/welcome/2/email.html"' in step.text
    assert email.status_code == 200
    assert "The words of Tips." in email.text
    assert "default-src 'none'" in email.headers["Content-Security-Policy"]
    assert missing.status_code == 404
    assert "has no step 9" in missing.text
    assert 'href="/sequences">Sequences</a>' in home.text


def test_a_faulty_step_is_shown_with_its_line_not_a_server_error(project: Path) -> None:
    welcome(project)
    write_step(project, "welcome", "03-x", after="whenever", title="X")
    with running_preview(project) as preview:
        index = httpx.get(f"{preview.url}/sequences")
    assert index.status_code == 200
    assert "03-x.md:3: after: is &#39;whenever&#39;" in index.text
