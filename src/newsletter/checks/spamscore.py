"""A finished message's bytes -> its SpamAssassin score and the rules that scored, as Findings.

Runs the system's `spamassassin -L -t` (local rules only: no network, no DNS blocklists) on the
sample message, exactly as it goes on the wire, and reads the "Content analysis details" block of
its report. Bayes learning is switched off so a check never changes SpamAssassin's own state.
Where the program is missing or fails, the result says so and how to fix it; nothing is raised.
"""

from __future__ import annotations

import asyncio
import math
import re
import shutil
import subprocess
import threading
from dataclasses import asdict, dataclass
from subprocess import PIPE
from types import TracebackType
from typing import Any

from newsletter.checks import spamkept
from newsletter.checks.lint import Finding

PROGRAM = "spamassassin"
# The score a message needs for SpamAssassin's default to call it spam: an error here.
SPAM_ERROR = 5.0
TIMEOUT = 120.0
INSTALL_HINT = (
    "install SpamAssassin to score the sample message: `apt-get install spamassassin` "
    "(Debian, Ubuntu), `dnf install spamassassin` (Fedora), `brew install spamassassin` (macOS)"
)
_ARGS = ("-L", "-t", "--cf=use_bayes 0", "--cf=bayes_auto_learn 0")
_DETAILS = re.compile(r"^Content analysis details:\s+\((-?[\d.]+) points, (-?[\d.]+) required\)")
_RULE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s+([A-Z0-9_]+)\s+(.*)$")
_VERSION = re.compile(r"^X-Spam-Checker-Version: SpamAssassin (\S+)", re.MULTILINE)


@dataclass(frozen=True)
class SpamRule:
    """One rule of the report: its points, name and SpamAssassin's description."""

    points: float
    name: str
    description: str

    def __str__(self) -> str:
        return f"{_points(self.points, sign=True)} {self.name} ({self.description})"


@dataclass(frozen=True)
class SpamScore:
    """What SpamAssassin made of the message."""

    score: float
    required: float
    rules: tuple[SpamRule, ...]
    version: str

    @property
    def scored(self) -> tuple[SpamRule, ...]:
        """The rules that moved the score (SpamAssassin also lists 0.0 informational ones)."""
        return tuple(rule for rule in self.rules if round(rule.points, 1) != 0.0)

    def summary(self) -> str:
        rules = ", ".join(str(rule) for rule in self.scored) or "no rule scored"
        return (
            f"spam score {_points(self.score)} (SpamAssassin {self.version}, local rules, "
            f"{self.required:.1f} is spam): {rules}"
        )


@dataclass(frozen=True)
class SpamUnavailable:
    """Why there is no score, and what to do about it."""

    reason: str

    def summary(self) -> str:
        return f"spam score not measured: {self.reason}"


SpamResult = SpamScore | SpamUnavailable


def score_message(data: bytes, *, program: str = PROGRAM) -> SpamResult:
    """Run SpamAssassin on one message's bytes and parse its report."""
    found = shutil.which(program)
    if found is None:
        return _missing(program)
    try:
        done = subprocess.run(
            [found, *_ARGS], input=data, capture_output=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return _too_slow(program)
    except OSError as exc:
        return _not_started(program, exc)
    return _read(program, done.returncode, done.stdout, done.stderr)


class Scoring:
    """SpamAssassin started before its message exists; the message's score, kept a day in the
    user's cache, out. The same message (its fingerprint: its bytes less what differs
    on every build, gate.fingerprint) scored by the same SpamAssassin with the same rules is not
    scored again, so `check`, the test send and the send of one draft score it once between them.

    A cold score costs about a second, most of it Perl's: loading SpamAssassin's modules
    (before it reads its input), then parsing its rules and checking (after). Started first,
    the modules load while the issue renders; fed the message (`feed`), it scores in a thread
    while the other checks run; `result` waits for it. A score kept for the message's
    fingerprint ends the process unused; when a `hint` says the score is kept, the process is
    not started at all. Leaving the `with` block ends a process still running (an issue that
    failed to load never feeds it)."""

    def __init__(self, *, program: str = PROGRAM, hint: str = "") -> None:
        """`hint`: what the message is made from (the issue file as it is, the list, the
        settings), when known before it is built. If the message last built from the same
        `hint` has a kept score, SpamAssassin is not started ahead (it would only be killed):
        it starts when fed, should the message turn out to be another."""
        self._program = program
        self._hint = hint
        self._found = shutil.which(program)
        self._process: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._scored: SpamResult | None = None  # the thread's answer
        self._result: SpamResult | None = None  # known: missing, kept, or the answer kept
        self._key = ""
        self._stamp = ""
        self._hinted = spamkept.hinted(hint) if hint else None
        if self._found is None:
            self._result = _missing(program)
            return
        if self._hinted is not None and self._kept_score(self._hinted) is not None:
            return
        self._start()

    def _start(self) -> None:
        assert self._found is not None
        try:
            self._process = subprocess.Popen(
                [self._found, *_ARGS], stdin=PIPE, stdout=PIPE, stderr=PIPE
            )
        except OSError as exc:
            self._result = _not_started(self._program, exc)

    def _kept_score(self, fingerprint: str) -> SpamScore | None:
        assert self._found is not None
        if not self._stamp:
            self._stamp = spamkept.rules_stamp(self._found)
        self._key = f"{fingerprint}:{self._stamp}"
        return _from_json(spamkept.kept(self._key))

    def __enter__(self) -> Scoring:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end()

    def feed(self, data: bytes, fingerprint: str) -> None:
        """The message to score (once): a kept score for `fingerprint` ends the process; else
        the message is written to it (started now, if it was not) and its report read, in a
        thread."""
        if self._result is not None or self._found is None or self._thread:
            return
        if self._hint and self._hinted != fingerprint:
            spamkept.keep_hint(self._hint, fingerprint)
        kept = self._kept_score(fingerprint)
        if kept is not None:
            self._result = kept
            self._end()
            return
        if self._process is None:
            self._start()
        process = self._process
        if process is None:
            return  # it could not start: the result says so

        def score() -> None:
            try:
                out, err = process.communicate(data, timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                self._scored = _too_slow(self._program)
                return
            self._scored = _read(self._program, process.returncode, out, err)

        self._thread = threading.Thread(target=score, name="spamassassin", daemon=True)
        self._thread.start()

    def result(self) -> SpamResult:
        """The score (waiting for SpamAssassin if it is still at work), kept for a day."""
        if self._result is not None:
            return self._result
        if self._thread is None:
            raise RuntimeError("Scoring.result before feed")
        self._thread.join()
        result = self._scored
        assert result is not None
        if isinstance(result, SpamScore):
            spamkept.keep(self._key, asdict(result))
        self._result = result
        return result

    def _end(self) -> None:
        """End a process that is not needed (or no longer): kill it, reap it, close its pipes."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.kill()
        if self._thread is not None:
            self._thread.join()  # its communicate ends with the process
        else:
            process.communicate()


def _from_json(value: Any) -> SpamScore | None:
    """A kept score back, or None if it is not one (a foreign or older file)."""
    if not isinstance(value, dict):
        return None
    try:
        rules = tuple(
            SpamRule(float(r["points"]), str(r["name"]), str(r["description"]))
            for r in value["rules"]
        )
        score = SpamScore(
            float(value["score"]), float(value["required"]), rules, str(value["version"])
        )
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    # A NaN score is neither above 0.0 nor 5.0: read back, it would let any message pass.
    numbers = (score.score, score.required, *(rule.points for rule in score.rules))
    return score if all(math.isfinite(n) for n in numbers) else None


async def score_message_async(data: bytes, *, program: str = PROGRAM) -> SpamResult:
    """score_message for an event loop (the preview): cancelling it ends the process."""
    found = shutil.which(program)
    if found is None:
        return _missing(program)
    try:
        process = await asyncio.create_subprocess_exec(
            found, *_ARGS, stdin=PIPE, stdout=PIPE, stderr=PIPE
        )
    except OSError as exc:
        return _not_started(program, exc)
    try:
        out, err = await asyncio.wait_for(process.communicate(data), TIMEOUT)
    except TimeoutError:
        return _too_slow(program)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return _read(program, process.returncode, out, err)


def _missing(program: str) -> SpamUnavailable:
    return SpamUnavailable(f"`{program}` is not installed; {INSTALL_HINT}")


def _too_slow(program: str) -> SpamUnavailable:
    return SpamUnavailable(f"`{program}` did not answer within {TIMEOUT:.0f} s")


def _not_started(program: str, exc: OSError) -> SpamUnavailable:
    return SpamUnavailable(f"`{program}` could not be started: {exc.strerror or exc}")


def _read(program: str, code: int | None, out: bytes, err: bytes) -> SpamResult:
    parsed = parse_report(out.decode("utf-8", "replace"))
    if parsed is not None:
        return parsed
    lines = err.decode("utf-8", "replace").strip().splitlines()
    said = f": {lines[-1]}" if lines else ""
    return SpamUnavailable(f"`{program}` exited with code {code} without a report{said}")


def parse_report(output: str) -> SpamScore | None:
    """The score, threshold and rules of `spamassassin -t` output; None if it has no report."""
    lines = output.splitlines()
    starts = [n for n, line in enumerate(lines) if _DETAILS.match(line)]
    if not starts:
        return None
    head = _DETAILS.match(lines[starts[-1]])
    assert head is not None
    rules: list[SpamRule] = []
    table = lines[starts[-1] + 1 :]
    dashes = next((n for n, line in enumerate(table) if line.startswith("----")), len(table))
    # One rule per line, a long description continued on indented lines; a blank line ends it.
    for line in table[dashes + 1 :]:
        match = _RULE.match(line)
        if match:
            points, name, description = match.groups()
            rules.append(SpamRule(float(points), name, description.strip()))
        elif rules and line.startswith(" ") and line.strip():
            last = rules[-1]
            rules[-1] = SpamRule(last.points, last.name, f"{last.description} {line.strip()}")
        else:
            break
    version = _VERSION.search(output)
    return SpamScore(
        score=float(head.group(1)),
        required=float(head.group(2)),
        rules=tuple(rules),
        version=version.group(1) if version else "?",
    )


def spam_findings(result: SpamResult) -> list[Finding]:
    """A warning for any score above 0.0, an error from 5.0 (SPAM_ERROR) on."""
    if not isinstance(result, SpamScore) or result.score <= 0.0:
        return []
    rules = ", ".join(str(rule) for rule in result.scored)
    if result.score >= SPAM_ERROR:
        return [
            Finding(
                "error",
                "spam-score",
                f"SpamAssassin scores the sample message {_points(result.score)}, which it calls "
                f"spam: {rules}",
            )
        ]
    return [
        Finding(
            "warning",
            "spam-score",
            f"SpamAssassin scores the sample message {_points(result.score)} "
            f"(aim for 0.0): {rules}",
        )
    ]


def _points(value: float, *, sign: bool = False) -> str:
    """SpamAssassin's one decimal, without its "-0.0" for rules that count nothing."""
    value = round(value, 1) + 0.0
    return f"{value:+.1f}" if sign else f"{value:.1f}"
