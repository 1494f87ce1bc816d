"""`newsletter init` as a newcomer runs it (issue 32, points 2 and 3): a project of their own,
whose preview, check and test send to the capture server work with no other step, signed with
the secret init kept in .newsletter/secret (0600, ignored by git, never shown), which
NEWSLETTER_SECRET still overrides; an existing project or a bad answer is one clear error and
nothing written."""

from __future__ import annotations

import contextlib
import email
import email.policy
import email.utils
import mailbox
import os
import pty
import re
import select
import shutil
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from newsletter.cli.main import cli
from newsletter.config.settings import load_settings
from newsletter.errors import TokenError
from newsletter.issues import load_issue_file
from newsletter.mail.tokens import verify
from support.capture import capture_server
from support.preview import running_preview

SECRET = Path(".newsletter") / "secret"
ENV_SECRET = "from-the-environment-0123456789"


def clean_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEWSLETTER_")}
    env.update(extra)
    return env


def newsletter(
    *args: str, cwd: Path, umask: int | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """`newsletter ARGS` as a subprocess in `cwd`, with no NEWSLETTER_* but `extra`."""
    command = [sys.executable, "-m", "newsletter", *args]
    if umask is not None:  # the shell sets it, so this test process keeps its own
        command = ["sh", "-c", f'umask {umask:03o}; exec "$@"', "sh", *command]
    return subprocess.run(
        command,
        cwd=cwd,
        env=clean_environment(**extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def signed_with(token: str, *secrets: str) -> str:
    """Which of `secrets` the unsubscribe token verifies with, for the test reader."""
    for secret in secrets:
        with contextlib.suppress(TokenError):
            assert verify(secret, token) == ("staging", "editor@example.org")
            return secret
    raise AssertionError("the token verifies with none of the secrets")


def unsubscribe_token(message: email.message.Message) -> str:
    header = str(message["List-Unsubscribe"])
    found = re.search(r"<https?://[^>]*/unsubscribe/([^>]+)>", header)
    assert found, header
    return found.group(1)


@pytest.mark.slow
def test_init_yes_previews_checks_and_test_sends_with_no_other_step(tmp_path: Path) -> None:
    done = newsletter("init", "mynews", "--yes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "mynews"
    secret = (project / SECRET).read_text(encoding="utf-8").strip()
    assert len(secret) >= 40
    assert secret not in done.stdout + done.stderr  # never shown
    assert "newsletter send --issue 1 --list staging" in done.stdout
    assert "back it up" in done.stdout
    assert "every unsubscribe and click link already sent stops working" in done.stdout
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = load_settings(project / "newsletter.toml", environ={})
    assert settings.newsletter.name == "My Newsletter"
    assert settings.secret is not None
    assert settings.secret.get_secret_value() == secret
    assert load_issue_file(project / "issues" / "1.md").title == "My Newsletter 1"

    checked = newsletter("check", "--issue", "1", cwd=project)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[-1] == "issue 1: 0 error(s), 0 warning(s)"

    with running_preview(project) as preview:
        page = httpx.get(f"{preview.url}/issues/1/text.txt", timeout=30)
    assert page.status_code == 200
    assert "Welcome to the first issue of My Newsletter." in page.text

    # The test send: no NEWSLETTER_SECRET, no other step; the capture server on port 0 stands
    # in for `newsletter mailbox` on 1025.
    with capture_server(project) as port:
        sent = newsletter(
            "send", "--issue", "1", "--list", "staging", cwd=project,
            NEWSLETTER_SMTP__PORT=str(port),
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        assert "1 sent" in sent.stdout + sent.stderr
        # The environment still wins over the file.
        again = newsletter(
            "send", "--issue", "1", "--list", "staging", "--again", cwd=project,
            NEWSLETTER_SMTP__PORT=str(port), NEWSLETTER_SECRET=ENV_SECRET,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
    assert secret not in sent.stdout + sent.stderr + again.stdout + again.stderr
    captured = mailbox.Maildir(project / ".newsletter" / "mailbox", create=False)
    messages = [
        email.message_from_bytes(captured.get_bytes(key), policy=email.policy.default)
        for key in captured.keys()  # noqa: SIM118 (a Maildir iterates messages, not keys)
    ]
    assert [str(m["Delivered-To"]) for m in messages] == ["editor@example.org"] * 2
    tokens = [unsubscribe_token(m) for m in messages]
    # One message signed with the file's secret (the first send), one with the environment's.
    assert sorted(signed_with(t, secret, ENV_SECRET) for t in tokens) == sorted(
        [ENV_SECRET, secret]
    )


@pytest.mark.slow
def test_init_keeps_the_secret_private_and_out_of_git_whatever_the_umask(tmp_path: Path) -> None:
    done = newsletter("init", "open", "--yes", cwd=tmp_path, umask=0)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "open"
    assert stat.S_IMODE((project / ".newsletter").stat().st_mode) == 0o700
    assert stat.S_IMODE((project / SECRET).stat().st_mode) == 0o600
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    ignored = subprocess.run(
        ["git", "check-ignore", str(SECRET), ".newsletter/outbox.sqlite3", "subscribers.csv"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ignored.stdout.split() == [str(SECRET), ".newsletter/outbox.sqlite3", "subscribers.csv"]
    kept = subprocess.run(
        ["git", "check-ignore", "newsletter.toml", "issues/1.md", "staging.csv", "README.md"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert kept.stdout == ""  # the project itself goes into git


@pytest.mark.slow
def test_init_asks_each_choice_and_writes_a_chinese_first_issue(tmp_path: Path) -> None:
    answers = "科技周刊\nzh-CN\n编辑 <ed@news.example.org>\nhttps://news.example.org\n127.0.0.1\n"
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "zh")], input=answers)
    assert result.exit_code == 0, result.output
    assert "Newsletter name [My Newsletter]:" in result.output
    project = tmp_path / "zh"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = load_settings(project / "newsletter.toml", environ={})
    assert settings.newsletter.language == "zh-CN"
    assert settings.newsletter.sender == "编辑 <ed@news.example.org>"
    assert settings.newsletter.base_url == "https://news.example.org"
    assert (project / "staging.csv").read_text(encoding="utf-8") == (
        "email,name\ned@news.example.org,编辑\n"
    )
    issue = load_issue_file(project / "issues" / "1.md")
    assert issue.title == "科技周刊第1期"
    assert [str(s.title) for s in issue.sections] == ["值得一读", "工具"]
    # Every choice is in the file with a comment above it.
    text = (project / "newsletter.toml").read_text(encoding="utf-8").splitlines()
    for key in ("name", "language", "sender", "base_url", "host"):
        line = next(i for i, t in enumerate(text) if t.startswith(f"{key} = "))
        assert text[line - 1].startswith("#"), key
    checked = newsletter("check", "--issue", "1", cwd=project)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_init_refuses_to_write_over_a_project(tmp_path: Path) -> None:
    assert newsletter("init", "mynews", "--yes", cwd=tmp_path).returncode == 0
    project = tmp_path / "mynews"
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    (project / "issues" / "1.md").write_text("edited", encoding="utf-8")
    before[project / "issues" / "1.md"] = b"edited"
    done = newsletter("init", "mynews", "--yes", "--name", "Other", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: mynews: already holds a project (mynews/newsletter.toml,")
    assert "hint: Run `newsletter init` with a new folder's name" in done.stderr
    assert "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_init_in_a_new_repository_keeps_its_readme_and_completes_its_gitignore(
    tmp_path: Path,
) -> None:
    """A fresh clone holds a README and a .gitignore: they are no project, and the secret must
    still stay out of git."""
    project = tmp_path / "clone"
    project.mkdir()
    (project / "README.md").write_text("# Our letter\n", encoding="utf-8")
    (project / ".gitignore").write_text("*.pyc", encoding="utf-8")
    done = newsletter("init", "--yes", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "  README.md (kept as it was)\n" in done.stdout
    assert "  .gitignore\n" in done.stdout
    assert (project / "README.md").read_text(encoding="utf-8") == "# Our letter\n"
    ignore = (project / ".gitignore").read_text(encoding="utf-8")
    assert ignore.startswith("*.pyc\n# The state:")
    assert "\n/.newsletter/\n" in ignore
    assert "\n/subscribers.csv\n" in ignore
    assert (project / SECRET).exists()
    # Run again, it is a project: refused, and the .gitignore is not grown twice.
    again = newsletter("init", "--yes", cwd=project)
    assert again.returncode == 1
    assert again.stderr.startswith("error: this folder: already holds a project (newsletter.toml,")
    assert (project / ".gitignore").read_text(encoding="utf-8") == ignore


@pytest.mark.slow
def test_a_name_with_quotes_and_markup_stays_its_text_in_every_file(tmp_path: Path) -> None:
    """Each choice goes into TOML and YAML as a quoted string and into Markdown escaped: it can
    add no key, no link and no HTML, and the first issue still passes `check`."""
    name = 'Crab <Post> *weekly* "#1", [a](b) \\ $HOME = x'
    done = newsletter("init", "mynews", "--yes", "--name", name, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "mynews"
    settings = load_settings(project / "newsletter.toml", environ={})
    assert settings.newsletter.name == name
    assert email.utils.parseaddr(settings.newsletter.sender) == (name, "editor@example.org")
    assert load_issue_file(project / "issues" / "1.md").title == f"{name} 1"
    checked = newsletter("check", "--issue", "1", cwd=project)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[-1] == "issue 1: 0 error(s), 0 warning(s)"
    built = newsletter("build", "--issue", "1", "--out", "out", cwd=project)
    assert built.returncode == 0, built.stderr
    text = (project / "out" / "email.txt").read_text(encoding="utf-8")
    assert f"Welcome to the first issue of {name}." in " ".join(text.split(" "))


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--sender", "nobody", "error: --sender: 'nobody' is not an email address"),
        ("--language", "not a tag", "error: --language: 'not a tag' is not a language tag"),
        ("--base-url", "news.example.org", "error: --base-url: 'news.example.org' must be an"),
        ("--name", 'A\nsender = "x"', "error: --name: 'A\\nsender = \"x\"' holds a line break"),
    ],
)
@pytest.mark.slow
def test_a_bad_choice_names_its_option_and_writes_nothing(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    done = newsletter("init", "mynews", "--yes", option, value, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "mynews").exists()


@pytest.mark.slow
def test_a_too_short_secret_file_is_named_and_nothing_is_sent(tmp_path: Path) -> None:
    assert newsletter("init", "mynews", "--yes", cwd=tmp_path).returncode == 0
    project = tmp_path / "mynews"
    (project / SECRET).write_text("short\n", encoding="utf-8")
    done = newsletter("send", "--issue", "1", "--list", "staging", cwd=project)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "error: .newsletter/secret: the project's secret is too short (5 characters; at least 16)"
    )
    assert "short" not in done.stderr.split(")", 1)[1]
    assert not (project / ".newsletter" / "outbox.sqlite3").exists()


def test_a_remote_smtp_host_gets_the_submission_port_with_starttls(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["init", str(tmp_path / "p"), "--yes", "--smtp-host", "smtp.example.org"]
    )
    assert result.exit_code == 0, result.output
    settings = load_settings(tmp_path / "p" / "newsletter.toml", environ={})
    assert (settings.smtp.host, settings.smtp.port, settings.smtp.security) == (
        "smtp.example.org",
        587,
        "starttls",
    )
    assert "newsletter mailbox" not in result.output  # no capture server to start


class Terminal:
    """`newsletter ARGS` on a pseudo-terminal, as the editor's shell runs it: what it shows is
    read as it comes, and each answer typed once its question is on the screen."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        main, child = pty.openpty()
        self.main = main
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "newsletter", *args],
            stdin=child,
            stdout=child,
            stderr=child,
            cwd=cwd,
            env=clean_environment(),
            close_fds=True,
        )
        os.close(child)
        self.shown = ""
        self.seen = 0  # how much of `shown` the answers so far were typed after

    def answer(self, question: str, typed: str) -> str:
        """Wait for `question` after the last answer, type `typed`; what came before it."""
        while question not in self.shown[self.seen :]:
            ready, _, _ = select.select([self.main], [], [], 1)
            if ready:
                try:
                    chunk = os.read(self.main, 4096)
                except OSError:  # the program ended (EIO): the question never came
                    chunk = b""
                assert chunk, f"no {question!r} in {self.shown[self.seen :]!r}"
                self.shown += chunk.decode("utf-8", "replace")
                pending = self.shown[self.seen :]
                # Another question waits for its answer (click's prompts end "[default]: ").
                assert question in pending or not pending.endswith("]: "), pending
        before = self.shown[self.seen :]
        self.seen = len(self.shown)
        os.write(self.main, typed.encode() + b"\n")
        return before

    def finish(self) -> tuple[int, str]:
        """The exit code and all it showed after the last answer."""
        while True:
            try:
                chunk = os.read(self.main, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.shown += chunk.decode("utf-8", "replace")
        os.close(self.main)
        return self.proc.wait(60), self.shown[self.seen :]


@pytest.mark.slow
def test_a_bad_answer_is_said_at_once_and_only_its_question_asked_again(tmp_path: Path) -> None:
    # issue 41: the sender was checked after the last question, and every answer was lost.
    term = Terminal(["init", "mynews"], tmp_path)
    term.answer("Newsletter name [My Newsletter]:", "Crab Post")
    term.answer("Language (en, zh-CN, ...) [en]:", "")
    term.answer("Sender address (yours: the test list's reader) [editor@example.org]:", "nobody")
    shown = term.answer("Sender address (yours: the test list's reader)", "ed@news.example.org")
    assert "error: 'nobody' is not an email address" in shown
    assert "Site address" not in shown  # the same question, not the next one
    term.answer("Site address (where `newsletter serve` answers)", "news.example.org")
    shown = term.answer(
        "Site address (where `newsletter serve` answers)", "https://news.example.org"
    )
    assert "error: 'news.example.org' must be an http:// or https:// address" in shown
    term.answer("SMTP host (127.0.0.1: the capture server) [127.0.0.1]:", "")
    code, shown = term.finish()
    assert code == 0, shown
    assert "Newsletter name" not in shown  # nothing asked twice but the refused ones
    assert "Traceback" not in term.shown
    settings = load_settings(tmp_path / "mynews" / "newsletter.toml", environ={})
    assert settings.newsletter.name == "Crab Post"
    assert settings.newsletter.sender == "Crab Post <ed@news.example.org>"
    assert settings.newsletter.base_url == "https://news.example.org"
