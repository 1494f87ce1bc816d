"""A project copy set up for the online checks: its sender, DKIM key, [check] table (which allows
the loopback addresses the test servers are on) and an issue whose links all point at them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

from support.dkimkeys import pem


def configure(
    root: Path,
    *,
    nameserver: str,
    base_url: str,
    ca_file: Path | None = None,
    sender_domain: str = "news.good.example",
    dkim_key: rsa.RSAPrivateKey | None = None,
    online: bool = False,
    reply_to: str = "",
    selector: str = "nl",
    allow_private: str | None = "true",
) -> None:
    """`allow_private`: the TOML value of `[check] allow_private`; None leaves the key out."""
    config = root / "newsletter.toml"
    text = config.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^sender = .*$", f'sender = "AI系统内容推荐 <digest@{sender_domain}>"', text)
    text = re.sub(r"(?m)^base_url = .*$", f'base_url = "{base_url}"', text)
    if reply_to:
        text = text.replace("[newsletter]\n", f'[newsletter]\nreply_to = "{reply_to}"\n', 1)
    text += (
        f'\n[check]\nonline = {str(online).lower()}\nnameservers = ["{nameserver}"]\ntimeout = 2\n'
    )
    if allow_private is not None:  # the test servers are on 127.0.0.1, refused by default
        text += f"allow_private = {allow_private}\n"
    if ca_file is not None:
        text += f'ca_file = "{ca_file}"\n'
    if dkim_key is not None:
        (root / "dkim.pem").write_bytes(pem(dkim_key))
        text += f'\n[dkim]\ndomain = "{sender_domain}"\nselector = "{selector}"\n'
        text += 'private_key = "dkim.pem"\n'
    config.write_text(text, encoding="utf-8")


def write_issue(root: Path, number: int, links: dict[str, list[str]]) -> Path:
    """issues/NUMBER.yaml with one item per title in `links`, in one section 项目."""
    items = [
        {"title": title, "links": [{"label": f"链接{n}", "url": url} for n, url in enumerate(urls)]}
        for title, urls in links.items()
    ]
    data = {
        "number": number,
        "title": f"测试第{number}期",
        "sections": [{"title": "项目", "items": items}],
    }
    path = root / "issues" / f"{number}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path
