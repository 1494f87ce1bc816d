"""What a command worked out from the templates is kept for the user's next command: compiled
templates and the markers check's parse, in a private folder of the user's cache, and never
from a folder others could write."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest

from newsletter.checks import markers
from newsletter.config.settings import Settings
from newsletter.rendering.templatecache import CompiledTemplates
from newsletter.state import usercache


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def environment(folder: Path, cache: CompiledTemplates) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        bytecode_cache=cache,
    )


def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names Jinja compiles from here on."""
    seen: list[str] = []
    real = jinja2.Environment.compile

    def counted(self: jinja2.Environment, source: str, name: str | None = None, *a, **k):  # type: ignore[no-untyped-def]
        seen.append(str(name))
        return real(self, source, name, *a, **k)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)
    return seen


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "issue.txt").write_text(text, encoding="utf-8")
    return folder


def test_a_new_process_reuses_what_the_last_compiled_and_names_its_own_file(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = compiles(monkeypatch)
    first = write(tmp_path / "a", "Hello {{ name }}\n{{ missing.x }}")
    second = write(tmp_path / "b", "Hello {{ name }}\n{{ missing.x }}")
    # Two processes: each its own cache object, the same user's folder.
    env_a = environment(first, CompiledTemplates("test"))
    with pytest.raises(jinja2.UndefinedError):
        env_a.get_template("issue.txt").render(name="x")
    assert seen == ["issue.txt"]
    env_b = environment(second, CompiledTemplates("test"))
    template = env_b.get_template("issue.txt")
    assert seen == ["issue.txt"], "compiled again though the text is the same"
    # The code compiled in a/ says it is b/'s file: a render error names the editor's template.
    assert template.filename == str(second / "issue.txt")
    try:
        template.render(name="x")
    except jinja2.UndefinedError as exc:
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_filename)
            tb = tb.tb_next
    assert str(second / "issue.txt") in frames
    assert str(first / "issue.txt") not in frames
    # Another text, or another set-up of the Environment, is compiled anew.
    write(second, "Bye {{ name }}")
    environment(second, CompiledTemplates("test")).get_template("issue.txt")
    environment(first, CompiledTemplates("other set-up")).get_template("issue.txt")
    assert seen == ["issue.txt"] * 3
    folder = cache_home / "newsletter" / "templates"
    assert oct(folder.stat().st_mode & 0o777) == oct(0o700)
    assert {oct(p.stat().st_mode & 0o777) for p in folder.iterdir()} == {oct(0o600)}


def test_a_torn_file_is_compiled_again(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = compiles(monkeypatch)
    folder = write(tmp_path / "a", "Hello {{ name }}")
    environment(folder, CompiledTemplates("test")).get_template("issue.txt")
    for kept in (cache_home / "newsletter" / "templates").iterdir():
        kept.write_bytes(kept.read_bytes()[:7])
    template = environment(folder, CompiledTemplates("test")).get_template("issue.txt")
    assert template.render(name="you") == "Hello you"
    assert seen == ["issue.txt", "issue.txt"]


@pytest.mark.parametrize("loose", ["newsletter", "newsletter/templates"])
def test_a_folder_others_may_write_is_not_used(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loose: str
) -> None:
    seen = compiles(monkeypatch)
    folder = write(tmp_path / "a", "Hello {{ name }}")
    environment(folder, CompiledTemplates("test")).get_template("issue.txt")
    (cache_home / loose).chmod(0o777)
    # Another user could have put code there: it is neither loaded nor written to.
    environment(folder, CompiledTemplates("test")).get_template("issue.txt")
    assert seen == ["issue.txt", "issue.txt"]
    assert usercache.load("templates", "anything") is None
    before = sorted((cache_home / "newsletter" / "templates").iterdir())
    usercache.keep("templates", "new", b"x")
    assert sorted((cache_home / "newsletter" / "templates").iterdir()) == before


def test_no_folder_to_be_had_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    usercache.keep("templates", "key", b"data")
    assert usercache.load("templates", "key") is None
    # A relative XDG_CACHE_HOME is ignored, as the XDG rule says: ~/.cache is used.
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    assert usercache.root() == Path.home() / ".cache" / "newsletter"


def test_the_oldest_answers_go_first(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usercache, "KEPT", 4)
    for number in range(5):
        usercache.keep("k", f"key {number}", str(number).encode())
        path = next(
            p
            for p in (cache_home / "newsletter" / "k").iterdir()
            if p.read_bytes() == str(number).encode()
        )
        os.utime(path, (number, number))
    # Past KEPT, the oldest go until half are left.
    assert usercache.load("k", "key 0") is None
    assert usercache.load("k", "key 1") is None
    assert usercache.load("k", "key 4") == b"4"
    assert len(list((cache_home / "newsletter" / "k").iterdir())) == 2


def test_the_markers_parse_is_kept_for_the_next_process(
    cache_home: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    parses: list[str] = []
    real = jinja2.Environment.parse

    def counted(self: jinja2.Environment, source: str, *a, **k):  # type: ignore[no-untyped-def]
        parses.append(source)
        return real(self, source, *a, **k)

    monkeypatch.setattr(jinja2.Environment, "parse", counted)
    markers._references.cache_clear()
    markers._literal_markers.cache_clear()
    raw = "{% raw %}{{ left }}{% endraw %}\n"
    template = settings.templates_dir / "issue.txt"
    template.write_text(raw + template.read_text(encoding="utf-8"), encoding="utf-8")
    first = markers.check_markers(settings, "<p>x</p>")
    assert parses, "the first check parses the templates"
    assert any("issue.txt:1" in f.message for f in first)
    # A new process: nothing in its memory, the user's folder has the answers.
    parses.clear()
    markers._references.cache_clear()
    markers._literal_markers.cache_clear()
    again = markers.check_markers(settings, "<p>x</p>")
    assert parses == []
    assert [f.message for f in again] == [f.message for f in first]
