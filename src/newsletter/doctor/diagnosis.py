"""What one check of `newsletter doctor` found: its name, whether it passed, what it saw, and
(when it did not pass) the one thing to do about it."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Diagnosis:
    name: str  # "secret", "base_url", "serve", "smtp", "spf", ..., "disk"
    ok: bool
    detail: str  # what was found, passed or not; never a secret's value
    fix: str = ""  # empty when ok

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def passed(name: str, detail: str) -> Diagnosis:
    return Diagnosis(name, True, detail)


def failed(name: str, detail: str, fix: str) -> Diagnosis:
    return Diagnosis(name, False, detail, fix)
