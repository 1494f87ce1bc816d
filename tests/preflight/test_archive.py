"""`newsletter check --archive` (issue 33, point 5): every published issue's links fetched by
`check --online`'s fetcher, the dead ones named by issue and item, the answers kept so the next
run fetches nothing, and the private addresses refused as they are before a send."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from newsletter.cli.main import cli
from support.dnszone import ZoneResolver
from support.onlineproject import configure, write_issue
from support.project import publish_all
from support.websites import website


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def archive_of_two(project: Path, base: str) -> None:
    """Issues 15 and 16 alone in the archive (the shipped ones link the real internet)."""
    for path in (project / "issues").iterdir():
        if path.suffix in (".yaml", ".yml", ".md"):
            path.unlink()
    publish_all(project)
    write_issue(project, 15, {"好": [f"{base}/ok"], "坏": [f"{base}/missing"]})
    write_issue(project, 16, {"也好": [f"{base}/ok"], "断了": [f"{base}/broken"]})


def test_dead_links_by_issue_and_item_and_a_second_run_from_the_cache(
    project: Path, dns: tuple[int, ZoneResolver]
) -> None:
    with website() as site:
        configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=site.base)
        archive_of_two(project, site.base)
        code, out, err = run("check", "--archive")
        assert code == 1, err
        assert out.splitlines() == [
            "issue 15:",
            f"  error: 「坏」 in 「项目」: {site.base}/missing: 404 [link-check]",
            "issue 16:",
            f"  error: 「断了」 in 「项目」: {site.base}/broken: 500 [link-check]",
            "archive: 2 published issue(s), 3 link(s) (3 fetched, 0 from the cache): "
            "2 dead, 0 in doubt",
        ]
        # /ok is linked twice and fetched once.
        assert site.requests[("HEAD", "/ok")] == 1
        served = sum(site.requests.values())
        assert (project / ".newsletter" / "archive-cache.json").is_file()
        code, again, _ = run("check", "--archive")
        assert code == 1
        assert sum(site.requests.values()) == served  # nothing fetched: the cache answered
        assert again.splitlines()[:-1] == out.splitlines()[:-1]
        assert again.splitlines()[-1] == (
            "archive: 2 published issue(s), 3 link(s) (0 fetched, 3 from the cache): "
            "2 dead, 0 in doubt"
        )


def test_a_healthy_archive_exits_0(project: Path, dns: tuple[int, ZoneResolver]) -> None:
    with website() as site:
        configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=site.base)
        archive_of_two(project, site.base)
        write_issue(project, 16, {"也好": [f"{site.base}/no-head"]})
        edit = project / "issues" / "15.yaml"
        edit.write_text(edit.read_text(encoding="utf-8").replace("/missing", "/ok?2"), "utf-8")
        code, out, err = run("check", "--archive")
        assert code == 0, out + err
        assert out.splitlines() == [
            "archive: 2 published issue(s), 3 link(s) (3 fetched, 0 from the cache): "
            "0 dead, 0 in doubt"
        ]


def test_private_addresses_are_refused_as_before_a_send(
    project: Path, dns: tuple[int, ZoneResolver]
) -> None:
    with website() as site:
        configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=site.base, allow_private=None)
        archive_of_two(project, site.base)
        code, out, _ = run("check", "--archive")
        assert code == 1
        assert sum(site.requests.values()) == 0  # never connected to
        dead = [line for line in out.splitlines() if line.startswith("  error: ")]
        assert len(dead) == 4, out
        assert all("[link-check]" in line for line in dead)
        assert out.splitlines()[-1].endswith("4 dead, 0 in doubt")


def test_only_the_published_issues_are_checked(
    project: Path, dns: tuple[int, ZoneResolver]
) -> None:
    with website() as site:
        configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=site.base)
        archive_of_two(project, site.base)
        config = project / "newsletter.toml"
        text = config.read_text(encoding="utf-8").replace('publish = "all"', 'publish = "sent"')
        config.write_text(text, encoding="utf-8")
        code, out, _ = run("check", "--archive")  # nothing was ever sent: nothing published
        assert code == 0
        assert out.splitlines() == [
            "archive: 0 published issue(s), 0 link(s) (0 fetched, 0 from the cache): "
            "0 dead, 0 in doubt"
        ]
        assert sum(site.requests.values()) == 0


def test_archive_and_one_issue_are_one_or_the_other(project: Path) -> None:
    code, _, err = run("check", "--archive", "--issue", "14")
    assert code == 2
    assert "--archive checks every published issue's links online" in err
    code, _, err = run("check", "--archive", "--format", "json")
    assert code == 2


def test_links_marked_dead_are_known_not_fetched_nor_failed(
    project: Path, dns: tuple[int, ZoneResolver]
) -> None:
    """The editor marked issue 15's dead link in its file (`dead:`, with a replacement): the
    run names it as known, does not fetch it, and only issue 16's unmarked one fails."""
    with website() as site:
        configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=site.base)
        archive_of_two(project, site.base)
        path = project / "issues" / "15.yaml"
        path.write_text(
            path.read_text(encoding="utf-8")
            + f"dead:\n- {site.base}/missing: {site.base}/ok?moved\n",
            encoding="utf-8",
        )
        code, out, err = run("check", "--archive")
        assert code == 1, err  # issue 16's /broken is not marked
        assert out.splitlines() == [
            "issue 15:",
            f"  known dead (marked in the issue file): 「坏」 in 「项目」: {site.base}/missing "
            f"(now at {site.base}/ok?moved)",
            "issue 16:",
            f"  error: 「断了」 in 「项目」: {site.base}/broken: 500 [link-check]",
            "archive: 2 published issue(s), 2 link(s) (2 fetched, 0 from the cache): "
            "1 dead, 0 in doubt, 1 known dead",
        ]
        assert ("HEAD", "/missing") not in site.requests
        assert ("GET", "/missing") not in site.requests
        # Both marked: nothing fails.
        path = project / "issues" / "16.yaml"
        path.write_text(
            path.read_text(encoding="utf-8") + f"dead:\n- {site.base}/broken\n", encoding="utf-8"
        )
        code, out, _ = run("check", "--archive")
        assert code == 0, out
        known = "  known dead (marked in the issue file): 「断了」 in 「项目」: "
        assert f"{known}{site.base}/broken" in out.splitlines()
        assert out.splitlines()[-1].endswith("0 dead, 0 in doubt, 2 known dead")
