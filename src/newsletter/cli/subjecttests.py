"""`send`'s subject-test options: --subjects A B, --sample and --decide-after, read into one
SubjectRequest the send passes to subjects/run.py (or None: no test asked for)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    pass

F = TypeVar("F", bound=Callable[..., Any])
_SHARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def subject_options(func: F) -> F:
    """The three options, read into `subjects: SubjectRequest | None` for `func`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        subjects, sample, after = (kwargs.pop(k) for k in ("subjects", "sample", "decide_after"))
        if not subjects:
            if sample is not None or after is not None:
                raise click.UsageError("--sample and --decide-after go with --subjects A B")
            return func(*args, subjects=None, **kwargs)
        if kwargs.get("dry_run"):
            raise click.UsageError("--subjects is for a send, not --dry-run")
        from newsletter.subjects.run import SubjectRequest  # the send's stack: when it runs

        request = SubjectRequest(tuple(subjects), _share(sample or "20%"), _after(after or "4h"))
        return func(*args, subjects=request, **kwargs)

    options = [
        click.option(
            "--subjects",
            nargs=2,
            default=None,
            metavar="A B",
            help="A subject test: each subject to an equal random share of --sample, then, after"
            " --decide-after, the one with more people's clicks per message (scanners excluded)"
            ' to the rest of the list. Needs [tracking] clicks = "per-reader".',
        ),
        click.option(
            "--sample", default=None, metavar="SHARE", help="The test's share of the list (20%)."
        ),
        click.option(
            "--decide-after",
            "decide_after",
            default=None,
            metavar="DURATION",
            help="How long the sample's clicks are counted before the rest go (4h).",
        ),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def _share(text: str) -> float:
    match = _SHARE.match(text)
    share = float(match.group(1)) / 100 if match else -1.0
    if not 0 < share <= 1:
        raise click.BadParameter(f"{text!r} is not a share such as 20%", param_hint="--sample")
    return share


def _after(text: str) -> float:
    from newsletter.config.settings import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--decide-after") from None
    assert isinstance(seconds, float)
    return seconds
