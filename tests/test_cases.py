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


# --- the case format itself -------------------------------------------------------------------
def _case(data, code="SF101", name="x"):
    from casefiles import Case

    return Case(code, name, CASES[0].path.parent / f"{name}.toml", data)


def test_case_format_rejects_unknown_keys_and_missing_facts():
    from casefiles import CaseError

    ok = {"why": "a shard that is empty fails to load", "expect": "clean", "targets": ["vllm==0.33.0"]}
    validate(_case(ok))
    for bad in ({**ok, "tagets": ["x"]}, {**ok, "expect": "fails"}, {**ok, "why": "x"},
                {**ok, "expect": "fires"}, {**ok, "checkpoint": {"recipe": {"name": "nope"}}},
                {**ok, "must_not": [{"mesage_contains": "x"}]}):
        with pytest.raises(CaseError):
            validate(_case(bad))


def test_tensor_edits_that_match_nothing_are_errors(tmp_path):
    from casefiles import CaseError

    base = {"why": "edits must name tensors that exist", "expect": "clean", "targets": ["vllm==0.33.0"]}
    for edits in ({"drop": ["nope"]}, {"rename": [["nope", "x"]]}, {"set": "nope U8 [1]"}):
        case = _case({**base, "checkpoint": {"tensors": "a U8 [2]", "tensor_edits": edits}})
        with pytest.raises(CaseError):
            build_case(case, tmp_path / str(len(list(tmp_path.iterdir()))))


def test_golden_comparison_sees_a_changed_finding(tmp_path):
    # The update switch is off here, so a golden that disagrees with the output fails the comparison.
    (case,) = [c for c in CASES if c.id == "SF101/empty-shard"]
    root = tmp_path / "ckpt"
    result = run_case(case, build_case(case, root), root)
    golden = json.loads(case.golden.read_text(encoding="utf-8"))
    assert result == golden
    golden["findings"][0]["consequence"] = "hygiene"
    assert result != golden


def test_no_temporary_path_survives_normalisation(tmp_path):
    # SGLang 0.5.17's missing-shard error names the checkpoint directory.
    (case,) = [c for c in CASES if c.id == "IX204/missing-shard-per-release"]
    root = tmp_path / "ckpt"
    text = json.dumps(run_case(case, build_case(case, root), root))
    assert "missing from <checkpoint> (incomplete download?)" in text and str(tmp_path) not in text
