"""The settings, an issue and the secret in; what is wrong with `newsletter serve`'s answers for
the issue's tracked links out, as Faults (`check --online` with `[tracking] clicks` on).

Every link the email would track (and the canary) is asked of BASE/r/TOKEN once, with HEAD,
under a token of row 0, which names no reader: `serve` answers it as it would a reader's and
keeps no event of it. Each must be a redirect to exactly the issue's link at that place (the
canary's: the web version). Before the send `serve` has no record of the send's links and
answers from its own copy of the issue file, so a wrong answer also says that copy differs.
"""

from __future__ import annotations

from newsletter.config.settings import Settings, TrackingMode
from newsletter.links import click_url, issue_url
from newsletter.mail.clicktokens import LinkTokens
from newsletter.mail.tracking import PROBE_ROW
from newsletter.models import Issue
from newsletter.preflight.faults import Fault
from newsletter.preflight.linkcheck import LinkChecker
from newsletter.rendering.places import CANARY, Place, issue_links

_REDIRECTS = {301, 302, 303, 307, 308}
_SHOWN = 3  # wrong answers named in the finding


async def check_redirects(
    settings: Settings,
    issue: Issue,
    checker: LinkChecker,
    secret: bytes | None,
    deadline: float | None = None,
) -> list[Fault]:
    if settings.tracking.clicks == TrackingMode.OFF:
        return []
    base = settings.newsletter.base_url
    if secret is None:
        return [
            Fault(
                "redirect",
                "tracked links not checked: NEWSLETTER_SECRET is not set, so no token `serve` "
                "would accept can be made; set it as `send` and `serve` have it",
                "warning",
            )
        ]
    links: list[tuple[Place, str]] = [
        (link.place, link.url)
        for link in issue_links(issue)
        if link.url.startswith(("https://", "http://"))
    ]
    links.append((CANARY, issue_url(base, issue.number)))
    tokens = LinkTokens(secret, issue.number, links).for_row(PROBE_ROW)
    asked = {click_url(base, token): url for token, (_, url) in zip(tokens, links, strict=True)}
    answers = await checker.answers(asked, deadline)
    late = [result for result in answers.values() if result.out_of_time]
    failed = [result for result in answers.values() if result.error and not result.out_of_time]
    if len(failed) == len(answers):
        first = failed[0]
        return [
            Fault(
                "redirect",
                f"the redirect endpoint does not answer: HEAD {first.url}: {first.error}; every "
                "tracked link would lead nowhere: run `newsletter serve` behind the proxy that "
                "answers at base_url",
            )
        ]
    refused = [r for r in answers.values() if r.status in (403, 404)]
    if refused and len(refused) == len(answers):
        return [
            Fault(
                "redirect",
                f"`newsletter serve` at {base} refuses the tracked links' tokens "
                f"({refused[0].status}): it does not have this NEWSLETTER_SECRET (or an older "
                "newsletter); give it the same secret as `send`",
            )
        ]
    wrong = [
        f"{result.url} -> {result.target if result.redirects else result.status or result.error}"
        f", not {asked[result.url]}"
        for result in answers.values()
        if not result.out_of_time
        and not (result.status in _REDIRECTS and result.target == asked[result.url])
    ]
    faults = []
    if wrong:
        more = f" and {len(wrong) - _SHOWN} more" if len(wrong) > _SHOWN else ""
        faults.append(
            Fault(
                "redirect",
                f"{len(wrong)} of {len(answers)} tracked links do not redirect to the issue's "
                f"link: {'; '.join(wrong[:_SHOWN])}{more}. Is `serve` running this project, with "
                "this issue file as it is here?",
            )
        )
    if late:
        message = f"{len(late)} tracked link(s) not checked: {late[0].error}"
        faults.append(Fault("redirect", message, "warning"))
    return faults
