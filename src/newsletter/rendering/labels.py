"""An issue and the settings in; the labels the templates put around its content out: the
greeting above the intro, and the numbers of its sections and items.

Both are the editor's choice ([newsletter] greeting, [render] numbering, or the issue's own
`greeting:` and `numbering:`); the defaults follow what the issue does itself: no greeting over
an intro that greets, no numbers on an English weekly that has none, the Chinese seed's 一、 and
0、 for a Chinese newsletter, and none where the titles carry their own (markdownsource.py).
"""

from __future__ import annotations

import re

from newsletter.config.settings import Settings
from newsletter.content import content_text
from newsletter.i18n import GREETINGS, strings_for
from newsletter.models import Issue, Placeholder

_CJK_DIGITS = "零一二三四五六七八九"


def greeting_line(issue: Issue, settings: Settings) -> str:
    """The line above the intro, the reader's name as Placeholder.NAME ("" for none): the
    issue's `greeting:`, else [newsletter] greeting. "auto" is the language's words, left out
    when the intro opens with a greeting of its own: one greeting, never two."""
    chosen = issue.greeting if issue.greeting is not None else settings.newsletter.greeting
    if chosen == "auto":
        words = strings_for(GREETINGS, settings.newsletter.language)
        chosen = "" if greets(content_text(issue.intro), words["openings"]) else words["greeting"]
    return chosen.replace("{name}", Placeholder.NAME.value)


def greets(intro: str, openings: str) -> bool:
    """Does the intro's first clause open with a greeting ("Hi all!", "Hello, friends",
    "朋友们，大家好")? A Latin word must stand alone there (not "Hiring"); a Chinese one may
    follow who is greeted."""
    clause = re.split(r"[,，.。!！?？:：;；\n]", intro.strip(), maxsplit=1)[0].strip().lower()
    for word in openings.split("|"):
        if word.isascii():
            if re.match(rf"{re.escape(word)}(?![^\W\d_])", clause):
                return True
        elif word in clause:
            return True
    return False


def numbering_style(settings: Settings, issue: Issue | None = None) -> str:
    """`chinese` (一、 and 0、), `decimal` (1. or 1、) or `none`. An issue's own `numbering`
    (front matter, or "none" where its titles carry numbers) wins; `auto` is the Chinese
    weekly's own numbers for a Chinese newsletter and none otherwise: an English weekly that
    numbers nothing is not given numbers (`decimal` asks for them)."""
    style = issue.numbering if issue is not None and issue.numbering else settings.render.numbering
    if style == "auto":
        return "chinese" if _is_chinese(settings.newsletter.language) else "none"
    return style


def _is_chinese(language: str) -> bool:
    return language.lower().startswith("zh")


def section_number(n: int, language: str, style: str = "chinese") -> str:
    """Section `n`'s label: "一、" (chinese), "1、" or "1. " (decimal), "" (none)."""
    if style == "none":
        return ""
    if style == "decimal" or not _is_chinese(language):
        return f"{n}、" if _is_chinese(language) else f"{n}. "
    if n < 10:
        return f"{_CJK_DIGITS[n]}、"
    tens, ones = divmod(n, 10)
    word = ("" if tens == 1 else _CJK_DIGITS[tens]) + "十" + (_CJK_DIGITS[ones] if ones else "")
    return f"{word}、"


def item_number(index: int, language: str, style: str = "chinese") -> str:
    """The label of a section's `index`-th titled item (from 0): "0、" (chinese, as the seed
    numbers them), "1、"/"1. " (decimal, from 1), "" (none). Only Chinese gets 、."""
    if style == "none":
        return ""
    if not _is_chinese(language):
        return f"{index + 1}. "
    return f"{index}、" if style == "chinese" else f"{index + 1}、"
