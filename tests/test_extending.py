"""A new rule, added the way docs/extending.md ("A new rule") says, on a copy of the package and its tests.

The copy gets, step by step, the rule's module in ``rules/``, its line in ``rules.CODES``, its two case files
and the golden ``CKPTLINT_UPDATE_GOLDENS`` writes, and the README table ``scripts/update_readme_rules.py``
writes; nothing else is edited. The copy's own tests (the catalogue, meta, rule-docs and case tests, run by
pytest with the copy first on the path) fail before each step and pass after it, so a step the doc left
out would show. The copy then lists the rule, prints its documentation, selects it by code, name and code
prefix, ignores it, and reports it on the failing synthetic checkpoint and not on its passing twin.

The example rule (an invented one: a tensor stored in float64) runs on each target's Plan, as most rules
do; its code is the next free one of the LD family, taken from the table.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from casefiles import build_case, discover, validate
from helpers import run_python
from ckptlint.rules import CODES
from ckptlint.targets import known_versions

ROOT = Path(__file__).resolve().parents[1]
# What the copy needs to run the project's own checks of a rule: the package, the README and its
# table script, the case files and the tests that read them.
TESTS = ("conftest.py", "helpers.py", "casefiles.py", "test_rule_catalogue.py", "test_meta.py", "test_rule_docs.py",
         "test_cases.py")
MODULE, CLASS, NAME = "float64_tensor", "Float64Tensor", "float64-tensor"

RULE = '''"""A tensor stored in float64."""

from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.rules.base import Rule, RuleContext


class {cls}(Rule):
    """A tensor is stored in float64, which no serving dtype uses

    ## What it does
    Reports every tensor the checkpoint stores as `F64`, on each target whose load was simulated.

    ## Why is this bad?
    The server casts it to the model dtype while loading: twice the bytes of F32 are stored, downloaded
    and read for nothing.

    ## Example
    `model.norm.weight` stored as `F64 [64]`.

    ## How to fix
    Store it in the model dtype (or F32).
    """

    code = "{code}"
    name = "{name}"
    consequences = (Consequence.HYGIENE,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if ctx.plan is None or not ctx.plan.simulated:
            return
        for name, t in sorted(ctx.checkpoint.tensors.items()):
            if t.dtype == "F64":
                yield self.finding(ctx, Consequence.HYGIENE,
                                   f"`{{name}}` is stored as F64; the server casts it on load",
                                   tensors=[name], file=t.file, hint="store it in the model dtype")
'''

CASE = '''why = """
A Llama checkpoint whose final norm is stored as {dtype}: {why}.
"""
expect = "{expect}"
targets = ["{target}"]

[checkpoint]
shards = 1
tensors = """
model.embed_tokens.weight BF16 [128, 64]
model.norm.weight {dtype} [64]
lm_head.weight BF16 [128, 64]
"""
'''
MUST = '''
[[must]]
code = "{code}"
consequence = "hygiene"
message_contains = "model.norm.weight"
'''


def _next_code(family: str) -> str:
    used = [int(c[2:]) for c, _, _ in CODES if c.startswith(family)]
    return f"{family}{max(used) + 1:03d}"


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ROOT / "src" / "ckptlint", root / "src" / "ckptlint", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests").mkdir()
    for name in TESTS:
        shutil.copy2(ROOT / "tests" / name, root / "tests" / name)
    shutil.copytree(ROOT / "tests" / "cases", root / "tests" / "cases")
    (root / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "update_readme_rules.py", root / "scripts")
    shutil.copy2(ROOT / "README.md", root / "README.md")
    return root


def _run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run_python(*args, pythonpath=str(root / "src"), cwd=root, env=env)


def _suite(root: Path, *args: str, **env: str) -> dict[str, str]:
    """The copy's own tests: node id -> PASSED / FAILED / ERROR."""
    r = _run(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *args, **env)
    got = {m.group(2): m.group(1) for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", r.stdout, re.M)}
    assert got, r.stdout[-3000:] + r.stderr[-2000:]
    return got


def _check(root: Path, ckpt: Path, target: str, *args: str) -> list[dict]:
    r = _run(root, "-m", "ckptlint", "check", str(ckpt), "--isolated", "-q", "-f", "json", "-t", target, *args)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)["findings"]


def test_a_new_rule_is_its_module_a_table_line_its_cases_and_the_readme_table(tmp_path):
    code = _next_code("LD")
    target = f"vllm=={known_versions('vllm')[-1]}"
    root = _copy(tmp_path)
    rules = root / "src" / "ckptlint" / "rules"
    catalogue = "tests/test_rule_catalogue.py::test_the_table_lists_every_rule_once_sorted_by_code"
    meta = "tests/test_meta.py::test_every_rule_has_failing_and_passing_case_files"
    readme = "tests/test_rule_docs.py::test_readme_table_matches_registry"
    script = "tests/test_rule_docs.py::test_update_script_check_mode"

    # 1. the rule's module: not a rule of ckptlint yet, and the catalogue's test says so
    (rules / f"{MODULE}.py").write_text(RULE.format(cls=CLASS, code=code, name=NAME), encoding="utf-8")
    assert _run(root, "-m", "ckptlint", "rule", code).returncode != 0
    assert _suite(root, catalogue)[catalogue] == "FAILED"

    # 2. its line in CODES, in code order
    init = rules / "__init__.py"
    lines = init.read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [i for i, ln in enumerate(lines) if re.match(r'\s+\("[A-Z]{2}\d{3}", ', ln)]
    at = next((i for i in rows if lines[i].split('"')[1] > code), rows[-1] + 1)
    lines.insert(at, f'    ("{code}", "{MODULE}", "{CLASS}"),\n')
    init.write_text("".join(lines), encoding="utf-8")
    listed = _run(root, "-m", "ckptlint", "rules")
    assert any(ln.split()[:2] == [code, NAME] for ln in listed.stdout.splitlines()), listed.stdout
    doc = _run(root, "-m", "ckptlint", "rule", code)
    assert doc.returncode == 0 and doc.stdout.startswith(f"# {NAME} ({code})\n"), doc.stdout + doc.stderr
    assert "## Why is this bad?" in doc.stdout and "twice the bytes" in doc.stdout
    got = _suite(root, catalogue, meta, readme, script)
    assert got == {catalogue: "PASSED", meta: "FAILED", readme: "FAILED", script: "FAILED"}, got

    # 3. its cases: one where it fires (with the golden the update run writes) and a clean twin
    cases = root / "tests" / "cases" / code
    cases.mkdir()
    (cases / "f64-norm.toml").write_text(
        CASE.format(dtype="F64", why="stored in float64, cast on load", expect="fires", target=target)
        + MUST.format(code=code), encoding="utf-8")
    (cases / "f32-norm.toml").write_text(
        CASE.format(dtype="F32", why="a dtype the server loads as it is, nothing to report", expect="clean",
                    target=target), encoding="utf-8")
    written = _suite(root, "tests/test_cases.py", "-k", code, CKPTLINT_UPDATE_GOLDENS="1")
    assert sorted(written.values()) == ["PASSED", "PASSED"], written
    golden = json.loads((cases / "f64-norm.golden.json").read_text(encoding="utf-8"))
    assert [(f["code"], f["name"], f["tensors"]) for f in golden["findings"]] == [(code, NAME, ["model.norm.weight"])]
    assert not (cases / "f32-norm.golden.json").exists()

    # 4. the README's table
    r = _run(root, "scripts/update_readme_rules.py")
    assert r.returncode == 0, r.stderr
    assert f"| `{code}` | `{NAME}` |" in (root / "README.md").read_text(encoding="utf-8")

    # the copy's own checks of a rule now pass, its cases included
    got = _suite(root, catalogue, meta, readme, script, "tests/test_rule_catalogue.py", "tests/test_cases.py",
                 "-k", f"{code} or catalogue or every_rule or readme or update_script")
    assert {k: v for k, v in got.items() if v != "PASSED"} == {}, got
    assert {f"tests/test_cases.py::test_case[{code}/f64-norm]", f"tests/test_cases.py::test_case[{code}/f32-norm]",
            catalogue, meta, readme, script} <= set(got)

    # and the rule behaves like any other: on by default, selected by code, name or code prefix, ignored
    built = {c.name: c for c in discover(root / "tests" / "cases") if c.code == code}
    for c in built.values():
        validate(c)
    bad = build_case(built["f64-norm"], tmp_path / "f64")
    good = build_case(built["f32-norm"], tmp_path / "f32")

    def mine(findings: list[dict]) -> list[tuple[str, str | None]]:
        return [(f["code"], f["target"]) for f in findings if f["code"] == code]

    assert mine(_check(root, bad, target)) == [(code, target)]
    for key in (code, NAME, code[:3]):
        assert mine(_check(root, bad, target, "--select", key)) == [(code, target)], key
    assert mine(_check(root, bad, target, "--ignore", code)) == []
    assert mine(_check(root, good, target)) == []
