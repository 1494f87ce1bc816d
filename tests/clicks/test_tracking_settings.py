"""`[tracking]` and `[privacy]`: off and minimal by default, validated, overridable."""

from __future__ import annotations

from pathlib import Path

import pytest

from newsletter.clicks.rules import Windows
from newsletter.config.settings import Settings, load_settings
from newsletter.errors import ConfigError


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "newsletter.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_tracking_is_off_and_privacy_strict_by_default() -> None:
    settings = Settings()
    assert settings.tracking.clicks == "off"
    assert (settings.privacy.min_count, settings.privacy.retention_days) == (5, 180)
    assert settings.privacy.ip == "truncate"
    assert Windows.from_settings(settings.tracking) == Windows(10.0, 10.0, 2.0)


def test_the_tables_are_read(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        '[tracking]\nclicks = "per-reader"\nburst_window = 1.5\n'
        '[privacy]\nmin_count = 10\nretention_days = 30\nip = "none"\n',
    )
    settings = load_settings(path, environ={})
    assert settings.tracking.clicks == "per-reader"
    assert Windows.from_settings(settings.tracking).burst == 1.5
    assert (settings.privacy.min_count, settings.privacy.retention_days) == (10, 30)
    assert settings.privacy.ip == "none"


def test_the_environment_overrides(tmp_path: Path) -> None:
    settings = load_settings(
        config(tmp_path, ""),
        environ={"NEWSLETTER_TRACKING__CLICKS": "aggregate", "NEWSLETTER_PRIVACY__IP": "hash"},
    )
    assert (settings.tracking.clicks, settings.privacy.ip) == ("aggregate", "hash")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[tracking]\nclicks = "on"\n', "tracking.clicks"),
        ("[tracking]\nburst_window = -1\n", "tracking.burst_window"),
        ("[privacy]\nmin_count = 0\n", "privacy.min_count"),
        ('[privacy]\nip = "full"\n', "privacy.ip"),
        ("[privacy]\nretention = 30\n", "privacy.retention"),
    ],
)
def test_a_bad_value_is_named_with_its_line(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(config(tmp_path, text), environ={})
    assert named in caught.value.message
    assert ":2:" in caught.value.message or "line 2" in caught.value.message
