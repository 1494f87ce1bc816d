"""The settings in; a warning out for each ejected template the installed package has changed
since it was copied (rendering/ejected.py): a block the editor may want, a client's fix."""

from __future__ import annotations

from newsletter.checks.lint import Finding
from newsletter.config.settings import Settings
from newsletter.distribution import installed_version
from newsletter.errors import display_path
from newsletter.rendering.ejected import behind


def check_ejected(settings: Settings) -> list[Finding]:
    """One warning per copy behind the package's template, saying how to catch up: an unedited
    copy is taken again; an edited one is compared, merged by hand and then followed."""
    now = installed_version() or "source"
    findings = []
    for state in behind(settings.templates_dir):
        assert state.copy is not None  # behind() names only ejected copies
        name = state.name
        if state.edited:
            fix = (
                f"see what changed with `newsletter templates diff {name}`, take what you want "
                f"into your copy, then `newsletter templates follow {name}`"
            )
        else:
            fix = (
                f"your copy is unedited: `newsletter templates eject --force {name}` takes the "
                f"new one (or delete it to use the package's)"
            )
        findings.append(
            Finding(
                "warning",
                "template-behind",
                f"{display_path(state.path)}: copied from newsletter {state.copy.version} on "
                f"{state.copy.day}; the installed package's {name} ({now}) has changed since: "
                f"{fix}",
            )
        )
    return findings
