"""The list read beside the writer: a Job in, batches of Planned rows out, from a child process.

Reading and checking a CSV row costs about as much as writing its row into the outbox (~10 µs
each for a million rows on this project's 2-core machine), so planning reads in a forked child
while this process writes: the two overlap, and planning takes about the time of the slower one.
The child sends each batch (1,000 rows, then `size` once the list proves long; as tuples)
through a pipe, then the list's report (rows rejected, duplicates, ...), which is copied into the
Job's report here. A child that fails sends the error, which is raised here as it would have
been; one that dies ends planning with an error. The child keeps only its end of the pipe of
what it inherited and dies with this process (children.py): a `kill -9` of the send during
planning leaves no reader behind, holding the send lock or the outbox's connection.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator
from itertools import islice
from multiprocessing.connection import Connection
from typing import Any

from newsletter.errors import DeliveryError, NewsletterError, SubscriberListError
from newsletter.outbox import PlannedRow
from newsletter.send.children import detach
from newsletter.send.job import Job
from newsletter.subscribers import normalize

SMALL_BATCH = 1000
SMALL_ROWS = 20_000  # rows read in small batches before `size` is used


def planned_batches(job: Job, size: int) -> Iterator[list[PlannedRow]]:
    """The list as planned rows, `size` at a time, read in a child process."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_read, args=(job, size, send, os.getpid()), daemon=True)
    child.start()
    send.close()
    try:
        while True:
            try:
                kind, payload = receive.recv()
            except EOFError:
                raise DeliveryError(
                    "reading the list stopped: its reader process died",
                    hint="Re-run the same command to resume.",
                ) from None
            if kind == "rows":
                yield payload
            elif kind == "error":
                message, hint = payload
                raise SubscriberListError(message, hint=hint or None)
            else:
                if job.report is not None:
                    vars(job.report).update(vars(payload))
                return
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join()


def _read(job: Job, size: int, pipe: Connection, parent: int) -> None:
    detach(parent, keep=[pipe.fileno()])
    # Ctrl-C reaches the whole process group: the parent decides, and ends this child.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for message in _messages(job, size):
            pipe.send(message)
    except OSError:  # the parent is gone (its end closed): nobody to tell, nothing to hold
        pass
    finally:
        pipe.close()


def _messages(job: Job, size: int) -> Iterator[tuple[str, Any]]:
    """What the child tells the parent: ("rows", batch) for each batch, then ("done", the
    list's report) or ("error", (message, hint))."""
    message_id = job.message_id
    try:
        stream = iter(job.subscribers())
        read = 0
        # Small batches first: the writer idles until the first one comes, and a short list
        # is done before larger ones would pay off.
        while batch := list(islice(stream, size if read >= SMALL_ROWS else SMALL_BATCH)):
            read += len(batch)
            # Plain tuples: a NamedTuple pickles at five times the cost, here and unpickled
            # by the writer. The key is the Message-ID's seed as it is (normalize is idempotent).
            keys = [normalize(sub.envelope) for sub in batch]
            yield (
                "rows",
                [
                    (key, sub.envelope, sub.name, message_id(key) if message_id else None)
                    for key, sub in zip(keys, batch, strict=True)
                ],
            )
        yield ("done", job.report)
    except NewsletterError as exc:
        yield ("error", (exc.message, exc.hint))
    except Exception as exc:
        yield ("error", (f"cannot read the list: {exc}", ""))
