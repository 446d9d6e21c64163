"""Every rule on its case files (tests/cases/<CODE>/*.toml, format in tests/cases/README.md).

Each case builds a small synthetic checkpoint (sparse files) in tmp_path, runs ``ckptlint check
--select CODE --format json --isolated`` on the case's targets and flags, and compares the findings
with the golden file next to the case (``expect = "fires"``) or asserts that the rule is silent
(``expect = "clean"``). The facts the case states in ``[[must]]`` / ``[[must_not]]`` are checked
against the same output, so regenerating a golden cannot drop them.

Regenerate goldens with ``pytest tests/test_cases.py --update-goldens`` (or
``CKPTLINT_UPDATE_GOLDENS=1``) and review the diff.
"""

from __future__ import annotations

import json
import os

import pytest

from casefiles import UPDATE_ENV, build_case, check_facts, discover, dump_golden, run_case, validate

CASES = discover()


@pytest.fixture(scope="session")
def update_goldens(request) -> bool:
    return bool(request.config.getoption("--update-goldens") or os.environ.get(UPDATE_ENV))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case, tmp_path, update_goldens):
    validate(case)
    root = tmp_path / "ckpt"
    result = run_case(case, build_case(case, root), root)
    check_facts(case, result)
    if not case.fires:
        assert not case.golden.exists(), f"{case.id}: a clean case has no golden file ({case.golden.name})"
        return
    if update_goldens:
        case.golden.write_text(dump_golden(result), encoding="utf-8")
        return
    assert case.golden.exists(), f"{case.id}: no golden file; run with --update-goldens and review it"
    expected = json.loads(case.golden.read_text(encoding="utf-8"))
    if result != expected:  # compare as text: pytest then shows a line diff
        assert dump_golden(result) == dump_golden(expected), f"{case.id}: output differs from {case.golden.name}"
