"""Render issue 14 end to end with each inliner and print a table (run: `make bench`).

Full render = load + validate the YAML, Jinja -> MJML, MRML compile, CSS inlining, text part.
css-inline (the default) and premailer run in the same process, same input, interleaved, so the
ratio is fair; the encoded HTML size is measured on the sample message's wire bytes.
"""

from __future__ import annotations

import email
import email.policy
import statistics
import sys
import time
from email.message import EmailMessage
from pathlib import Path

from newsletter.checks import GMAIL_CLIP, encoded_size
from newsletter.issues import load_issue
from newsletter.mail.message import sample_message
from newsletter.render import compile_issue, inline_css, render_issue
from newsletter.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
RUNS = 40
RENDER_TARGET_MS = 5.0
SIZE_TARGET_KB = 60


def full_render(settings: Settings) -> float:
    start = time.perf_counter()
    render_issue(load_issue(settings.issues_dir, 14), settings)
    return (time.perf_counter() - start) * 1000


def inline_only(settings: Settings, html: str, css: str) -> float:
    start = time.perf_counter()
    inline_css(html, css, settings.render.inliner)
    return (time.perf_counter() - start) * 1000


def html_part_size(settings: Settings) -> tuple[int, str]:
    rendered = render_issue(load_issue(settings.issues_dir, 14), settings)
    sample, _ = sample_message(rendered, settings, "main")
    parsed = email.message_from_bytes(sample.data, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    part = parsed.get_body(("html",))
    assert part is not None
    return encoded_size(part), str(part["Content-Transfer-Encoding"])


def main() -> None:
    base = load_settings(ROOT / "newsletter.toml", environ={})
    variants = {
        name: base.model_copy(update={"render": base.render.model_copy(update={"inliner": name})})
        for name in ("css-inline", "premailer")
    }
    for settings in variants.values():  # warm up: imports, template compilation
        full_render(settings)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(RUNS):
        for name, settings in variants.items():
            times[name].append(full_render(settings))
    print(f"Full render of issue 14, median of {RUNS} runs (Python {sys.version.split()[0]})")
    print(f"{'inliner':<12} {'median ms':>10} {'p90 ms':>8}")
    for name, samples in times.items():
        p90 = statistics.quantiles(samples, n=10)[-1]
        print(f"{name:<12} {statistics.median(samples):>10.2f} {p90:>8.2f}")
    ratio = statistics.median(times["premailer"]) / statistics.median(times["css-inline"])
    print(f"ratio premailer / css-inline, full render: {ratio:.1f}x")
    default = statistics.median(times["css-inline"])
    print(
        f"full render with the default inliner, target < {RENDER_TARGET_MS:.0f} ms: "
        f"{'met' if default < RENDER_TARGET_MS else 'NOT met'}"
    )
    html, css = compile_issue(load_issue(base.issues_dir, 14), base)
    inline: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(RUNS):
        for name, settings in variants.items():
            inline[name].append(inline_only(settings, html, css))
    medians = {name: statistics.median(samples) for name, samples in inline.items()}
    print(
        f"inlining step alone: css-inline {medians['css-inline']:.2f} ms, premailer "
        f"{medians['premailer']:.2f} ms, ratio {medians['premailer'] / medians['css-inline']:.1f}x"
    )
    for name, settings in variants.items():
        size, encoding = html_part_size(settings)
        print(
            f"encoded HTML part with {name}: {size / 1024:.1f} KB ({encoding}), "
            f"{size / GMAIL_CLIP:.0%} of Gmail's 102 KB; target < {SIZE_TARGET_KB} KB: "
            f"{'met' if size < SIZE_TARGET_KB * 1024 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
