"""The list read beside the writer: a Job in, batches of planned rows and the list's report out,
from a child process.

Reading and checking a CSV row costs about as much as writing its row into the outbox (see
docs/benchmarks.md), so planning reads in a forked child while this process writes: the two
overlap, and planning takes about the time of the slower one. The child sends typed messages
through a pipe: `Rows` for each batch (1,000 rows, then `size` once the list proves long; plain
tuples inside), then `ListRead` with the list's report (rows rejected, duplicates, ...), or
`ReadFailed`, raised here as the error it was. A child that dies ends planning with an error.
The child keeps only its end of the pipe of what it inherited and dies with this process
(children.py): a `kill -9` of the send during planning leaves no reader behind, holding the
send lock or the outbox's connection.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from multiprocessing.connection import Connection

from newsletter.database import PlannedRow
from newsletter.errors import DeliveryError, NewsletterError, SubscriberListError
from newsletter.importers.subscribers import ListReport, fold_address
from newsletter.send.children import detach
from newsletter.send.job import Job

SMALL_BATCH = 1000
SMALL_ROWS = 20_000  # rows read in small batches before `size` is used


@dataclass(frozen=True)
class Rows:
    """One batch of the list, as planning stores it."""

    batch: list[PlannedRow]


@dataclass(frozen=True)
class ListRead:
    """The list read to its end: what reading it found (None: not a file)."""

    report: ListReport | None


@dataclass(frozen=True)
class ReadFailed:
    """The list could not be read on: the error, to raise in the parent."""

    message: str
    hint: str


class ListStream:
    """The list as planned rows, `size` at a time, read in a child process; once iterated to
    its end, `report` is what reading it found."""

    def __init__(self, job: Job, size: int) -> None:
        self.job = job
        self.size = size
        self.report: ListReport | None = None

    def __iter__(self) -> Iterator[list[PlannedRow]]:
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        child = context.Process(
            target=_read, args=(self.job, self.size, send, os.getpid()), daemon=True
        )
        child.start()
        send.close()
        try:
            while True:
                try:
                    message = receive.recv()
                except EOFError:
                    raise DeliveryError(
                        "reading the list stopped: its reader process died",
                        hint="Re-run the same command to resume.",
                    ) from None
                if isinstance(message, Rows):
                    yield message.batch
                elif isinstance(message, ReadFailed):
                    raise SubscriberListError(message.message, hint=message.hint or None)
                else:
                    self.report = message.report
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


def _messages(job: Job, size: int) -> Iterator[Rows | ListRead | ReadFailed]:
    """What the child tells the parent: a Rows for each batch, then ListRead or ReadFailed."""
    message_id = job.message_id
    try:
        rows, report = job.subscribers.read()
        stream = iter(rows)
        read = 0
        # Small batches first: the writer idles until the first one comes, and a short list
        # is done before larger ones would pay off.
        while batch := list(islice(stream, size if read >= SMALL_ROWS else SMALL_BATCH)):
            read += len(batch)
            # Plain tuples: a NamedTuple pickles at several times the cost, here and unpickled
            # by the writer. The key is the Message-ID's seed as it is (folding is idempotent).
            keys = [fold_address(sub.envelope) for sub in batch]
            yield Rows(
                [
                    (key, sub.envelope, sub.name, message_id(key) if message_id else None)
                    for key, sub in zip(keys, batch, strict=True)
                ]
            )
        yield ListRead(report)
    except NewsletterError as exc:
        yield ReadFailed(exc.message, exc.hint)
    except Exception as exc:
        yield ReadFailed(f"cannot read the list: {exc}", "")
