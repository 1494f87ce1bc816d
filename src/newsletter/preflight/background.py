"""The preview's online checks: one run per rendered issue, in the background.

A page asks for the report of the issue it shows. The first ask starts a run and waits a moment
for it (with a warm cache it is done in a few milliseconds, so a save shows its results at
once); if it is still running, the page shows that, and `done` is called when it finishes so the
open pages fetch themselves again. A new render (a save) starts a new run; results stay in the
preflight cache, so only what changed goes to the network.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from newsletter.errors import NewsletterError
from newsletter.models import Issue
from newsletter.preflight.run import OnlineReport, list_size, run_online
from newsletter.settings import Settings

WAIT = 0.25  # seconds a page waits for a run before it shows "running"


class _Run:
    def __init__(self, key: object, task: asyncio.Task[OnlineReport]) -> None:
        self.key = key
        self.task = task
        self.awaited = False  # a page was shown without the result: announce it when done


class BackgroundChecks:
    def __init__(self, done: Callable[[], None]) -> None:
        self._done = done
        self._runs: dict[int, _Run] = {}

    async def report(
        self, key: object, settings: Settings, issue: Issue, message: bytes, list_name: str
    ) -> OnlineReport | None:
        """The report for this render of `issue` (`key` names the render), or None while the
        run goes on."""
        run = self._runs.get(issue.number)
        if run is None or run.key is not key:
            if run is not None:
                run.task.cancel()
            task = asyncio.get_running_loop().create_task(
                _guarded(settings, issue, message, list_name)
            )
            run = self._runs[issue.number] = _Run(key, task)
            task.add_done_callback(functools.partial(self._finished, run))
        if not run.task.done():
            await asyncio.wait({run.task}, timeout=WAIT)
        if not run.task.done():
            run.awaited = True
            return None
        return run.task.result()

    def _finished(self, run: _Run, _: object) -> None:
        if run.awaited and not run.task.cancelled():
            self._done()


async def _guarded(
    settings: Settings, issue: Issue, message: bytes, list_name: str
) -> OnlineReport:
    try:
        return await run_online(settings, issue, message, list_size(settings, list_name))
    except NewsletterError as exc:
        return OnlineReport(skipped=exc.message)  # a broken [dkim] key or list, say
