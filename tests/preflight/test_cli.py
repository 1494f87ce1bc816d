"""`newsletter check --online` end to end: the CLI against the DNS and web servers on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric import rsa

from newsletter.cli.main import cli
from support.dnszone import ZoneResolver, closed_port
from support.onlineproject import configure, write_issue
from support.websites import Site


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_online_names_each_broken_link_and_keeps_exit_codes(
    project: Path,
    dns: tuple[int, ZoneResolver],
    https_site: Site,
    ca_file: Path,
    dkim_key: rsa.RSAPrivateKey,
) -> None:
    configure(
        project,
        nameserver=f"127.0.0.1:{dns[0]}",
        base_url=https_site.base,
        ca_file=ca_file,
        dkim_key=dkim_key,
    )
    ok, missing, found = (https_site.url(p + "?cli") for p in ("/ok", "/missing", "/found"))
    write_issue(project, 15, {"好": [ok], "坏": [missing], "搬": [found]})
    code, out, err = run("check", "--issue", "15", "--online")
    assert code == 1, err
    # The example list's two bad rows are `check`'s [list] warning, not this test's subject.
    lines = [line for line in out.splitlines() if not line.endswith("[list]")]
    assert lines[0] == f"error: 「坏」 in 「项目」: {missing}: 404 [link-check]"
    assert lines[1].startswith("HTML part: ")
    assert lines[2].startswith("spam score ")  # issue 11's offline check, before the online ones
    assert lines[3] == f"note: 「搬」 in 「项目」: {found} → {https_site.url('/ok')} (302 → 200)"
    assert lines[4].startswith("online: 3 link(s): 2 answering, 1 failing, 0 not fetched ")
    assert lines[5:] == ["issue 15: 1 error(s), 1 warning(s)"]  # the warning: [list]
    # Offline, the same issue passes: the broken link is an online finding only.
    code, out, _ = run("check", "--issue", "15")
    assert code == 0
    assert out.splitlines()[-1] == "issue 15: 0 error(s), 1 warning(s)"  # [list]
    assert "online" not in out


@pytest.mark.slow
def test_config_turns_it_on_and_offline_turns_it_off(
    project: Path, dns: tuple[int, ZoneResolver], http_site: Site
) -> None:
    configure(project, nameserver=f"127.0.0.1:{dns[0]}", base_url=http_site.base, online=True)
    write_issue(project, 15, {"好": [http_site.url("/ok?config")]})
    code, out, _ = run("check", "--issue", "15")
    assert code == 0  # 8 subscribers: the missing DKIM/DMARC/https are warnings
    assert "[one-click]" in out
    assert "online: 1 link(s): 1 answering, 0 failing, 0 not fetched" in out
    code, out, _ = run("check", "--issue", "15", "--offline")
    assert code == 0
    assert "online" not in out


@pytest.mark.slow
def test_no_network_is_one_line_and_the_same_exit_code(project: Path, http_site: Site) -> None:
    configure(project, nameserver=f"127.0.0.1:{closed_port()}", base_url=http_site.base)
    offline_code, offline_out, _ = run("check", "--issue", "14")
    code, out, err = run("check", "--issue", "14", "--online")
    assert code == offline_code == 0
    extra = [line for line in out.splitlines() if line not in offline_out.splitlines()]
    assert len(extra) == 1
    assert extra[0].startswith("online checks skipped: no answer from 127.0.0.1:")
    assert "Traceback" not in out + err


@pytest.mark.slow
def test_the_bulk_line_turns_missing_authentication_into_errors(
    project: Path,
    dns: tuple[int, ZoneResolver],
    https_site: Site,
    ca_file: Path,
    dkim_key: rsa.RSAPrivateKey,
) -> None:
    configure(
        project,
        nameserver=f"127.0.0.1:{dns[0]}",
        base_url=https_site.base,
        ca_file=ca_file,
        sender_domain="news.unsigned.example",
        dkim_key=dkim_key,
    )
    write_issue(project, 15, {"好": [https_site.url("/ok?bulk")]})
    code, out, _ = run("check", "--issue", "15", "--online")
    assert code == 0
    small = [line for line in out.splitlines() if line.startswith("warning: ")]
    small = [line for line in small if not line.endswith("[list]")]  # the example list's rows
    assert [line.rsplit(" ", 1)[1] for line in small] == ["[spf]", "[dmarc]", "[dkim]"]
    assert all("(list of 8, under the bulk line of 5,000)" in line for line in small)
    rows = "".join(f"reader{n}@example.org\n" for n in range(5001))
    (project / "subscribers.example.csv").write_text("email\n" + rows, encoding="utf-8")
    code, out, _ = run("check", "--issue", "15", "--online")
    assert code == 1
    big = [line for line in out.splitlines() if line.startswith("error: ")]
    assert [line.rsplit(" ", 1)[1] for line in big] == ["[spf]", "[dmarc]", "[dkim]"]
    assert all("(list of 5,001, over the bulk line of 5,000)" in line for line in big)
    assert out.splitlines()[-1] == "issue 15: 3 error(s), 0 warning(s)"


@pytest.mark.slow
def test_a_missing_ca_file_is_a_clear_error(
    project: Path, dns: tuple[int, ZoneResolver], https_site: Site
) -> None:
    configure(
        project,
        nameserver=f"127.0.0.1:{dns[0]}",
        base_url=https_site.base,
        ca_file=project / "no-such-ca.pem",
    )
    code, _, err = run("check", "--issue", "14", "--online")
    assert code == 1
    assert err.splitlines()[-2:] == [
        f"error: check.ca_file: cannot use {project / 'no-such-ca.pem'}: No such file or directory",
        "hint: Point [check] ca_file at a PEM file with the CA's certificate.",
    ]
