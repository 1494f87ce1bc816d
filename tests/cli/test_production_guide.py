"""docs/guide/production.md against the code: its install commands are what `deploy systemd`
prints for the project it describes, it names no hand-written unit or file deploy does not
write, and its nginx configuration passes `nginx -t` (Debian's, installed by .ci/run) with a
webhook location that takes serve's own webhook limit: a real nginx with it, in front of a real
serve, passes a provider's batch over 16 KiB."""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import trustme

from newsletter.config.settings import Settings
from newsletter.setup.deploy import Target, install_commands, systemd_files
from newsletter.web.site.guard import MAX_BODY, WEBHOOK_PREFIX
from newsletter.webhooks.common import MAX_BODY as WEBHOOK_MAX_BODY
from support.site import running_service

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "production.md"
TEXT = GUIDE.read_text(encoding="utf-8")
ROOT = Path("/srv/newsletter")
EXECUTABLE = "/opt/pipx/venvs/git-newsletter/bin/newsletter"  # pipx's, as step 1 installs it


def _blocks(language: str) -> list[str]:
    """The guide's fenced blocks in `language`, in order."""
    found, inside, lines = [], False, list[str]()
    for line in TEXT.splitlines():
        if not inside and line == f"```{language}":
            inside, lines = True, []
        elif inside and line == "```":
            inside = False
            found.append("\n".join(lines) + "\n")
        elif inside:
            lines.append(line)
    return found


def _section(title: str) -> str:
    """The text of the guide's `## title` section."""
    start = TEXT.index(f"\n## {title}\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start : end if end >= 0 else None]


def _section_blocks(title: str) -> list[str]:
    section = _section(title)
    return [block for block in _blocks("sh") if block in section]


def test_the_install_commands_are_what_deploy_prints_for_srv(settings: Settings) -> None:
    project = settings.model_copy(update={"root": ROOT})
    target = Target((EXECUTABLE,), "newsletter")
    config = ROOT / "newsletter.toml"
    files = [f for f in systemd_files(project, config, target) if not f.private]
    printed = install_commands(
        files, ROOT / "deploy", target, project, config, me="root", sudo=False
    )
    # The guide made the user in step 1; this machine has none, so deploy adds its useradd.
    printed = [line for line in printed if not line.startswith("useradd ")]
    (install,) = _section_blocks("4. Install them: the commands deploy printed")
    (doctor,) = _section_blocks("5. Check it")
    assert install.splitlines() == printed[:-1]
    assert doctor.splitlines() == printed[-1:]
    assert "useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin newsletter" in TEXT


def test_no_hand_written_unit_or_file_deploy_does_not_write() -> None:
    for stale in ("/etc/newsletter/secret.env", "deploy/*", "deploy/Caddyfile", "[Service]"):
        assert stale not in TEXT, stale
    assert "cp deploy/" not in TEXT  # the commands name each file written, absolutely


def _nginx() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        reason = "nginx is not installed (Debian: .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _parse(text: str) -> list[tuple[list[str], list[object]]]:
    """nginx's syntax: directives (words up to `;`) and blocks (words, then `{ ... }`), each as
    (words, children); `#` starts a comment. Enough for the guide's configuration."""
    tokens = iter(_tokens(text))

    def block() -> list[tuple[list[str], list[object]]]:
        items: list[tuple[list[str], list[object]]] = []
        words: list[str] = []
        for token in tokens:
            if token == ";":
                items.append((words, []))
                words = []
            elif token == "{":
                items.append((words, list(block())))
                words = []
            elif token == "}":
                return items
            else:
                words.append(token)
        assert not words, words
        return items

    return block()


def _tokens(text: str) -> Iterator[str]:
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        for special in "{};":
            line = line.replace(special, f" {special} ")
        yield from line.split()


def _size(value: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if value[-1].lower() in units:
        return int(value[:-1]) * units[value[-1].lower()]
    return int(value)


def test_the_nginx_configuration_passes_nginx_t_with_serves_webhook_limit(tmp_path: Path) -> None:
    (config,) = _blocks("nginx")
    ((_, server),) = [(w, c) for w, c in _parse(config) if w == ["server"]]
    directives = {tuple(w[:1]): w[1:] for w, c in server if not c}
    general = _size(directives[("client_max_body_size",)][0])
    assert general >= MAX_BODY  # a reader's one-click or signup body gets through
    locations = {tuple(w[1:]): c for w, c in server if w[:1] == ["location"]}
    hooks = locations[(WEBHOOK_PREFIX,)]
    limits = [w[1] for w, _ in hooks if w[:1] == ["client_max_body_size"]]
    assert [_size(limit) for limit in limits] == [WEBHOOK_MAX_BODY]
    assert general < WEBHOOK_MAX_BODY  # the old trap: one 16k for every location

    ca = trustme.CA()
    cert = ca.issue_cert("news.example.org")
    chain, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    cert.cert_chain_pems[0].write_to_path(str(chain))
    cert.private_key_pem.write_to_path(str(key))
    live = "/etc/letsencrypt/live/news.example.org/"
    site = tmp_path / "newsletter.conf"
    site.write_text(
        config.replace(live + "fullchain.pem", str(chain)).replace(live + "privkey.pem", str(key)),
        encoding="utf-8",
    )
    main = tmp_path / "nginx.conf"
    main.write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n    include {site};\n}}\n",
        encoding="utf-8",
    )
    checked = subprocess.run(
        [_nginx(), "-t", "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(main)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert "test is successful" in checked.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _nginx_in_front(folder: Path, upstream: str) -> Iterator[tuple[str, Path]]:
    """The guide's nginx, listening on a free loopback port with a throwaway certificate, its
    proxy_pass lines aimed at `upstream`; yields its https base and the CA file to trust."""
    (config,) = _blocks("nginx")
    folder.mkdir()
    ca = trustme.CA()
    cert = ca.issue_cert("news.example.org", "127.0.0.1")  # the client dials the address
    chain, key, authority = folder / "fullchain.pem", folder / "privkey.pem", folder / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(chain))
    cert.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(authority))
    live = "/etc/letsencrypt/live/news.example.org/"
    port = _free_port()
    site = folder / "newsletter.conf"
    site.write_text(
        config.replace(live + "fullchain.pem", str(chain))
        .replace(live + "privkey.pem", str(key))
        .replace("listen 443 ssl", f"listen 127.0.0.1:{port} ssl")
        .replace("http://127.0.0.1:8025", upstream),
        encoding="utf-8",
    )
    main = folder / "nginx.conf"
    # One process, no privilege drop: the test's folders are its user's only.
    main.write_text(
        f"daemon off;\nmaster_process off;\npid {folder}/nginx.pid;\n"
        f"error_log {folder}/error.log;\nevents {{}}\nhttp {{\n    include {site};\n}}\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [_nginx(), "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(main)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # a hang guard, not a measure
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "nginx did not listen"
            time.sleep(0.02)
        yield f"https://127.0.0.1:{port}", authority
    finally:
        process.terminate()
        process.wait(timeout=15)


def _trusting(authority: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(authority))


def test_a_webhook_batch_over_16_kib_goes_through_the_guides_nginx(
    project: Path, tmp_path: Path
) -> None:
    """A provider's 20 KiB batch reaches serve through nginx (the old single 16k limit answered
    413 itself); a reader's path still refuses it at the door, and a webhook over 1 MiB too."""
    _nginx()
    batch = json.dumps([{"event": "bounce", "email": f"r{n}@example.org"} for n in range(600)])
    assert 16 * 1024 < len(batch) < WEBHOOK_MAX_BODY
    with (
        running_service(
            project, NEWSLETTER_NEWSLETTER__BASE_URL="https://news.example.org"
        ) as site,
        _nginx_in_front(tmp_path / "nginx", site.url) as (base, authority),
        httpx.Client(base_url=base, verify=_trusting(authority), timeout=30) as client,
    ):
        headers = {"Host": "news.example.org", "Content-Type": "application/json"}
        posted = client.post("/webhooks/sendgrid", content=batch, headers=headers)
        assert posted.status_code != 413, posted.text
        assert site.wait_for_log('"/webhooks/sendgrid"')
        served = [r for r in site.access() if r.get("path") == "/webhooks/sendgrid"]
        assert [r["status"] for r in served] == [posted.status_code]
        reader = client.post("/unsubscribe/x", content=batch, headers=headers)
        assert reader.status_code == 413
        too_big = client.post("/webhooks/sendgrid", content=b"x" * (WEBHOOK_MAX_BODY + 1))
        assert too_big.status_code == 413
