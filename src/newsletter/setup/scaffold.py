"""A folder and the editor's choices in; a newsletter project of their own out (`newsletter
init`), one that previews, checks and test-sends to the capture server with no other step.

The project: newsletter.toml (every choice commented), issues/1.md in the newsletter's language,
an empty main list, a staging list whose one reader is the editor, .gitignore (state, secret and
readers out of git), a README for its editors, the GitHub workflow that checks the issues a
pull request changes (.github/workflows/newsletter.yml), and the project's secret in
.newsletter/secret (0600 in a 0700 folder, whatever the umask), read when NEWSLETTER_SECRET is
not set (see configfile.py). The files are package data (project_templates/), filled with
string.Template (the workflow, shell script inside, by two markers of its own):
every value that lands in TOML or YAML goes in as a quoted string, so no choice can add a key.
Each choice is checked as the config will read it (`check_choices`, which interactive `init`
runs on every answer as it is typed); nothing is written until every choice is valid, and
nothing that exists is overwritten: a folder holding any of the project's own files is refused;
a README.md found there (a fresh clone's) is kept, and a .gitignore found there gets the lines
it lacks, so the secret stays out of git.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import string
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from newsletter.config.configfile import CONFIG_NAME, SECRET_FILE
from newsletter.config.settings import Settings
from newsletter.distribution import requirement
from newsletter.errors import ConfigError, ProjectExistsError, display_path
from newsletter.i18n import primary
from newsletter.state.statefiles import FILE, private_folder

TEMPLATES = Path(__file__).resolve().parent / "project_templates"
# The hosts where `newsletter mailbox`, the capture server, listens: no mail leaves the machine.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
ISSUE = Path("issues") / "1.md"
# The project's files, in the order they are listed: template name -> where it goes.
FILES = {
    "newsletter.toml": Path(CONFIG_NAME),
    "issue": ISSUE,
    "subscribers.csv": Path("subscribers.csv"),
    "staging.csv": Path("staging.csv"),
    "gitignore": Path(".gitignore"),
    "README.md": Path("README.md"),
}
# The GitHub workflow that checks the issues a pull request changes (`init`, or `init --ci github`).
WORKFLOW = Path(".github") / "workflows" / "newsletter.yml"
GITIGNORE = Path(".gitignore")
# What a folder may hold already (a new repository's): kept, or for .gitignore completed.
SHARED = (Path("README.md"), GITIGNORE)
# The words a project starts with, by language (English for one not here).
_WORDS = {
    "en": {"greeting": "friend", "sample": "Sample Reader", "staging": "test", "editor": "Editor"},
    "zh": {"greeting": "朋友", "sample": "示例读者", "staging": "测试", "editor": "编辑"},
}
# The flag each choice has, for errors: the editor fixes the flag (or the answer).
_FLAGS = {
    "name": "--name",
    "language": "--language",
    "sender": "--sender",
    "base_url": "--base-url",
    "host": "--smtp-host",
}


@dataclass(frozen=True)
class Choices:
    """What `init` asks. `sender` is an address (the editor's: the staging list's reader) or a
    whole mailbox, `Name <address>`."""

    name: str = "My Newsletter"
    language: str = "en"
    sender: str = "editor@example.org"
    base_url: str = "http://127.0.0.1:8025"
    smtp_host: str = "127.0.0.1"


@dataclass(frozen=True)
class CreatedProject:
    root: Path
    files: tuple[Path, ...]  # every file written (or completed), the secret's last
    kept: tuple[Path, ...]  # files found there and left as they were
    secret_file: Path
    issue: Path
    local_smtp: bool  # test sends go to the capture server


def create_project(
    folder: Path, choices: Choices, today: dt.date, *, workflow: bool = True
) -> CreatedProject:
    """Write the project into `folder` (made if missing), with the GitHub workflow unless
    `workflow` is False. ConfigError naming the flag if a choice is unusable,
    ProjectExistsError if any of its files exists; then nothing is written."""
    check_choices(choices, folder, today)
    texts = project_files(choices, today, workflow=workflow)
    taken = [
        folder / path
        for path in (*texts, SECRET_FILE)
        if path not in SHARED and (folder / path).exists()
    ]
    if taken:
        raise ProjectExistsError(
            f"{_folder_name(folder)}: already holds a project"
            f" ({', '.join(display_path(p) for p in taken)}): nothing was written",
            hint="Run `newsletter init` with a new folder's name (newsletter init mynews), or"
            " work in this project as it is.",
        )
    written, kept = [], []
    for path, text in texts.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path == GITIGNORE and target.exists():
            if _complete_gitignore(target, text):
                written.append(target)
            else:
                kept.append(target)
        elif target.exists():  # a README.md of the editor's own
            kept.append(target)
        else:
            with open(target, "x", encoding="utf-8") as handle:
                handle.write(text)
            written.append(target)
    secret_file = _write_secret(folder / SECRET_FILE)
    return CreatedProject(
        root=folder,
        files=(*written, secret_file),
        kept=tuple(kept),
        secret_file=secret_file,
        issue=folder / ISSUE,
        local_smtp=_is_local(choices.smtp_host),
    )


def check_choices(choices: Choices, folder: Path, today: dt.date) -> None:
    """ConfigError naming the flag of the first unusable choice; `init` asks again for an
    answer this refuses, one question at a time (the others are the valid defaults)."""
    _refuse_control_characters(choices)
    _validate(choices, project_files(choices, today, workflow=False)[Path(CONFIG_NAME)], folder)


def project_files(choices: Choices, today: dt.date, *, workflow: bool = True) -> dict[Path, str]:
    """Each file's path (under the project) and text, the workflow's if asked; the secret is
    not among them."""
    language = primary(choices.language) if choices.language else "en"
    words = _WORDS.get(language, _WORDS["en"])
    address, sender = _sender(choices)
    local = _is_local(choices.smtp_host)
    domain = address.rpartition("@")[2] or "example.org"
    chinese = language == "zh"
    values = {
        "name": choices.name,
        "name_markdown": _markdown_text(choices.name),
        "name_toml": _quoted(choices.name),
        "language_toml": _quoted(choices.language),
        "sender_toml": _quoted(sender),
        "base_url_toml": _quoted(choices.base_url),
        "greeting_toml": _quoted(words["greeting"]),
        "sample_name_toml": _quoted(words["sample"]),
        "main_id_toml": _quoted(f"main.{domain}"),
        "staging_name_toml": _quoted(f"{choices.name} ({words['staging']})"),
        "staging_id_toml": _quoted(f"staging.{domain}"),
        "smtp_host_toml": _quoted(choices.smtp_host),
        "smtp_port": "1025" if local else "587",
        "smtp_security_toml": _quoted("none" if local else "starttls"),
        "smtp_comment": (
            "The capture server, `newsletter\n# mailbox`, listens there: test sends land in"
            " .newsletter/mailbox/ and nothing leaves\n# this machine. Set your mail server"
            " here before the first real send."
            if local
            else "Port 587 with STARTTLS, the submission\n# port most providers offer."
        ),
        "date": today.isoformat(),
        "workflow_note": (
            f"- `{WORKFLOW.as_posix()}`: GitHub checks the issues each pull request changes\n"
            "  and shows the findings on their lines.\n"
            if workflow
            else ""
        ),
        "title_yaml": _quoted(f"{choices.name}第1期" if chinese else f"{choices.name} 1"),
        "preheader_yaml": _quoted(
            f"{choices.name}的第一期。" if chinese else f"The first issue of {choices.name}."
        ),
    }
    issue = "issue.zh.md" if chinese else "issue.en.md"
    texts = {
        path: _fill(issue if name == "issue" else name, values)
        for name, path in FILES.items()
        if not name.endswith(".csv")
    }
    texts[Path("subscribers.csv")] = "email,name\n"
    texts[Path("staging.csv")] = f"email,name\n{_csv_cell(address)},{words['editor']}\n"
    if workflow:
        texts[WORKFLOW] = workflow_text("issues")
    return {path: texts[path] for path in [*FILES.values(), *texts.keys() - FILES.values()]}


def add_workflow(root: Path, issues: str) -> Path:
    """Write the GitHub workflow into the project at `root`, whose issue files are in `issues`
    (a folder relative to the root); ProjectExistsError if the project has one."""
    target = root / WORKFLOW
    if target.exists():
        raise ProjectExistsError(
            f"{display_path(target)} exists: nothing was written",
            hint="Edit it, or delete it and run `newsletter init --ci github` again.",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "x", encoding="utf-8") as handle:
        handle.write(workflow_text(issues))
    return target


def workflow_text(issues: str) -> str:
    """The workflow (project_templates/workflow.yml) for issue files in `issues`: it installs
    the version of newsletter that writes it, by its distribution's name, so CI checks as the
    editor's `check` does, with the shots extra for `diff --html`."""
    text = (TEMPLATES / "workflow.yml").read_text(encoding="utf-8")
    return text.replace("@requirement@", requirement("shots")).replace("@issues@", _quoted(issues))


def _fill(template: str, values: dict[str, str]) -> str:
    return string.Template((TEMPLATES / template).read_text(encoding="utf-8")).substitute(values)


def _quoted(value: str) -> str:
    """`value` as a TOML basic string, which is also a YAML double-quoted one: JSON's escapes
    (\\", \\\\, \\n, \\uXXXX) are the same in all three, so a quote or a newline in a choice
    stays in its value."""
    return json.dumps(value, ensure_ascii=False)


def _markdown_text(value: str) -> str:
    """`value` as Markdown that shows it as written: every ASCII punctuation mark escaped, so a
    name with `*`, `<` or `[` is neither emphasis, inline HTML nor a link."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", value)


def _csv_cell(value: str) -> str:
    return f'"{value.replace(chr(34), chr(34) * 2)}"' if re.search(r'[",\r\n]', value) else value


def _sender(choices: Choices) -> tuple[str, str]:
    """(the editor's address, the sender's mailbox): `Name <address>` kept as given, an
    address alone given the newsletter's name (quoted when it holds a special character)."""
    match = re.fullmatch(r"\s*(.*?)\s*<([^<>]*)>\s*", choices.sender)
    if match:
        return match.group(2).strip(), choices.sender.strip()
    address = choices.sender.strip()
    name = choices.name.replace("\\", "\\\\").replace('"', '\\"')
    quote = re.search(r'[()<>\[\]:;@\\,."]', choices.name) is not None
    return address, f'"{name}" <{address}>' if quote else f"{name} <{address}>"


def _is_local(host: str) -> bool:
    return host.strip().lower() in LOCAL_HOSTS


def _refuse_control_characters(choices: Choices) -> None:
    """Each answer is one line of text: a newline in the name would end the comment it is
    quoted in and the Markdown heading it opens (and has no place in a From: header)."""
    for field, flag in _FLAGS.items():
        value = getattr(choices, "smtp_host" if field == "host" else field)
        if any(unicodedata.category(c) == "Cc" for c in value):
            raise ConfigError(
                f"{flag}: {value!r} holds a line break or another control character",
                hint="Give it as one line of text.",
            )


def _validate(choices: Choices, config: str, folder: Path) -> None:
    """The config as `load_settings` will read it: a choice it refuses is named by its flag."""
    try:
        Settings.model_validate({**tomllib.loads(config), "root": folder.resolve()})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = str(err["loc"][-1])
            flag = _FLAGS.get(field, field)
            lines.append(f"{flag}: {str(err['msg']).removeprefix('Value error, ')}")
        raise ConfigError("\n".join(lines), hint="Answer again, or pass a valid value.") from None
    except tomllib.TOMLDecodeError as exc:  # a choice with a character TOML refuses
        raise ConfigError(f"a choice cannot be written to {CONFIG_NAME}: {exc}") from None
    address = _sender(choices)[0]
    # The staging list's reader and the sender's address: a bare name here would make a
    # project whose first test send has no one to go to.
    if not re.fullmatch(r"[^@\s<>,]+@[^@\s<>,]+", address):
        raise ConfigError(
            f"--sender: {address!r} is not an email address",
            hint="Give the address the issues come from, e.g. editor@news.example.org.",
        )


def _folder_name(folder: Path) -> str:
    shown = display_path(folder)
    return "this folder" if shown == "." else shown


def _complete_gitignore(path: Path, ours: str) -> bool:
    """Append to the .gitignore at `path` the rules of `ours` it lacks (with their comments);
    False if it had them all."""
    found = path.read_text(encoding="utf-8")
    have = {line.strip() for line in found.splitlines()}
    block: list[str] = []
    missing: list[str] = []
    for line in ours.splitlines():
        block.append(line)
        if line and not line.startswith("#"):
            if line not in have:
                missing += block
            block = []
    if not missing:
        return False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(
            ("" if found.endswith("\n") or not found else "\n") + "\n".join(missing) + "\n"
        )
    return True


def _write_secret(path: Path) -> Path:
    """A new secret (secrets.token_urlsafe(32)) in `path`, made 0600 in a 0700 folder at
    creation (the umask can only take bits away); never shown."""
    private_folder(path.parent)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(secrets.token_urlsafe(32) + "\n")
    return path
