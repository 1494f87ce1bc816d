"""A project's welcome sequence written as files, readers enrolled in it, and the settings a
sequence duty runs with (an SMTP server on loopback, an outbox, a secret, no quiet hours)."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from newsletter.config.settings import Settings, load_settings
from newsletter.database import Database
from newsletter.importers.subscribers import fold_address

SECRET = "sequence-tests-secret-0123456789abcdef"


def write_step(
    root: Path, sequence: str, name: str, *, after: str, title: str, lists: str = "", body: str = ""
) -> Path:
    """sequences/SEQUENCE/NAME.md with its front matter; `lists` only on a first step."""
    folder = root / "sequences" / sequence
    folder.mkdir(parents=True, exist_ok=True)
    front = [f"title: {title}", f"after: {after}", *([f"lists: [{lists}]"] if lists else [])]
    text = "\n".join(["---", *front, "---", body or f"The words of {title}.", ""])
    path = folder / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def welcome(root: Path, *, second: str = "2s") -> None:
    """sequences/welcome: 01-hello at once for new readers of main, 02-tips `second` later."""
    write_step(root, "welcome", "01-hello", after="0s", title="Hello", lists="main")
    write_step(root, "welcome", "02-tips", after=second, title="Tips")


def duty_settings(
    project: Path, host: str, port: int, target: Path | str, **schedule: object
) -> Settings:
    settings = load_settings(project / "newsletter.toml", environ={})
    smtp = settings.smtp.model_copy(update={"host": host, "port": port})
    url = target if isinstance(target, str) else f"sqlite:///{target}"
    database = settings.outbox.model_copy(update={"url": url})
    chosen = settings.schedule.model_copy(update={"quiet_hours": "", **schedule})
    worker = settings.worker.model_copy(update={"lease": 5.0})
    # Retries as soon as the engine's tests take them (support.sendcli.environment): a relay
    # that is down is given up on after its tries, not after a minute of real backoff.
    send = settings.send.model_copy(update={"retry_base": 0.01, "retry_cap": 0.05})
    return settings.model_copy(
        update={
            "send": send,
            "smtp": smtp,
            "outbox": database,
            "schedule": chosen,
            "worker": worker,
            "secret": SecretStr(SECRET),
        }
    )


def confirmed(database: Database, address: str, list_name: str = "main") -> str:
    """A confirmed reader of the list (as the editor adds one); their address key."""
    key = fold_address(address)
    database.roster.add(list_name, address, key, key, "", "cli")
    return key
