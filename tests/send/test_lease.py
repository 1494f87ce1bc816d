"""`why_gone`: which registered workers `status` calls gone, and why (issue 18.9: a worker that
stopped on a fault of the outbox was still listed as sending)."""

from __future__ import annotations

import os
import socket
import subprocess

from newsletter.database import Worker
from newsletter.send.lease import why_gone

HERE = socket.gethostname()


def worker(host: str, pid: int, lease_until: float) -> Worker:
    return Worker("w", 14, "main", host, pid, "t0", "t1", lease_until, "active")


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()  # reaped: its pid names no process now
    return proc.pid


def test_a_worker_whose_lease_ran_out_is_gone() -> None:
    assert why_gone(worker(HERE, os.getpid(), 100.0), 130.4) == ("gone: its lease expired 30 s ago")


def test_a_worker_of_this_host_whose_process_is_dead_is_gone() -> None:
    pid = dead_pid()
    assert why_gone(worker(HERE, pid, 200.0), 130.0) == f"gone: no process {pid} runs on this host"


def test_a_live_worker_or_one_on_another_host_may_be_sending() -> None:
    assert why_gone(worker(HERE, os.getpid(), 200.0), 130.0) == ""
    # Another machine's pid says nothing here: only its lease can tell.
    assert why_gone(worker("elsewhere.example", dead_pid(), 200.0), 130.0) == ""
