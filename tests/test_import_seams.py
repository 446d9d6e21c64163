"""Imports go at the top of a module, except at the seams docs/extending.md names ("Imports: the seams").

A function-level import hides a dependency, so the package keeps them to a few documented places where
importing late keeps a command from paying for what it does not use. These tests read the seam table from
the doc and hold the code to it both ways (every late import is at a seam, every seam row is used), check
that each seam keeps out what it is there to keep out (run in a child process, as a command runs), and that
every module imports on its own (no order-dependent import cycle).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlint import __version__
from helpers import import_base, module_name

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "ckptlint"
DOC = ROOT / "docs" / "extending.md"
FIXTURE = "fixtures/glm5-quark-mxfp4-mtp-exclude-prefix"


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PKG.parent / rel).with_suffix(".py").is_file() or (PKG.parent / rel / "__init__.py").is_file()


def _imported(node: ast.Import | ast.ImportFrom, here: Path) -> list[str]:
    """The ckptlint modules (or, for a name that is not a module, its package) an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "ckptlint"]
    base = import_base(node, here, PKG)
    if base.split(".")[0] != "ckptlint":
        return []
    return [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]


def late_imports() -> list[tuple[str, str, str, int]]:
    """(importing file relative to the package, imported module, function, line) for every import of a
    ckptlint module inside a function (``if TYPE_CHECKING:`` blocks are not imports at run time)."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()

        def visit(node: ast.AST, fn: str | None) -> None:
            for ch in ast.iter_child_nodes(node):
                if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(ch, ch.name if fn is None else f"{fn}.{ch.name}")
                elif isinstance(ch, ast.If) and "TYPE_CHECKING" in ast.unparse(ch.test):
                    continue
                elif isinstance(ch, (ast.Import, ast.ImportFrom)):
                    if fn is not None:
                        out.extend((rel, m, fn, ch.lineno) for m in _imported(ch, path))
                else:
                    visit(ch, fn)

        visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return out


def seams() -> dict[str, tuple[list[str], list[str]]]:
    """The doc's seam table: seam -> (importing files, imported modules or packages)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Imports: the seams", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("**"):
            continue
        rows[cells[0].strip("*")] = (re.findall(r"`([^`]+)`", cells[1]), re.findall(r"`([^`]+)`", cells[2]))
    assert rows, "docs/extending.md has no seam table"
    return rows


def _seam_of(rel: str, module: str, table) -> str | None:
    for name, (importers, modules) in table.items():
        if rel in importers and any(module == m or module.startswith(m + ".") for m in modules):
            return name
    return None


def test_every_late_import_is_at_a_seam():
    table = seams()
    stray = [f"{rel}:{line} ({fn}) imports {mod}" for rel, mod, fn, line in late_imports()
             if _seam_of(rel, mod, table) is None]
    assert not stray, ("imports inside functions outside the seams of docs/extending.md (move them to the top "
                       "of the module, or add the place to a seam with its reason):\n" + "\n".join(stray))


def test_every_seam_row_is_used():
    table = seams()
    used = {(rel, _seam_of(rel, mod, table)) for rel, mod, _, _ in late_imports()}
    for name, (importers, modules) in table.items():
        assert importers and modules, name
        for rel in importers:
            assert (PKG / rel).is_file(), f"seam {name}: no file {rel}"
            assert (rel, name) in used, f"seam {name}: {rel} imports nothing late (remove it from the row)"
        for m in modules:
            assert _is_module(m), f"seam {name}: {m} is not a module"


def _modules_after(*argv: str) -> set[str]:
    code = ("import contextlib, io, json, sys\nfrom ckptlint import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "    try:\n        cli.main(sys.argv[1:])\n    except SystemExit:\n        pass\n"
            "print(json.dumps(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout))


# what each seam keeps out of a command that does not need it
KEPT_OUT = [
    pytest.param(["check", FIXTURE, "-f", "json"],
                 {"pydantic", "ckptlint.config_schema", "ckptlint.targets.schema", "ckptlint.hardware.schema",
                  "ckptlint.reader.remote", "ckptlint.targets.extracted", "ckptlint.targets.extracted_classes",
                  "ckptlint.render.markdown", "ckptlint.render.sarif", "ckptlint.render.github",
                  "ckptlint.render.concise", "ckptlint.cli.fix", "ckptlint.fix", "ckptlint.inspect"},
                 id="check-json: schemas, hub, extracted, formats, commands"),
    pytest.param(["plan", FIXTURE, "-t", "sglang==0.5.15"],
                 {"ckptlint.selection", "ckptlint.engine", "ckptlint.rules.quantization_mismatch"}, id="plan: catalogue"),
    pytest.param(["gpus"], {"ckptlint.reader", "ckptlint.simulate", "ckptlint.rules", "ckptlint.targets"},
                 id="gpus: commands"),
]


@pytest.mark.parametrize("argv,absent", KEPT_OUT)
def test_each_seam_keeps_its_modules_out(argv, absent):
    assert not _modules_after(*argv) & absent


def test_version_imports_only_the_package():
    # the entry seam: `ckptlint --version` answers before importing anything else of ckptlint
    code = ("import sys\nsys.argv = ['ckptlint', '--version']\nfrom ckptlint import _entry\n_entry.main()\n"
            "print(sorted(m for m in sys.modules if m.startswith('ckptlint')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stdout.splitlines() == [f"ckptlint {__version__}", "['ckptlint', 'ckptlint._entry']"], r.stdout + r.stderr


def test_every_module_imports_on_its_own():
    # each module imported first, in a process whose ckptlint modules are forgotten before each: a cycle
    # that only works in one import order fails here
    code = ("import importlib, sys\nbad = []\nfor m in sys.argv[1:]:\n"
            "    for k in [k for k in sys.modules if k == 'ckptlint' or k.startswith('ckptlint.')]:\n"
            "        del sys.modules[k]\n"
            "    try:\n        importlib.import_module(m)\n"
            "    except Exception as exc:\n        bad.append(f'{m}: {type(exc).__name__}: {exc}')\n"
            "print('\\n'.join(bad))")
    mods = sorted(module_name(p, PKG) for p in PKG.rglob("*.py") if p.name != "__main__.py")
    r = subprocess.run([sys.executable, "-c", code, *mods], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr
