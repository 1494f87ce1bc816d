"""Time of `newsletter diff` without pictures on issue 14 (target: under 1 s), next to the
reference measured in the same run: `newsletter build` of the same issue, one render.

A copy of the project is made a git repository with two commits (one word and one link of issue
14 changed). Each run starts the real command in a child process, as an editor or CI does: the
interpreter's start and the imports count. diff renders the issue twice (each revision read from
git into a temporary folder), so about twice the reference plus git's reads is what to expect.
Run: `.venv/bin/python benchmarks/diff.py [RUNS]` (default 10), the two commands interleaved.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from support.project import copy_project  # noqa: E402

TARGET_S = 1.0
NEWSLETTER = [sys.executable, "-m", "newsletter"]
GIT_PERSON = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.org",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.org",
}


def git(root: Path, *args: str) -> None:
    env = {**os.environ, **GIT_PERSON}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def two_commits(root: Path) -> None:
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    issue = root / "issues" / "14.yaml"
    text = issue.read_text(encoding="utf-8")
    link = "https://github.com/Oneflow-Inc/oneflow"
    assert link in text, "issue 14 no longer has the edited link"
    assert "论文" in text, "issue 14 no longer has the edited word"
    issue.write_text(
        text.replace(link, "https://github.com/Oneflow-Inc/oneflow-docs", 1).replace(
            "论文", "文章", 1
        ),
        encoding="utf-8",
    )
    git(root, "commit", "-q", "-am", "one word, one link")


def timed(root: Path, args: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run([*NEWSLETTER, *args], cwd=root, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_project(Path(tmp) / "project")
        two_commits(root)
        out = root / "dist"
        diff_args = ["diff", "--issue", "14", "HEAD~1", "HEAD"]
        build_args = ["build", "--issue", "14", "--out", str(out)]
        timed(root, diff_args)  # warm: the page cache, Python's bytecode
        diffs, builds = [], []
        for _ in range(runs):
            diffs.append(timed(root, diff_args))
            builds.append(timed(root, build_args))
    diff_s, build_s = statistics.median(diffs), statistics.median(builds)
    print(f"issue 14, {runs} runs each, interleaved, medians (whole command, a child process):")
    print(f"  newsletter diff HEAD~1 HEAD (no pictures): {diff_s * 1000:7.0f} ms")
    print(f"  reference: newsletter build (one render):  {build_s * 1000:7.0f} ms")
    verdict = "within" if diff_s < TARGET_S else "OVER"
    print(f"  diff / build: {diff_s / build_s:.2f}x; {verdict} the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
