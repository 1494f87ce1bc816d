"""The package layout docs/layout.md describes is the one the code has: imports go one way, no
cycles, no module over the size limit, and its tree names every module."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "newsletter"
LAYOUT = (Path(__file__).resolve().parents[1] / "docs" / "layout.md").read_text(encoding="utf-8")
MAX_LINES = 400

# docs/layout.md: each layer may import the layers above it, and within a layer only its own
# package. The shared ground first, the command line last.
LAYERS: list[set[str]] = [
    {"errors", "distribution", "markup", "formats", "fields", "links", "days"},
    {"state"},
    {"silence"},
    {"i18n"},
    {"config"},
    {"content"},
    {"models"},
    {"issues", "setup"},
    {"importers"},
    {"rendering"},
    {"checks"},
    {"database"},
    {"bounces"},
    {"webhooks"},
    {"mail", "spreadsheet"},
    {"clicks"},
    {"draft"},
    {"context"},
    {"review"},
    {"preflight"},
    {"gate"},
    {"signup"},
    {"send"},
    {"schedule"},
    {"sequences"},
    {"subjects"},
    {"api"},
    {"worker"},
    {"doctor"},
    {"web"},
    {"cli"},
]
ENTRY_POINTS = {"__init__", "__main__"}


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        yield ".".join(parts), path


def imports(path: Path) -> set[str]:
    """Every `newsletter.*` module the file imports, function-local imports included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "newsletter":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("newsletter."):
                base = node.module.removeprefix("newsletter.")
                found.add(base)
                # `from newsletter.send import run` imports the module send.run
                found |= {
                    f"{base}.{a.name}"
                    for a in node.names
                    if (PACKAGE / base / f"{a.name}.py").exists()
                }
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix("newsletter.")
                for a in node.names
                if a.name.startswith("newsletter.")
            }
    return found


def layer(module: str) -> int:
    top = module.split(".")[0]
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and to docs/layout.md")


GRAPH = {name: imports(path) for name, path in modules() if name not in ENTRY_POINTS}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_go_one_way(module: str) -> None:
    for imported in GRAPH[module]:
        same_package = imported.split(".")[0] == module.split(".")[0]
        assert layer(imported) < layer(module) or same_package, (
            f"{module} imports {imported}: docs/layout.md lets a layer import only the layers above"
        )


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        if state.get(module) == 1:
            raise AssertionError(" -> ".join([*trail, module]))
        if state.get(module) == 2:
            return
        state[module] = 1
        for imported in GRAPH.get(module, set()):
            if imported in GRAPH and imported != module:
                visit(imported, [*trail, module])
        state[module] = 2

    for module in GRAPH:
        visit(module, [])


def test_the_engine_never_imports_the_layers_that_drive_it() -> None:
    assert not GRAPH["send.engine"] & {"send.coordinator", "send.processes"}
    assert GRAPH["send.processes"] & {"send.coordinator", "send.engine"} == set()


KNOWN_LONG: set[str] = set()


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True)) if name in KNOWN_LONG else name
        for name, _ in modules()
    ],
)
def test_no_module_is_too_long(module: str) -> None:
    """The cap serves cohesion: a module past it is either two concepts, to be split, or one
    that is long by nature, named here with the reason."""
    path = dict(modules())[module]
    if module in ONE_LONG_CONCEPT:
        return
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


# Modules allowed past MAX_LINES, each one concept that splitting would scatter.
ONE_LONG_CONCEPT: dict[str, str] = {
    "config.settings": "the schema of newsletter.toml: one typed class per table, validated "
    "together",
    "mail.message": "one message's bytes: every header field and both parts, checked and filled "
    "per reader on the send's hot path",
    "i18n": "the tool's own words, every surface in every language it has, side by side: a "
    "translator's one file, longer with each language",
    "database.schema": "the database's history: every table of every migration, in order, for both "
    "backends (a migration once shipped is never edited)",
}


def test_long_concepts_are_still_long() -> None:
    """An allowance nobody needs any more is removed, so the list stays honest."""
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules()}
    assert {name for name in ONE_LONG_CONCEPT if lengths.get(name, 0) <= MAX_LINES} == set()


@pytest.mark.slow
def test_every_module_opens_with_a_docstring() -> None:
    missing = [n for n, p in modules() if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


def test_layout_tree_names_every_module_and_no_other() -> None:
    tree = LAYOUT.split("```text", 1)[1].split("```", 1)[0]
    named: set[str] = set()
    folder: list[str] = []
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip())
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        head = words[0]
        if indent == 0:  # the package folder itself
            continue
        depth = indent // 2 - 1
        del folder[depth:]
        if head.endswith("/"):
            folder.append(head.rstrip("/"))
            continue
        for word in words:
            if re.fullmatch(r"\w+\.py", word):
                named.add(".".join([*folder, word.removesuffix(".py")]))
    actual = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts[1:])
        for p in PACKAGE.rglob("*.py")
        if p.stem not in ENTRY_POINTS
    }
    assert named == actual
