"""The preview's slow checks (online checks, SpamAssassin): one run per rendered issue and kind,
in the background.

A page asks for the result for the issue it shows. The first ask starts a run and waits up to
`wait` seconds for it (online checks with a warm cache are done in a few milliseconds, so a save
shows their results at once); if it is still running, the page shows that, and `done` is called
when it finishes so the open pages fetch themselves again. A new render (a save) starts a new
run and cancels the old one; online results stay in the preflight cache, so only what changed
goes to the network. A run ends by `[check] run_timeout` at the latest (run.py), so a link server
that answers a byte at a time cannot hold the tab at "Checking…".
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from newsletter.config.settings import Settings
from newsletter.context import CommandContext
from newsletter.errors import NewsletterError
from newsletter.models import Issue
from newsletter.preflight.run import OnlineReport, list_size, run_online

WAIT = 0.25  # seconds a page waits for an online run before it shows "running"
T = TypeVar("T")


class _Run(Generic[T]):
    def __init__(self, key: object, task: asyncio.Task[T]) -> None:
        self.key = key
        self.task = task
        self.awaited = False  # a page was shown without the result: announce it when done


class BackgroundRuns(Generic[T]):
    """One kind of slow check, run per issue for its latest render."""

    def __init__(self, done: Callable[[], None], wait: float = WAIT) -> None:
        self._done = done
        self._wait = wait
        self._runs: dict[int, _Run[T]] = {}

    async def result(
        self, key: object, number: int, start: Callable[[], Coroutine[Any, Any, T]]
    ) -> T | None:
        """The result for this render of issue `number` (`key` names the render; `start`
        makes the run), or None while the run goes on."""
        run = self._runs.get(number)
        if run is None or run.key is not key:
            if run is not None:
                run.task.cancel()
            task = asyncio.get_running_loop().create_task(start())
            run = self._runs[number] = _Run(key, task)
            task.add_done_callback(functools.partial(self._finished, run))
        if not run.task.done() and self._wait > 0:
            await asyncio.wait({run.task}, timeout=self._wait)
        if not run.task.done():
            run.awaited = True
            return None
        return run.task.result()

    def _finished(self, run: _Run[T], _: object) -> None:
        if run.awaited and not run.task.cancelled():
            self._done()


class BackgroundChecks(BackgroundRuns[OnlineReport]):
    """`[check] online` in the preview."""

    async def report(
        self, key: object, settings: Settings, issue: Issue, message: bytes, list_name: str
    ) -> OnlineReport | None:
        """The report for this render of `issue`, or None while the run goes on."""
        return await self.result(
            key, issue.number, lambda: _guarded(settings, issue, message, list_name)
        )


async def _guarded(
    settings: Settings, issue: Issue, message: bytes, list_name: str
) -> OnlineReport:
    try:
        with CommandContext(settings) as context:  # the preview's run: a command of its own
            size = list_size(settings, list_name, context.existing_database())
        return await run_online(settings, issue, message, size)
    except NewsletterError as exc:
        return OnlineReport(skipped=exc.message)  # a broken [dkim] key or list, say
