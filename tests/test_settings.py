"""newsletter.toml + NEWSLETTER_* environment -> Settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsletter.errors import ConfigError
from newsletter.settings import load_settings


def test_shipped_config_loads(project: Path) -> None:
    settings = load_settings(project / "newsletter.toml", environ={})
    assert settings.newsletter.name == "AI系统内容推荐"
    assert settings.newsletter.language == "zh-CN"
    assert settings.render.inliner == "css-inline"
    assert settings.issues_dir == project / "issues"
    assert settings.mailing_list("staging").staging is True
    assert settings.secret is None


def test_environment_overrides_any_key(project: Path) -> None:
    settings = load_settings(
        project / "newsletter.toml",
        environ={
            "NEWSLETTER_SMTP__PORT": "2525",
            "NEWSLETTER_RENDER__INLINER": "premailer",
            "NEWSLETTER_LISTS__MAIN__PATH": "all.csv",
            "NEWSLETTER_SECRET": "s3cret",
        },
    )
    assert settings.smtp.port == 2525
    assert settings.render.inliner == "premailer"
    assert settings.lists["main"].path == Path("all.csv")
    assert settings.secret is not None
    assert settings.secret.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(settings)
    assert "s3cret" not in str(settings.model_dump())


def test_secrets_in_the_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('secret = "abc"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert "`secret` must not be stored in the file" in info.value.message
    assert "NEWSLETTER_SECRET" in info.value.hint


def test_bad_value_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[newsletter]\nname = "x"\n\n[smtp]\nport = "many"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert info.value.message.startswith(f"{path}:5: smtp.port: ")


def test_unknown_key_and_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text("[render]\ninliner = 'premailer'\ninlner = 'x'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"newsletter.toml:3: render.inlner: Extra inputs"):
        load_settings(path, environ={})
    path.write_text("[render\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(path, environ={})


def test_unknown_list_says_which_exist(project: Path) -> None:
    settings = load_settings(project / "newsletter.toml", environ={})
    expected = r"no list named 'nope' in the config \(lists: main, staging\)"
    with pytest.raises(ConfigError, match=expected):
        settings.mailing_list("nope")


def test_explicit_missing_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_settings(tmp_path / "missing.toml", environ={})


def config_error(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ=environ or {})
    return info.value.message


def test_a_bad_value_from_the_environment_names_its_variable(project: Path) -> None:
    # issue 13.10: NEWSLETTER_SMTP__PORT=abc was blamed on newsletter.toml's port line.
    message = config_error(project / "newsletter.toml", {"NEWSLETTER_SMTP__PORT": "abc"})
    assert message.startswith("NEWSLETTER_SMTP__PORT: smtp.port: Input should be a valid integer")
    assert "newsletter.toml" not in message


@pytest.mark.parametrize("var", ["NEWSLETTER_SECRET", "NEWSLETTER_SMTP_PASSWORD"])
def test_a_secret_that_is_not_utf8_names_its_variable_not_its_value(
    project: Path, var: str
) -> None:
    # issue 13.7: os.environ hands undecodable bytes over as surrogates.
    value = b"s3cr\xffet-long-enough-value".decode("utf-8", "surrogateescape")
    message = config_error(project / "newsletter.toml", {var: value})
    assert message == f"{var}: the value is not valid UTF-8 text"


def test_a_non_utf8_override_names_its_variable(project: Path) -> None:
    value = b"smtp\xff.example.org".decode("utf-8", "surrogateescape")
    message = config_error(project / "newsletter.toml", {"NEWSLETTER_SMTP__HOST": value})
    assert message == "NEWSLETTER_SMTP__HOST: the value is not valid UTF-8 text"


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("base_url", "javascript:alert(1)//", "must be an http:// or https:// address"),
        ("base_url", "https://news.example.org/?x=1", "must be an http:// or https:// address"),
        ("base_url", "https://", "must be an http:// or https:// address"),
        ("sender", "a@x.org, b@y.org", "names more than one address"),
        ("reply_to", "Chen, Alice <a@x.org>", "names more than one address"),
        ("language", "en\r\nX-Injected: 1", "is not a language tag such as en or zh-CN"),
        ("language", "zh CN", "is not a language tag such as en or zh-CN"),
    ],
)
def test_unusable_newsletter_values_are_refused_at_their_line(
    tmp_path: Path, key: str, value: str, reason: str
) -> None:
    path = tmp_path / "newsletter.toml"
    quoted = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\r").replace("\n", "\\n")
    )
    path.write_text(f'[newsletter]\nname = "x"\n{key} = "{quoted}"\n', encoding="utf-8")
    message = config_error(path)
    assert message.startswith(f"{path}:3: newsletter.{key}: ")
    assert reason in message


def test_usable_newsletter_values_still_load(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text(
        "[newsletter]\n"
        'sender = "\\"Chen, Alice\\" <a@x.org>"\n'
        'base_url = "https://example.org/news"\n'
        'language = "zh-Hans-CN"\n',
        encoding="utf-8",
    )
    settings = load_settings(path, environ={})
    assert settings.newsletter.sender == '"Chen, Alice" <a@x.org>'


def test_outbox_defaults_to_the_sqlite_file_in_the_state_folder(project: Path) -> None:
    settings = load_settings(project / "newsletter.toml", environ={})
    assert settings.outbox_target == project / ".newsletter" / "outbox.sqlite3"
    other = load_settings(
        project / "newsletter.toml", environ={"NEWSLETTER_OUTBOX__URL": "sqlite:///log/nl.db"}
    )
    assert other.outbox_target == other.database == project / "log" / "nl.db"


def test_outbox_url_from_the_environment_may_carry_the_password(project: Path) -> None:
    url = "postgresql://nl:pw-from-env@127.0.0.1:5432/nl"
    settings = load_settings(project / "newsletter.toml", environ={"NEWSLETTER_OUTBOX__URL": url})
    assert settings.outbox_target == url


def test_outbox_password_in_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[outbox]\nurl = "postgresql://nl:hunter2@db/nl"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert "must not hold the database password" in info.value.message
    assert "hunter2" not in info.value.message
    assert "PGPASSWORD" in info.value.hint
    path.write_text('[outbox]\nurl = "postgresql://nl@db/nl"\n', encoding="utf-8")
    assert load_settings(path, environ={}).outbox_target == "postgresql://nl@db/nl"


def test_outbox_url_with_an_unknown_scheme_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[outbox]\nurl = "mysql://db/nl"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert info.value.message.startswith(f"{path}:2: outbox.url: ")
    assert "postgresql://" in info.value.message
