"""What a preflight check found, before the list size decides how bad it is.

A Fault is `error`, `warning`, or `auth`: missing or broken sender authentication, which since
2024 (Gmail, Yahoo) and May 2025 (Outlook.com, `550 5.7.515`) gets bulk mail rejected. `auth`
becomes an error for a list above the bulk-sender line and a warning below it (see report.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "auth"]


@dataclass(frozen=True)
class Fault:
    code: str
    message: str
    severity: Severity = "error"
