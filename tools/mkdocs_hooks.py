"""mkdocs.yml's nav and the guide pages present in docs/ in, the site's nav out.

Other work adds its own guide pages (relays, sequences, review) on branches of its own: each
is listed here with the section it belongs to, and joins the nav when its file exists, so a
merge neither breaks the strict build (a page outside the nav) nor needs mkdocs.yml edited.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# A page -> (its nav section, its title), added at the section's end when the file exists.
OPTIONAL = {
    "guide/review.md": ("Checking and sending", "Review"),
    "guide/relays.md": ("Checking and sending", "Relays"),
    "guide/sequences.md": ("Readers and privacy", "Sequences"),
}


def listed(nav: list[Any], page: str) -> bool:
    """Whether `page` is anywhere in `nav` (nested sections included)."""
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            if value == page or (isinstance(value, list) and listed(value, page)):
                return True
    return False


def add_present_pages(nav: list[Any], docs: Path) -> list[Any]:
    """`nav` with each OPTIONAL page that exists under `docs` added to its section."""
    for page, (section, title) in OPTIONAL.items():
        if not (docs / page).is_file() or listed(nav, page):
            continue
        for entry in nav:
            if isinstance(entry, dict) and isinstance(entry.get(section), list):
                entry[section].append({title: page})
                break
    return nav


def on_config(config: Any) -> Any:
    """MkDocs' hook: the nav with the pages present added."""
    config["nav"] = add_present_pages(config["nav"], Path(config["docs_dir"]))
    return config
