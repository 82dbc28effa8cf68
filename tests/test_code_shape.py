"""The code's shape, checked rather than remembered (issue "One room per concern").

Every module of engine/, storage/, views/ and ui/ stays under MAX_MODULE_LINES lines, every
function under MAX_FUNCTION_LINES lines and MAX_NESTING levels of nested blocks, and
ARCHITECTURE.md lists exactly the files git tracks there.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "storage", "views", "ui")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_NESTING = 4
_BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", *PACKAGES], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return sorted(p for p in out if (REPO / p).exists() and "/migrations/versions/" not in p)


def _sources() -> list[Path]:
    return [REPO / p for p in _tracked() if p.endswith(".py") and "/migrations/" not in p]


def _depth(node: ast.AST, level: int = 0) -> int:
    deepest = level
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue  # nested functions are measured on their own
        inner = level + 1 if isinstance(child, _BLOCKS) else level
        deepest = max(deepest, _depth(child, inner))
    return deepest


def test_no_module_is_too_long():
    long = {
        str(p.relative_to(REPO)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_too_long_or_too_deep():
    problems = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            where = f"{path.relative_to(REPO)}:{node.lineno} {node.name}"
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                problems.append(f"{where} is {lines} lines")
            if (depth := _depth(node)) > MAX_NESTING:
                problems.append(f"{where} nests {depth} deep")
    assert not problems, "\n".join(problems)


def test_architecture_lists_exactly_the_tracked_files():
    text = (REPO / "ARCHITECTURE.md").read_text()
    block = re.search(r"<!-- tree -->\n```\n(.*?)```", text, re.S)
    assert block, "ARCHITECTURE.md has no tree block"
    listed = sorted(line.split()[0] for line in block.group(1).splitlines() if line.strip())
    tracked = _tracked()
    assert listed == tracked, {
        "tracked but not in ARCHITECTURE.md": sorted(set(tracked) - set(listed)),
        "in ARCHITECTURE.md but not tracked": sorted(set(listed) - set(tracked)),
    }


def test_no_test_hook_in_production_code():
    """Faults the tests need are planted by the tests (fixtures, fakes), never switched on in the product."""
    hooks = re.compile(r"LATENCYLAB_TEST|PYTEST_CURRENT_TEST|\"pytest\" in sys\.modules")
    found = [
        f"{p.relative_to(REPO)}:{n}"
        for p in [*_sources(), REPO / "app.py"]
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if hooks.search(line)
    ]
    assert not found, found


def test_no_project_module_is_imported_by_a_string():
    """A lower layer never reaches a higher one by a string import (which import-linter cannot see): project modules
    are imported by name, but for the registries' lazy ``"module:Class"`` strings (engines' backends, request
    sources' planners, CLI verbs), which name a module held in data, never spelled at the call."""
    spelled = re.compile(r"""import_module\(\s*f?["']engine|__import__\(""")
    found = [
        f"{p.relative_to(REPO)}:{n}"
        for p in [*_sources(), REPO / "app.py"]
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if spelled.search(line)
    ]
    assert not found, found
