"""The preview's Checks tab with `[check] online`: results shown, late ones announced."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import httpx
import pytest

from support.dnszone import ZoneResolver
from support.onlineproject import configure, write_issue
from support.preview import RunningPreview, running_preview
from support.websites import Site


def checks_pane(preview: RunningPreview, number: int) -> tuple[str, str, str]:
    """(the page's version, the Checks tab's count, the Checks pane's text)."""
    page = httpx.get(f"{preview.url}/issues/{number}", timeout=10).text
    version = re.search(r'data-version="([^"]+)"', page)
    count = re.search(r'id="check-count"[^>]*>([^<]*)<', page)
    pane = page.split('<div id="checks" data-live>', 1)[1].split("</section>", 1)[0]
    text = html.unescape(re.sub(r"<[^>]+>", " ", pane))
    return (version.group(1) if version else ""), (count.group(1) if count else ""), text


@pytest.mark.slow
def test_online_results_in_the_checks_tab(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base, online=True)
    missing = http_site.url("/missing?preview")
    write_issue(project, 15, {"好": [http_site.url("/ok?preview")], "坏": [missing]})
    with running_preview(project) as preview:
        deadline = time.monotonic() + 20
        while True:
            _, count, text = checks_pane(preview, 15)
            if "Checking" not in text or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert f"error 「坏」 in 「项目」: {missing}: 404 link-check" in " ".join(text.split())
    assert "online: 2 link(s): 1 answering, 1 failing, 0 not fetched" in text
    # The offline checks find nothing here; the tab counts the online findings too
    # (the 404, and the unauthenticated test domain's warnings).
    assert int(count) >= 1


@pytest.mark.parametrize(
    "path",
    [
        "/slow",  # answers after 3 s; the check's timeout is 2 s
        "/dribble",  # a byte every 0.2 s for 20 s: within every read timeout, cut at 2 s
    ],
)
@pytest.mark.slow
def test_a_late_result_reloads_the_page(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site, path: str
) -> None:
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base, online=True)
    slow = http_site.url(f"{path}?preview")
    write_issue(project, 15, {"慢": [slow]})
    with running_preview(project) as preview:
        first_version, _, first = checks_pane(preview, 15)
        assert "Checking… this page updates when the results are in." in first
        deadline = time.monotonic() + 20
        version, text = first_version, first
        while version == first_version and time.monotonic() < deadline:
            time.sleep(0.2)
            version, _, text = checks_pane(preview, 15)
    assert version != first_version  # the open pages were told to fetch themselves again
    assert f"warning 「慢」 in 「项目」: {slow}: timeout after 2 s link-check" in " ".join(
        text.split()
    )


@pytest.mark.slow
def test_off_says_how_to_turn_it_on(project: Path) -> None:
    with running_preview(project) as preview:
        _, count, text = checks_pane(preview, 14)
    assert "[check] online = true" in text
    assert count == "1"  # issue 14's one warning, offline
