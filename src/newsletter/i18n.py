"""Words by language: a table and a language tag in, the strings to show out.

Each table maps a primary language subtag ("zh", "en") to its words; a newsletter's language must
be one of TRANSLATED (config/settings.py refuses another, listing these), while an issue's own
`language:` (its fonts) may be any, English words standing in. `{name}` in a string stands for
the newsletter's name, except in GREETINGS, where it is the reader's.
"""

from __future__ import annotations

from collections.abc import Mapping

Table = Mapping[str, Mapping[str, str]]

# The email's words; a project can override any of them in its own templates.
EMAIL: dict[str, dict[str, str]] = {
    "zh": {
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
        # A callout's kind, said in words (the text part has no colour); others as written.
        "callout_note": "注意",
        "callout_info": "信息",
        "callout_tip": "提示",
        "callout_warning": "警告",
        "callout_caution": "小心",
        "callout_danger": "危险",
        "callout_important": "重要",
        "callout_details": "详情",
    },
    "en": {
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
        "callout_note": "Note",
        "callout_info": "Info",
        "callout_tip": "Tip",
        "callout_warning": "Warning",
        "callout_caution": "Caution",
        "callout_danger": "Danger",
        "callout_important": "Important",
        "callout_details": "Details",
    },
}


# The languages the tool's own words are translated into, and their names for an error message.
TRANSLATED = {"en": "English", "zh": "Chinese"}

# The greeting above an intro (`{name}`: the reader's); the words of an intro that greets itself.
GREETINGS: dict[str, dict[str, str]] = {
    "zh": {"greeting": "{name}，你好！", "openings": "你好|您好|大家好|各位|亲爱的|嗨|哈喽"},
    "en": {"greeting": "Hi {name},", "openings": "hi|hello|hey|dear|good morning|greetings"},
}


# The words of the pages `serve` and `build --site` show around the emails.
PAGES: dict[str, dict[str, str]] = {
    "zh": {
        "archive": "往期回顾",
        "dead_link": "链接已失效",
        "dead_link_moved": "链接已失效，现在在",
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
        "signup_off_lead": "本站尚未开放订阅。",
        "bad_request_title": "请求无效",
        "bad_request_lead": "服务器无法处理这个请求。",
        "too_large_title": "请求过大",
        "too_large_lead": "请求的内容超出了允许的大小。",
        "error_title": "出错了",
        "error_lead": "服务器出了点问题，你的请求没有完成。请稍后再试。",
        "back_to_archive": "返回往期回顾",
        "subscribe_link": "订阅",
        "signup_title": "订阅{name}",
        "signup_lead": "留下邮箱，新一期发布时会发到你的收件箱。",
        "signup_list": "订阅哪一份",
        "signup_email": "邮箱地址",
        "signup_button": "订阅",
        "signup_consent": "我同意{name}向这个地址发送邮件通讯。每封邮件都可以一键退订。",
        "signup_working": "正在准备表单（几秒钟的计算，用来挡住机器人）……",
        "signup_failed": "表单没能准备好。请刷新页面重试。",
        "signup_needs_script": (
            "这个表单需要启用 JavaScript：它在浏览器里做一点计算，用来挡住机器人。"
        ),
        "sent_title": "请查收确认邮件",
        "sent_lead": (
            "如果这个地址能收到我们的邮件，一封确认邮件正在发往那里。点开邮件里的链接即可完成订"
            "阅；在你确认之前，我们不会再发任何邮件。"
        ),
        "sent_where": (
            "请在收件箱里查找来自 {sender} 的邮件，几分钟内会到；如果没看到，也请看看垃圾邮件或"
            "「推广」文件夹。"
        ),
        "sent_already": "如果你已经订阅过，就不会再收到确认邮件，通讯照常寄出。",
        "try_again_title": "请再试一次",
        "try_again_lead": "表单已过期或没有完成准备。请刷新页面后重新提交。",
        "bad_address_lead": "这不是一个可用的邮箱地址：{reason}",
        "domain_invalid": "地址的写法不对",
        "domain_blocked": "{domain} 的地址不能在这里订阅",
        "domain_disposable": "{domain} 提供的是一次性邮箱",
        "domain_missing": "域名 {domain} 不存在",
        "domain_null-mx": "{domain} 声明不接收任何邮件",
        "domain_no-mail": "{domain} 没有可以投递邮件的服务器",
        "slow_down_title": "请稍后再试",
        "slow_down_lead": "短时间内的请求太多了。请过几分钟再试。",
        "join_title": "确认订阅",
        "join_lead": "点击下面的按钮，确认订阅「{list}」。",
        "join_button": "确认订阅",
        "joined_title": "订阅成功",
        "joined_lead": "你已订阅「{list}」。下一期会发到你的邮箱。",
        "confirm_left_title": "你已退订",
        "confirm_left_lead": (
            "这个地址已退订「{list}」，这个较早的确认链接不会撤销退订，之后不会再收到邮件。"
            "如果想重新接收，请打开任意一期邮件底部的退订链接，在那个页面上点「重新订阅」。"
        ),
        "confirm_stopped_title": "未订阅",
        "confirm_stopped_lead": (
            "「{list}」已停止向这个地址发信：由编辑停止，或因为发往这里的邮件被退回或被标记为"
            "垃圾邮件。确认不会改变这一点，之后不会收到邮件。如需重新接收，请回复任意一期邮件联系我们。"
        ),
        "link_expired_title": "链接已过期",
        "link_expired_lead": "这个确认链接已经过期。请重新订阅，我们会发一封新的确认邮件。",
        "link_invalid_lead": "这个链接无效、不完整或已被改动。请使用邮件里的链接，或重新订阅。",
        "link_stale_lead": (
            "这个链接已被更新的一封邮件取代，或订阅已被取消。请使用最近一封邮件里的链接。"
        ),
        "link_used_title": "链接已使用过",
        "link_used_lead": "这个更改地址的链接已经用过一次，这次没有做任何更改。",
        "manage_link": "管理订阅",
        "prefs_title": "管理订阅",
        "prefs_lead": "选择这个地址要接收的通讯。",
        "prefs_save": "保存",
        "prefs_saved": "已保存。",
        "prefs_change_title": "更换邮箱地址",
        "prefs_change_lead": "我们会先给新地址发一封确认邮件；确认之后，通讯改寄到新地址。",
        "prefs_change_button": "更换地址",
        "prefs_change_sent": "一封确认邮件正在发往新地址。点开其中的链接，更换才会生效。",
        "move_title": "确认新地址",
        "move_lead": "点击下面的按钮，把订阅改到这个地址。",
        "move_button": "确认更换",
        "moved_title": "地址已更换",
        "moved_lead": "以后的通讯会寄到这个地址。",
    },
    "en": {
        "archive": "Archive",
        "dead_link": "link dead",
        "dead_link_moved": "link dead; now at",
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
        "signup_off_lead": "This newsletter takes no signups yet.",
        "bad_request_title": "Bad request",
        "bad_request_lead": "The server cannot handle this request.",
        "too_large_title": "Request too large",
        "too_large_lead": "The request is larger than this server accepts.",
        "error_title": "Something went wrong",
        "error_lead": "The server had a problem and your request was not completed. Please try "
        "again later.",
        "back_to_archive": "Back to the archive",
        "subscribe_link": "Subscribe",
        "signup_title": "Subscribe to {name}",
        "signup_lead": "Leave your address and each new issue comes to your inbox.",
        "signup_list": "Which newsletter",
        "signup_email": "Email address",
        "signup_button": "Subscribe",
        "signup_consent": "I agree that {name} may send its newsletter to this address. Every "
        "email has a one-click unsubscribe link.",
        "signup_working": "Preparing the form (a few seconds of work that keeps robots out)…",
        "signup_failed": "The form could not be prepared. Reload the page to try again.",
        "signup_needs_script": "This form needs JavaScript: your browser does a little work "
        "that keeps robots out.",
        "sent_title": "Check your inbox",
        "sent_lead": "If this address can receive our mail, a confirmation is on its way to it. "
        "Follow the link in it to confirm; until you do, nothing else is sent.",
        "sent_where": "Look for a mail from {sender} in your inbox within a few minutes; if it "
        "is not there, look in the spam or promotions folder too.",
        "sent_already": "Already subscribed? Then no confirmation comes, and the newsletter "
        "keeps coming as before.",
        "try_again_title": "Please try again",
        "try_again_lead": "The form expired or was not ready. Reload the page and send it again.",
        "bad_address_lead": "This is not an address mail can reach: {reason}",
        "domain_invalid": "it is not written as an address",
        "domain_blocked": "addresses at {domain} cannot subscribe here",
        "domain_disposable": "{domain} hands out disposable addresses",
        "domain_missing": "{domain} does not exist",
        "domain_null-mx": "{domain} accepts no mail",
        "domain_no-mail": "{domain} has no server that takes mail",
        "slow_down_title": "Please wait a moment",
        "slow_down_lead": "Too many requests in a short time. Try again in a few minutes.",
        "join_title": "Confirm your subscription",
        "join_lead": "Press the button to confirm your subscription to {list}.",
        "join_button": "Confirm",
        "joined_title": "Subscribed",
        "joined_lead": "You are subscribed to {list}. The next issue comes to your inbox.",
        "confirm_left_title": "You unsubscribed",
        "confirm_left_lead": "This address unsubscribed from {list}, and this older confirmation "
        "link does not undo that: nothing more comes. To receive it again, open the unsubscribe "
        "link at the foot of any issue and press Re-subscribe there.",
        "confirm_stopped_title": "Not subscribed",
        "confirm_stopped_lead": "Mail from {list} to this address was stopped, by the editor or "
        "because mail to it bounced or was marked as spam. Confirming does not change that, and "
        "nothing comes. To receive it again, reply to any issue to reach us.",
        "link_expired_title": "This link has expired",
        "link_expired_lead": "This confirmation link has expired. Sign up again and a new "
        "confirmation comes.",
        "link_invalid_lead": "This link is invalid, incomplete or was altered. Use the link in "
        "the email, or sign up again.",
        "link_stale_lead": "A newer email replaced this link, or the subscription was cancelled. "
        "Use the link in the most recent email.",
        "link_used_title": "This link was used already",
        "link_used_lead": "This address-change link was used once already: nothing was changed "
        "now.",
        "manage_link": "Manage your subscription",
        "prefs_title": "Manage your subscription",
        "prefs_lead": "Choose what this address receives.",
        "prefs_save": "Save",
        "prefs_saved": "Saved.",
        "prefs_change_title": "Change your address",
        "prefs_change_lead": "The new address gets a confirmation first; once it is confirmed, "
        "the newsletter goes there instead.",
        "prefs_change_button": "Change address",
        "prefs_change_sent": "A confirmation is on its way to the new address. The change takes "
        "effect once you follow its link.",
        "move_title": "Confirm your new address",
        "move_lead": "Press the button to move your subscription to this address.",
        "move_button": "Confirm",
        "moved_title": "Address changed",
        "moved_lead": "From now on the newsletter comes to this address.",
    },
}


# The words of the site's own mail: confirmations, welcome mails, address changes. None of them
# holds anything a visitor typed (no name, no address): a form cannot put text in front of the
# person whose address it names.
SITE_MAIL: dict[str, dict[str, str]] = {
    "zh": {
        "confirm_subject": "请确认订阅{name}",
        "confirm_heading": "确认订阅",
        "confirm_lead": (
            "有人在{name}的网站上用这个地址订阅了「{list}」。如果是你，请点击下面的按钮确认。"
        ),
        "confirm_button": "确认订阅",
        "confirm_ignore": "如果不是你，请忽略这封邮件：不确认，我们就不会再发邮件到这个地址。",
        "expiry": "链接在 {hours} 小时内有效。",
        "welcome_subject": "欢迎订阅{name}",
        "welcome_heading": "欢迎！",
        "welcome_lead": "你已订阅「{list}」。新一期发布时会寄到这个地址。",
        "welcome_archive": "往期内容在这里：",
        "change_subject": "请确认{name}的新地址",
        "change_heading": "确认新地址",
        "change_lead": "有人要求把「{list}」的订阅改到这个地址。如果是你，请点击下面的按钮确认。",
        "change_button": "确认新地址",
        "change_ignore": "如果不是你，请忽略这封邮件：地址不会被更改。",
        "footer_signup": "你收到这封邮件，是因为这个地址被填写在{name}的订阅表单里。",
        "stop": "不要再给我发邮件",
        "link_fallback": "按钮无法点击时，请打开这个链接：",
    },
    "en": {
        "confirm_subject": "Confirm your subscription to {name}",
        "confirm_heading": "Confirm your subscription",
        "confirm_lead": "This address was entered on {name}'s site to subscribe to {list}. If "
        "that was you, press the button to confirm.",
        "confirm_button": "Confirm subscription",
        "confirm_ignore": "If it was not you, ignore this mail: without a confirmation, nothing "
        "more is sent to this address.",
        "expiry": "The link works for {hours} hours.",
        "welcome_subject": "Welcome to {name}",
        "welcome_heading": "Welcome!",
        "welcome_lead": "You are subscribed to {list}. Each new issue comes to this address.",
        "welcome_archive": "Earlier issues are here:",
        "change_subject": "Confirm your new address for {name}",
        "change_heading": "Confirm your new address",
        "change_lead": "Someone asked to move the subscription to {list} to this address. If "
        "that was you, press the button to confirm.",
        "change_button": "Confirm new address",
        "change_ignore": "If it was not you, ignore this mail: nothing changes.",
        "footer_signup": "You receive this email because this address was entered on the "
        "signup form of {name}.",
        "stop": "Do not email me again",
        "link_fallback": "If the button does not work, open this link:",
    },
}


# How `check` and the preview quote the newsletter's own words (a title) in a finding.
FINDINGS: dict[str, dict[str, str]] = {
    "zh": {"quoted": "「{text}」"},
    "en": {"quoted": "“{text}”"},
}


# A new issue's title when the last one's does not carry its number (`newsletter new`).
ISSUE_TITLE: dict[str, dict[str, str]] = {
    "zh": {"title": "{name}第{number}期"},
    "en": {"title": "{name} {number}"},
}

# The email's font stacks by the language's script ("all" for every client, "outlook" for
# Outlook desktop, which takes the first family only). A CJK font draws Latin quotes and
# apostrophes full-width ("It’ s"), so a Latin-script newsletter (English, and any language
# without a table) names its Latin fonts first and the CJK ones after, for the Chinese words it
# quotes; Chinese names its CJK fonts first, whose punctuation is the full-width its readers
# expect.
FONT_STACKS: dict[str, dict[str, str]] = {
    "zh": {
        "all": "-apple-system, BlinkMacSystemFont, 'PingFang SC', 'Hiragino Sans GB', "
        "'Microsoft YaHei', 'Noto Sans CJK SC', 'Source Han Sans SC', 'Segoe UI', "
        "'Helvetica Neue', Arial, sans-serif",
        "outlook": "'Microsoft YaHei', 'Segoe UI', Arial, sans-serif",
    },
    "en": {
        "all": "-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, "
        "'PingFang SC', 'Microsoft YaHei', 'Noto Sans CJK SC', sans-serif",
        "outlook": "'Segoe UI', Arial, sans-serif",
    },
}


def quote(text: str, language: str) -> str:
    """`text` in the quotation marks of `language` (English ones for a language without)."""
    return strings_for(FINDINGS, language)["quoted"].replace("{text}", text)


def primary(language: str) -> str:
    """'zh-CN' -> 'zh': the part of a language tag the tables are keyed by."""
    return language.split("-")[0].lower()


def translation_problem(language: str) -> str | None:
    """Why the tool's own words cannot be in `language` (None: they can)."""
    if primary(language) in TRANSLATED:
        return None
    known = ", ".join(f"{tag} ({name})" for tag, name in TRANSLATED.items())
    return (
        f"{language!r}: newsletter's own words (the email's footer, its pages) have no "
        f"translation in it; the languages it has: {known}"
    )


def has_strings(table: Table, language: str) -> bool:
    return primary(language) in table


def strings_for(table: Table, language: str, *, name: str | None = None) -> dict[str, str]:
    """The table's words for `language` (English if it has none), `{name}` filled if given."""
    words = table.get(primary(language), table["en"])
    if name is None:
        return dict(words)
    return {key: value.replace("{name}", name) for key, value in words.items()}
