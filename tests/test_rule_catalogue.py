"""The rule catalogue is ``src/ckptlint/rules/``: every rule class is defined there, listed once in
``rules.CODES``, and the rules import nothing above them (the reader, the inspector).

Read from the source (the AST of every module, imports inside functions included), so that a class
or an import nobody runs in the tests still counts.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import ckptlint
import ckptlint.rules
from ckptlint.rules import ALL_RULES, CODES
from ckptlint.rules.base import Rule
from helpers import import_base

PACKAGE = Path(ckptlint.__file__).resolve().parent
RULES_DIR = PACKAGE / "rules"
# What the rules must not import: the reader detects the container rules' problems and imports
# their classes (it sits above the rules); the inspector is a command's report, above both.
FORBIDDEN = ("ckptlint.reader", "ckptlint.inspect")



def _sources(root: Path) -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"), str(p))) for p in sorted(root.rglob("*.py"))]


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _base_name(node.value)
    return None


def rule_classes(sources: list[tuple[Path, ast.Module]]) -> dict[str, list[Path]]:
    """Every class that derives from ``Rule`` (by name, through any chain of bases in ``sources``),
    with the files that define it."""
    classes = [(p, n) for p, tree in sources for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    derived = {"Rule"}
    while True:
        more = {n.name for _, n in classes if n.name not in derived and {_base_name(b) for b in n.bases} & derived}
        if not more:
            break
        derived |= more
    found: dict[str, list[Path]] = {}
    for p, n in classes:
        if n.name in derived:
            found.setdefault(n.name, []).append(p)
    return found


def imported_names(path: Path, tree: ast.Module, root: Path = PACKAGE) -> set[str]:
    """Every module (and ``module.name`` for ``from module import name``) that ``tree`` imports,
    relative imports resolved, wherever the import statement is; also the constant names given to
    ``importlib.import_module`` or ``__import__``."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = import_base(node, path, root)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and _base_name(node.func) in ("import_module", "__import__"):
            out.update(a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return out


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def _private_of_another_rule(name: str, path: Path) -> bool:
    """``ckptlint.rules.<module>._private`` of a rule module other than ``path``'s (the shared
    ``rules._<helper>`` modules and ``rules.base`` are meant to be imported)."""
    parts = name.split(".")
    return (len(parts) == 4 and parts[:2] == ["ckptlint", "rules"] and not parts[2].startswith("_")
            and parts[2] != path.stem and parts[3].startswith("_"))


def test_the_detectors_see_what_they_look_for():
    """The checks below find a rule class defined outside ``rules/`` and the imports they forbid,
    also inside a function, relative or through importlib (else they could not fail)."""
    pkg = Path("/nowhere/ckptlint")  # (nothing is read or written there)
    src = ("from ckptlint.rules.base import ReaderRule\n"
           "class Base(ReaderRule):\n    pass\n"
           "class Stray(Base):\n    code = 'ZZ999'\n")
    trees = [(pkg / "reader" / "x.py", ast.parse(src)),
             (pkg / "rules" / "base.py", ast.parse("class Rule: pass\nclass ReaderRule(Rule): pass\n"))]
    assert set(rule_classes(trees)) == {"Rule", "ReaderRule", "Base", "Stray"}
    code = ("import importlib\n"
            "def f():\n    from ckptlint.reader.header import read_shard\n"
            "def g():\n    from .. import inspect\n"
            "def h():\n    return importlib.import_module('ckptlint.reader')\n"
            "from ckptlint.rules.other import _helper\n")
    names = imported_names(pkg / "rules" / "mine.py", ast.parse(code), root=pkg)
    assert {"ckptlint.reader.header", "ckptlint.inspect", "ckptlint.reader"} <= {n for n in names if _forbidden(n)}
    privates = [n for n in names if _private_of_another_rule(n, pkg / "rules" / "mine.py")]
    assert privates == ["ckptlint.rules.other._helper"]
    assert not _forbidden("inspect") and not _forbidden("ckptlint.inspection")


def test_no_rule_class_is_defined_outside_rules():
    found = rule_classes(_sources(PACKAGE))
    # (the detector sees the package's own rule bases and the container rules the reader detects)
    assert {"Rule", "ReaderRule", "EntryProblem", "LayoutRule", "IndexMissingShard"} <= set(found)
    outside = {name: [str(p.relative_to(PACKAGE)) for p in paths if RULES_DIR not in p.parents]
               for name, paths in found.items()}
    assert {n: ps for n, ps in outside.items() if ps} == {}


def test_rules_import_nothing_above_them_nor_another_rules_privates():
    bad = set()
    for path, tree in _sources(RULES_DIR):
        for name in imported_names(path, tree):
            if _forbidden(name) or _private_of_another_rule(name, path):
                bad.add((path.name, name))
    assert bad == set()


def test_the_table_lists_every_rule_once_sorted_by_code():
    codes = [c for c, _, _ in CODES]
    assert codes == sorted(codes) and len(codes) == len(set(codes))
    assert len({(m, cls) for _, m, cls in CODES}) == len(CODES)
    for code, module, cls in CODES:
        assert (RULES_DIR / f"{module}.py").is_file(), (code, module)
    assert [r.code for r in ALL_RULES] == codes
    for (code, module, cls), rule in zip(CODES, ALL_RULES):
        assert (rule.__module__, rule.__name__, rule.__dict__.get("code")) == (f"ckptlint.rules.{module}", cls, code)
    # Every concrete rule class of the package (a class with its own ``code``), from the source and
    # from the imported modules, is in the table; the bases (no code) are not.
    declared = set()
    for path, tree in _sources(RULES_DIR):
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in s.targets)
                    for s in node.body):
                declared.add((path.stem, node.name))
    assert declared == {(m, cls) for _, m, cls in CODES}
    for info in pkgutil.iter_modules(ckptlint.rules.__path__):
        __import__(f"ckptlint.rules.{info.name}")
    subclasses, todo = set(), [Rule]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("ckptlint.rules."):
                todo.append(sub)
                if "code" in sub.__dict__:
                    subclasses.add(sub)
    assert subclasses == set(ALL_RULES)
