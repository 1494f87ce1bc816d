"""Time of `newsletter diff --html` on issue 14 (one Chromium start, 8 screenshots, the pixel
diff, the page) next to the reference measured in the same run: `newsletter diff` without
pictures on the same two commits.

The repository is benchmarks/diff.py's (a copy of the project, one word and one link of issue
14 changed). Each run starts the real command in a child process, as CI does. Then, in this
process, where the time of the pictures goes: Chromium's start and the 8 shots, the pixel diff
of the 4 pairs, and the page (base64 and the template). Needs the shots extra and a Chromium
(NEWSLETTER_CHROMIUM, else chromium on PATH).
Run: `.venv/bin/python benchmarks/shots.py [RUNS]` (default 5), the two commands interleaved.

Measured (issue 33) on the 2-core machine shared by five engineers, load 4 to 9, so the ratio
is the figure: with pictures 9.2, 17.2 and 9.4 s against 2.3, 4.0 and 1.8 s without, 4.0x,
4.3x and 5.3x in three runs; Chromium's start and the 8 shots 7.0 to 12.0 s, the pixel diff
and marks of the 4 pairs 1.1 to 2.6 s, the page 0.1 s; the page 6.5 MB (issue 14 is 4,600 px
tall on a phone).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from diff import timed, two_commits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the project copy in tests/support/
from newsletter.review import compare  # noqa: E402
from newsletter.review.pictures import pair_shots, render_page  # noqa: E402
from newsletter.review.shots import EmailPage, shots_missing, take_shots  # noqa: E402
from support.project import copy_project  # noqa: E402


def main() -> None:
    missing = shots_missing()
    if missing is not None:
        sys.exit(f"no screenshots here: {missing}")
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_project(Path(tmp) / "project")
        two_commits(root)
        plain = ["diff", "--issue", "14", "HEAD~1", "HEAD"]
        pictures = [*plain, "--html", str(Path(tmp) / "page.html")]
        timed(root, pictures)  # warm: the page cache, Python's bytecode, Chromium's files
        withs, withouts = [], []
        for _ in range(runs):
            withs.append(timed(root, pictures))
            withouts.append(timed(root, plain))
        page_kb = (Path(tmp) / "page.html").stat().st_size / 1024
        found = compare(root, 14, "HEAD~1", "HEAD")
        started = time.perf_counter()
        before, after = take_shots([EmailPage(found.before.html), EmailPage(found.after.html)])
        shots_s = time.perf_counter() - started
        started = time.perf_counter()
        pairs = pair_shots(before, after)
        pixels_s = time.perf_counter() - started
        started = time.perf_counter()
        render_page(found, pairs)
        page_s = time.perf_counter() - started
    with_s, without_s = statistics.median(withs), statistics.median(withouts)
    tallest = max(len(p.after) for p in pairs)
    print(f"issue 14, {runs} runs each, interleaved, medians (whole command, a child process):")
    print(f"  newsletter diff HEAD~1 HEAD --html (8 shots): {with_s * 1000:7.0f} ms")
    print(f"  reference: newsletter diff HEAD~1 HEAD:       {without_s * 1000:7.0f} ms")
    print(f"  with / without pictures: {with_s / without_s:.1f}x; the page: {page_kb:,.0f} KB")
    print("where the pictures' time goes (one run, in this process):")
    print(f"  Chromium started once, 8 full-page shots:   {shots_s * 1000:7.0f} ms")
    print(f"  pixel diff and marks, 4 pairs:              {pixels_s * 1000:7.0f} ms")
    print(f"  the page (base64, template):                {page_s * 1000:7.0f} ms")
    print(f"  ({tallest:,} bytes: the largest marked shot)")


if __name__ == "__main__":
    main()
