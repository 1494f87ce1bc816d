"""The package layout docs/layout.md describes is the one the code has: no import cycle, a
docstring atop every module, and its tree names every module. Which package may import which
is import-linter's contracts in pyproject.toml (`lint-imports`, run by `make lint`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "newsletter"
LAYOUT = (Path(__file__).resolve().parents[1] / "docs" / "layout.md").read_text(encoding="utf-8")
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


GRAPH = {name: imports(path) for name, path in modules() if name not in ENTRY_POINTS}


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
