"""newsletter.toml + NEWSLETTER_* environment -> Settings."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from newsletter.config.settings import load_settings
from newsletter.errors import ConfigError


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


def test_a_list_setting_is_set_from_the_environment_as_commas_or_json(project: Path) -> None:
    """A list is no string: NEWSLETTER_CHECK__NAMESERVERS once failed validation whatever it
    held. Commas, a JSON array (pydantic-settings' form), and an IPv6 entry that looks like one."""
    settings = load_settings(
        project / "newsletter.toml",
        environ={
            "NEWSLETTER_CHECK__NAMESERVERS": "127.0.0.1:5353, [::1]:53",
            "NEWSLETTER_SIGNUP__NAMESERVERS": '["10.0.0.2", "10.0.0.3:5300"]',
            "NEWSLETTER_CHECK__LINK_SKIP": "example.com",
        },
    )
    assert settings.check.nameservers == ["127.0.0.1:5353", "[::1]:53"]
    assert settings.signup.nameservers == ["10.0.0.2", "10.0.0.3:5300"]
    assert settings.check.link_skip == ["example.com"]
    with pytest.raises(ConfigError, match=r"^NEWSLETTER_CHECK__NAMESERVERS: check\.nameservers"):
        load_settings(project / "newsletter.toml", environ={"NEWSLETTER_CHECK__NAMESERVERS": "x"})


def test_secrets_in_the_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('secret = "abc"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert "`secret` must not be stored in the file" in info.value.message
    assert "NEWSLETTER_SECRET" in info.value.hint


def test_the_secret_file_is_read_when_the_environment_has_none(tmp_path: Path) -> None:
    """Issue 32.3: .newsletter/secret under the project root, as `newsletter init` keeps it,
    is the second source; NEWSLETTER_SECRET still wins; an unusable file is named."""
    config = tmp_path / "newsletter.toml"
    config.write_text("", encoding="utf-8")
    assert load_settings(config, environ={}).secret is None
    (tmp_path / ".newsletter").mkdir()
    (tmp_path / ".newsletter" / "secret").write_text("from-the-file-0123456789\n", encoding="utf-8")
    secret = load_settings(config, environ={}).secret
    assert secret is not None
    assert secret.get_secret_value() == "from-the-file-0123456789"
    environ = {"NEWSLETTER_SECRET": "from-the-environment-0123"}
    secret = load_settings(config, environ=environ).secret
    assert secret is not None
    assert secret.get_secret_value() == "from-the-environment-0123"
    (tmp_path / ".newsletter" / "secret").chmod(0o644)  # restored from a backup, say
    load_settings(config, environ={})
    assert stat.S_IMODE((tmp_path / ".newsletter" / "secret").stat().st_mode) == 0o640
    (tmp_path / ".newsletter" / "secret").write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"secret: the project's secret is too short \(0 ") as e:
        load_settings(config, environ={})
    assert "backup" in e.value.hint


def test_bad_value_names_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[newsletter]\nname = "x"\n\n[smtp]\nport = "many"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert info.value.message.startswith(f"{path}:5: smtp.port: ")


def test_unknown_key_and_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text("[render]\ninliner = 'premailer'\ninlner = 'x'\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"newsletter.toml:3: render.inlner: is not a known setting"
    ):
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
    assert settings.database_target == project / ".newsletter" / "outbox.sqlite3"
    other = load_settings(
        project / "newsletter.toml", environ={"NEWSLETTER_OUTBOX__URL": "sqlite:///log/nl.db"}
    )
    assert other.database_target == other.database == project / "log" / "nl.db"


def test_outbox_url_from_the_environment_may_carry_the_password(project: Path) -> None:
    url = "postgresql://nl:pw-from-env@127.0.0.1:5432/nl"
    settings = load_settings(project / "newsletter.toml", environ={"NEWSLETTER_OUTBOX__URL": url})
    assert settings.database_target == url


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://nl:hunter2@db/nl", "user:PASSWORD@"),
        ("postgresql://db/nl?password=hunter2", "password="),
        ("postgres://db/nl?application_name=nl&password=hunter2", "password="),
        ("postgresql://db/nl?pass%77ord=hunter2", "password="),
        ("postgresql://db/nl? password =hunter2", "password="),
        ("postgresql://db/nl?sslpassword=hunter2", "sslpassword="),
        ("postgresql://db/nl?oauth_client_secret=hunter2", "oauth_client_secret="),
        ("postgresql://db/nl?scram_client_key=hunter2", "scram_client_key="),
    ],
)
def test_a_secret_in_the_outbox_url_of_the_file_is_refused_in_every_form(
    tmp_path: Path, url: str, named: str
) -> None:
    # issue 18.7: only the user:pw@ form was refused.
    path = tmp_path / "newsletter.toml"
    path.write_text(f'[newsletter]\nname = "x"\n\n[outbox]\nurl = "{url}"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert info.value.message == (
        f"{path}:5: outbox.url: must not hold the database password or another secret"
        f" (it has {named})"
    )
    assert "PGPASSWORD" in info.value.hint
    assert "hunter2" not in info.value.message + info.value.hint


def test_an_outbox_url_without_a_secret_loads(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    for url in (
        "postgresql://nl@db/nl",
        "postgresql://nl@db/nl?sslmode=verify-full&passfile=/etc/newsletter/pgpass",
    ):
        path.write_text(f'[outbox]\nurl = "{url}"\n', encoding="utf-8")
        assert load_settings(path, environ={}).database_target == url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql://nl:hun@ter2@db/nl", "has more than one @ before the database name"),
        ("postgresql://db?password=hun@ter2", "has an @ after its ?"),
    ],
)
def test_an_outbox_url_libpq_would_misread_is_refused_without_its_secret(
    project: Path, url: str, reason: str
) -> None:
    message = config_error(project / "newsletter.toml", {"NEWSLETTER_OUTBOX__URL": url})
    assert message.startswith(f"NEWSLETTER_OUTBOX__URL: outbox.url: {reason}")
    assert "hun" not in message
    assert "ter2" not in message


def test_outbox_url_with_an_unknown_scheme_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[outbox]\nurl = "mysql://db/nl"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert info.value.message.startswith(f"{path}:2: outbox.url: ")
    assert "postgresql://" in info.value.message


# -- the environment's names (issue 18.13) ---------------------------------------------------------


def test_a_variable_name_that_is_not_utf8_is_named_not_blamed_on_the_file(project: Path) -> None:
    # It was `newsletter.toml:33: smtp: Input should be a valid string`.
    name = b"NEWSLETTER_SMTP__\xff".decode("utf-8", "surrogateescape")
    message = config_error(project / "newsletter.toml", {name: "1"})
    assert message == "NEWSLETTER_SMTP__\\xff: the variable's name is not valid UTF-8 text"


@pytest.mark.parametrize(
    ("var", "expected"),
    [
        # It was `newsletter.toml: bogus: Extra inputs are not permitted`.
        ("NEWSLETTER_BOGUS__X", "NEWSLETTER_BOGUS__X: bogus: is not a known setting"),
        ("NEWSLETTER_SMTP__HOSTT", "NEWSLETTER_SMTP__HOSTT: smtp.hostt: is not a known setting"),
        ("NEWSLETTER_LISTS__MAIN__PAHT", "NEWSLETTER_LISTS__MAIN__PAHT: lists.main.paht: is not"),
        ("NEWSLETTER_SMTP____HOST", "NEWSLETTER_SMTP____HOST: the name has an empty key"),
        ("NEWSLETTER_SMTP__", "NEWSLETTER_SMTP__: the name has an empty key"),
    ],
)
def test_a_bad_variable_name_is_reported_under_that_name(
    project: Path, var: str, expected: str
) -> None:
    message = config_error(project / "newsletter.toml", {var: "1"})
    assert message.startswith(expected)
    assert "newsletter.toml" not in message


def test_a_table_the_file_has_is_still_the_files_even_with_a_variable_below_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[newsletter]\nname = "x"\n\n[bogus]\ny = 1\n', encoding="utf-8")
    message = config_error(path, {"NEWSLETTER_BOGUS__X": "1"})
    assert message == f"{path}:4: bogus: is not a known setting (check its spelling)"


# -- placeholder words (issue 18.14) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "line", "field"),
    [
        ('[newsletter]\nname = "News __NL_NAME__"', 2, "newsletter.name"),
        (
            '[newsletter]\ngreeting_fallback = "__NL_UNSUBSCRIBE_URL__"',
            2,
            "newsletter.greeting_fallback",
        ),
        (
            '[newsletter]\nbase_url = "https://evil.example/__NL_UNSUBSCRIBE_URL__"',
            2,
            "newsletter.base_url",
        ),
        ('[lists.main]\npath = "a.csv"\nname = "x __NL_NAME__"', 3, "lists.main.name"),
        ('[check]\nlink_skip = ["a.org", "__NL_WEB_URL__"]', 2, "check.link_skip.1"),
        ('[lists.__NL_NAME__]\npath = "a.csv"', 1, "lists.__NL_NAME__"),
    ],
)
def test_a_placeholder_word_in_the_file_is_refused_at_its_line(
    tmp_path: Path, table: str, line: int, field: str
) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text(table + "\n", encoding="utf-8")
    message = config_error(path)
    assert message.startswith(f"{path}:{line}: {field}: contains __NL_")
    assert "words starting with __NL_ are filled in per reader" in message


def test_a_placeholder_word_from_the_environment_names_its_variable(project: Path) -> None:
    env = {"NEWSLETTER_NEWSLETTER__SENDER": "__NL_NAME__ <a@example.org>"}
    message = config_error(project / "newsletter.toml", env)
    assert message.startswith(
        "NEWSLETTER_NEWSLETTER__SENDER: newsletter.sender: contains __NL_NAME__:"
    )


def test_every_placeholder_word_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "newsletter.toml"
    path.write_text('[newsletter]\nname = "__NL_A"\nsample_name = "__NL_B"\n', encoding="utf-8")
    assert config_error(path).splitlines() == [
        f"{path}:2: newsletter.name: contains __NL_A: words starting with __NL_ are filled in"
        " per reader (with their name or unsubscribe link); remove it",
        f"{path}:3: newsletter.sample_name: contains __NL_B: words starting with __NL_ are"
        " filled in per reader (with their name or unsubscribe link); remove it",
    ]


def test_one_underscore_after_a_table_is_refused_not_ignored(project: Path) -> None:
    # NEWSLETTER_SMTP_HOST=mx.example.org was silently unused: the send went to the file's host.
    with pytest.raises(ConfigError) as caught:
        load_settings(project / "newsletter.toml", environ={"NEWSLETTER_SMTP_HOST": "mx.test"})
    assert str(caught.value).startswith("NEWSLETTER_SMTP_HOST: not a setting")
    assert caught.value.hint == "Name it NEWSLETTER_SMTP__HOST, or unset it."
    # The secrets and variables that are not settings keep their single underscores.
    environ = {
        "NEWSLETTER_SMTP_PASSWORD": "pw",
        "NEWSLETTER_SECRET_PREVIOUS": "old",
        "NEWSLETTER_CHROMIUM": "/bin/true",
        "NEWSLETTER_PG_BIN": "/bin",
    }
    load_settings(project / "newsletter.toml", environ=environ)
