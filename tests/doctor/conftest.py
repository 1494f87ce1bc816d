"""The doctor's servers shared by a session: one Dovecot (support.dovecot's fixture)."""

from __future__ import annotations

from support.dovecot import dovecot  # noqa: F401
