"""Every fact a rule reads is carried by the Plan or the rule context (issue 30): no rule imports
``ckptlint.inspect`` or another rule's private names, no rule reads module-level mutable state of
another stage (the config regexes' outcomes are a Plan field, not a process-wide scope), and
``check`` resolves ``--target`` once and passes the releases down."""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import types
from pathlib import Path

import pytest

import ckptlint.rules as rules_pkg
from ckptlint import userregex
from ckptlint.engine import check
from ckptlint.targets import resolve
from casefiles import build_case, discover

RULES_DIR = Path(rules_pkg.__file__).parent
RULE_MODULES = sorted(p for p in RULES_DIR.glob("*.py") if p.name != "__init__.py")


def _imports(path: Path):
    """(module imported from, name or None) of every import in a module, function-level ones included."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                yield node.module, a.name


def test_the_scan_sees_rule_modules_and_their_imports():
    assert len(RULE_MODULES) >= 10
    seen = {m for p in RULE_MODULES for m, _ in _imports(p)}
    assert "ckptlint.rules.base" in seen and "ckptlint.findings" in seen


@pytest.mark.parametrize("path", RULE_MODULES, ids=lambda p: p.stem)
def test_no_rule_imports_inspect_or_another_rules_private_names(path):
    own = f"ckptlint.rules.{path.stem}"
    for module, name in _imports(path):
        full = f"{module}.{name}" if name else module
        assert full != "ckptlint.inspect" and not full.startswith("ckptlint.inspect."), \
            f"{path.name} imports {full}: what inspect computes and a rule needs belongs below both"
        if module.startswith("ckptlint.rules.") and module not in (own, "ckptlint.rules.base") and name:
            assert not name.startswith("_"), f"{path.name} imports {module}.{name}, another rule's private name"


def _dependencies() -> list[str]:
    """The modules outside ``rules/`` that rule modules import from (or import)."""
    out = set()
    for path in RULE_MODULES:
        for module, name in _imports(path):
            if not module.startswith("ckptlint.") or module.startswith("ckptlint.rules"):
                continue
            out.add(module)
            if name and importlib.util.find_spec(module) is not None and \
                    isinstance(getattr(importlib.import_module(module), name, None), types.ModuleType):
                out.add(f"{module}.{name}")
    return sorted(out)


def _state(module_name: str) -> dict:
    """A module's globals other than classes, functions and modules, by value (objects with
    attributes by their attributes): what a stage could fill in and another read."""
    out = {}
    for k, v in vars(importlib.import_module(module_name)).items():
        if k.startswith("__") or isinstance(v, (type, types.ModuleType)) or callable(v):
            continue
        out[k] = (id(v), repr(sorted(vars(v).items())) if hasattr(v, "__dict__") else repr(v))
    return out


def _check_case(name: str, tmp_path_factory):
    (case,) = [c for c in discover() if c.id == name]
    path = build_case(case, tmp_path_factory.mktemp(name.replace("/", "-")))
    return check(str(path), [t for spec in case.data["targets"] for t in resolve(spec)])


def test_a_check_leaves_no_module_level_state_in_what_rules_import(tmp_path_factory):
    """A rule reads what the Plan and its context carry: the modules rules import from hold nothing that
    a check fills in (the config regexes' outcomes were such a scope, read by CF312)."""
    deps = _dependencies()
    assert "ckptlint.userregex" in deps and "ckptlint.findings" in deps
    _check_case("CF312/linear-ignore-entry", tmp_path_factory)  # lazy imports and static caches warmed up
    before = {m: _state(m) for m in deps}
    report = _check_case("CF312/redos-ignore-entry", tmp_path_factory)
    assert any(f.code == "CF312" for f in report.findings)
    after = {m: _state(m) for m in deps}
    changed = {m: sorted(k for k in set(before[m]) | set(after[m]) if before[m].get(k) != after[m].get(k))
               for m in deps if before[m] != after[m]}
    assert changed == {}


def test_the_state_check_sees_a_scope_filled_in():
    class Scope:
        def __init__(self) -> None:
            self.compiled: dict = {}

    mod = types.ModuleType("ckptlint_probe")
    mod.SCOPE = Scope()
    import sys

    sys.modules["ckptlint_probe"] = mod
    try:
        before = _state("ckptlint_probe")
        mod.SCOPE.compiled["x"] = 1
        assert _state("ckptlint_probe") != before
    finally:
        del sys.modules["ckptlint_probe"]


def test_userregex_keeps_no_scope_of_its_own():
    for name in ("_SCOPE", "reset", "lookup", "compile_user"):
        assert not hasattr(userregex, name), name
    held = [k for k, v in vars(userregex).items() if isinstance(v, (userregex.RegexScope, userregex.UserRegex))]
    assert held == []


@pytest.fixture(scope="module")
def redos_case(tmp_path_factory):
    (case,) = [c for c in discover() if c.code == "CF312" and c.name == "redos-ignore-entry"]
    root = tmp_path_factory.mktemp("cf312")
    return case, build_case(case, root)


def test_cf312_fires_from_the_plan_and_each_check_has_its_own_budget(redos_case):
    case, path = redos_case
    targets = [t for spec in case.data["targets"] for t in resolve(spec)]
    before = {k: (type(v), len(v)) for k, v in vars(userregex).items() if isinstance(v, (dict, list, set))}
    reports = [check(str(path), targets) for _ in range(2)]
    after = {k: (type(v), len(v)) for k, v in vars(userregex).items() if isinstance(v, (dict, list, set))}
    assert before == after  # a check leaves nothing behind in the module
    pattern = "([a-z_.0-9]+)*X"
    for report in reports:
        got = {f.target: f for f in report.findings if f.code == "CF312"}
        assert set(got) == {t.id for t in targets}
        for t in targets:
            outcome = report.plans[t.id].undecided_regexes[(pattern, False)]
            f = got[t.id]
            assert f.data["undecided_count"] == outcome.undecided_count > 0
            assert f.data["undecided"] == list(outcome.undecided_names) and f.data["reason"] == outcome.reason
    # the second check started from a fresh scope: it decided (and failed to decide) the same names again
    first, second = ([r.plans[t.id].undecided_regexes[(pattern, False)] for t in targets] for r in reports)
    assert [o.undecided_count for o in first] == [o.undecided_count for o in second]
    assert first[0].reason.startswith("did not finish")  # the first target ran it under the timer


# --- --target resolved once -----------------------------------------------------------------------

def _cli(args: list[str]) -> int:
    from ckptlint import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(args)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
    return 0


@pytest.mark.parametrize("paths", [1, 2])
def test_check_resolves_each_target_spec_once(redos_case, tmp_path, monkeypatch, paths):
    import ckptlint.targets as targets_mod

    _, path = redos_case
    calls: list[str] = []
    real = targets_mod.resolve_spec

    def counting(spec):
        calls.append(spec)
        return real(spec)

    monkeypatch.setattr(targets_mod, "resolve_spec", counting)
    monkeypatch.setenv("CKPTLINT_JOBS", "1")  # several checkpoints in this process, so that every call is seen
    specs = ["sglang==0.5.23", "vllm>=0.32"]
    args = ["check", *[str(p) for p in _copies(path, tmp_path, paths)], "--isolated", "-q",
            "-f", "json", "--select", "CF312"]
    for s in specs:
        args += ["-t", s]
    assert _cli(args) == 1
    assert calls == specs


def _copies(path: Path, tmp_path: Path, n: int) -> list[Path]:
    """``n`` distinct checkpoints alike (symlinks to the built one's files: nothing copied)."""
    out = [path]
    for i in range(1, n):
        d = tmp_path / f"copy{i}"
        d.mkdir()
        for f in path.iterdir():
            (d / f.name).symlink_to(f)
        out.append(d)
    return out


# --- imports only go down -------------------------------------------------------------------------

SRC = RULES_DIR.parent


@pytest.mark.parametrize("path, above", [
    (SRC / "batch.py", "ckptlint.cli"),
    *[(p, "ckptlint.batch") for p in sorted((SRC / "render").glob("*.py"))],
    *[(p, "ckptlint.cli") for p in sorted((SRC / "render").glob("*.py"))],
    (SRC / "hardware" / "memory.py", "ckptlint.inspect"),
], ids=lambda v: v.name if isinstance(v, Path) else v)
def test_no_upward_import(path, above):
    for module, name in _imports(path):
        full = f"{module}.{name}" if name else module
        assert not (full == above or full.startswith(above + ".")), f"{path.name} imports {full}"
