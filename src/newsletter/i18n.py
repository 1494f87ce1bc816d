"""Words by language: a table and a language tag in, the strings to show out.

Each table maps a primary language subtag ("zh", "en") to its words; a language without a table
of its own gets English. `{name}` in a string stands for the newsletter's name.
"""

from __future__ import annotations

from collections.abc import Mapping

from newsletter.models import Placeholder

Table = Mapping[str, Mapping[str, str]]

# The email's words; a project can override any of them in its own templates.
EMAIL: dict[str, dict[str, str]] = {
    "zh": {
        "greeting": f"{Placeholder.NAME}，你好！",
        "view_in_browser": "在浏览器中查看",
        "unsubscribe": "退订",
        "footer_reason": "你收到这封邮件，是因为你订阅了{name}。",
        "label_separator": "：",
        "link_site_separator": " · ",
        "date_format": "{year}年{month}月{day}日",
        "test_marker": "【测试】",
        "image": "图片",
        "list_separator": "、",
        "rest_online": "本期较长，邮件里放不下全部内容。以下栏目请在网页版阅读：",
        "rest_online_link": "在网页上阅读其余内容",
        "rest_more": "等，共 {count} 个栏目",
    },
    "en": {
        "greeting": f"Hi {Placeholder.NAME},",
        "view_in_browser": "View in browser",
        "unsubscribe": "Unsubscribe",
        "footer_reason": "You receive this email because you subscribed to {name}.",
        "label_separator": ": ",
        "link_site_separator": " · ",
        "date_format": "{month_name} {day}, {year}",
        # Not all capitals: a capitals-only subject is a spam sign (SUBJ_ALL_CAPS).
        "test_marker": "[Test] ",
        "image": "Image",
        "list_separator": ", ",
        "rest_online": "This issue is longer than an email can hold. These sections are on "
        "the web version: ",
        "rest_online_link": "Read the rest online",
        "rest_more": " and {more} more",
    },
}


# The words of the pages `serve` and `build --site` show around the emails.
PAGES: dict[str, dict[str, str]] = {
    "zh": {
        "archive": "往期回顾",
        "archive_lead": "{name}的全部往期内容。",
        "issue_label": "第 {number} 期",
        "no_issues": "还没有发布任何一期。",
        "confirm_title": "退订",
        "confirm_lead": "确定要将 {address} 从「{list}」退订吗？退订后，你将不再收到这份通讯。",
        "confirm_button": "确认退订",
        "done_title": "已退订",
        "done_lead": "{address} 已从「{list}」退订，你不会再收到这份通讯。",
        "undo_lead": "误点了退订？",
        "undo_button": "重新订阅",
        "resubscribed_title": "已重新订阅",
        "resubscribed_lead": "{address} 将继续收到「{list}」。",
        "resubscribe_refused": (
            "这个地址是由编辑退订的，无法通过此链接重新订阅。请直接回复任意一期邮件联系我们。"
        ),
        "how_title": "如何退订",
        "how_lead": (
            "每封邮件的底部都有一个只属于你的「退订」链接："
            "打开你收到的任意一期邮件，点击底部的「退订」即可，无需登录。"
        ),
        "how_client": "Gmail、Outlook 等邮箱也可能在发件人旁边显示「退订」按钮，效果相同。",
        "invalid_title": "链接无效",
        "invalid_lead": (
            "这个退订链接无效、不完整或已被改动。"
            "请使用你收到的最近一期邮件底部的退订链接，或直接回复邮件请我们为你退订。"
        ),
        "not_found_title": "页面不存在",
        "not_found_lead": "找不到这个页面。",
        "bad_request_title": "请求无效",
        "bad_request_lead": "服务器无法处理这个请求。",
        "too_large_title": "请求过大",
        "too_large_lead": "请求的内容超出了允许的大小。",
        "error_title": "出错了",
        "error_lead": "服务器出了点问题，你的请求没有完成。请稍后再试。",
        "back_to_archive": "返回往期回顾",
    },
    "en": {
        "archive": "Archive",
        "archive_lead": "Every issue of {name}.",
        "issue_label": "Issue {number}",
        "no_issues": "No issue has been published yet.",
        "confirm_title": "Unsubscribe",
        "confirm_lead": "Unsubscribe {address} from {list}? You will no longer receive this "
        "newsletter.",
        "confirm_button": "Unsubscribe",
        "done_title": "Unsubscribed",
        "done_lead": "{address} has been unsubscribed from {list}. You will not receive it again.",
        "undo_lead": "Unsubscribed by mistake?",
        "undo_button": "Re-subscribe",
        "resubscribed_title": "Subscribed again",
        "resubscribed_lead": "{address} will keep receiving {list}.",
        "resubscribe_refused": "This address was removed by the editor and cannot be "
        "re-subscribed with this link. Reply to any issue to reach us.",
        "how_title": "How to unsubscribe",
        "how_lead": "Every email ends with an unsubscribe link that is yours alone: open any issue "
        "you received and follow “Unsubscribe” at the bottom. No login needed.",
        "how_client": "Gmail, Outlook and other mailboxes may also show an Unsubscribe button "
        "next to the sender's name; it does the same.",
        "invalid_title": "This link does not work",
        "invalid_lead": "This unsubscribe link is invalid, incomplete or was altered. Use the link "
        "at the bottom of the most recent issue you received, or reply to it and ask us to "
        "unsubscribe you.",
        "not_found_title": "Page not found",
        "not_found_lead": "There is no page at this address.",
        "bad_request_title": "Bad request",
        "bad_request_lead": "The server cannot handle this request.",
        "too_large_title": "Request too large",
        "too_large_lead": "The request is larger than this server accepts.",
        "error_title": "Something went wrong",
        "error_lead": "The server had a problem and your request was not completed. Please try "
        "again later.",
        "back_to_archive": "Back to the archive",
    },
}


def primary(language: str) -> str:
    """'zh-CN' -> 'zh': the part of a language tag the tables are keyed by."""
    return language.split("-")[0].lower()


def has_strings(table: Table, language: str) -> bool:
    return primary(language) in table


def strings_for(table: Table, language: str, *, name: str | None = None) -> dict[str, str]:
    """The table's words for `language` (English if it has none), `{name}` filled if given."""
    words = table.get(primary(language), table["en"])
    if name is None:
        return dict(words)
    return {key: value.replace("{name}", name) for key, value in words.items()}
