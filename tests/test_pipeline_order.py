"""The order after the rules: select -> baseline -> aggregate for display. Ignoring or baselining
one module never hides the finding of another module, even where the report aggregates them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "upstream" / "ct-fp8-channel-scale-1d"
T = "vllm==0.33.0"
DOWN0, DOWN1 = "model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"


@pytest.fixture
def ckpt(tmp_path, monkeypatch) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(FIXTURE, dst)
    monkeypatch.chdir(tmp_path)
    return dst


def _json(capsys, *args) -> tuple[int, dict]:
    code, out, err = cli_run(capsys, "check", *args, "-t", T, "-f", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def _modules(doc: dict, code: str = "SC503") -> set[str]:
    """Every module a finding of ``code`` covers (an aggregated finding lists them in data.modules)."""
    return {m for f in doc["findings"] if f["code"] == code for m in (f.get("data", {}).get("modules") or [f["module"]])}


def test_the_report_aggregates_the_two_layers(ckpt, capsys):
    """The premise: without ignores, layers 0 and 1 of down_proj are one displayed finding."""
    _, doc = _json(capsys, str(ckpt), "--isolated")
    (down,) = [f for f in doc["findings"] if f["code"] == "SC503" and "down_proj" in f["module"]]
    assert down["module"] == DOWN0 and down["data"]["modules"] == [DOWN0, DOWN1]
    assert "1 more module(s)" in down["message"]


def test_ignoring_one_module_keeps_the_other(ckpt, tmp_path, capsys):
    cfg = tmp_path / "ckptlint.toml"
    cfg.write_text(f'per-module-ignores = [{{ pattern = "{DOWN0}", codes = ["SC503"], reason = "known, re-export planned" }}]\n')
    code, doc = _json(capsys, str(ckpt), "--config", str(cfg))
    assert code == 1
    assert DOWN1 in _modules(doc) and DOWN0 not in _modules(doc)
    (down,) = [f for f in doc["findings"] if f["code"] == "SC503" and "down_proj" in f["module"]]
    assert down["module"] == DOWN1 and "more module" not in down["message"]  # no longer aggregated
    assert doc["summary"]["ignored"]["by_config"] == 1
    (acc,) = doc["accepted"]
    assert acc["module"] == DOWN0 and acc["accepted_by"] == "config" and "known, re-export planned" in acc["reason"]


def test_per_tensor_ignore_of_one_layer_keeps_the_other(ckpt, tmp_path, capsys):
    cfg = tmp_path / "ckptlint.toml"
    cfg.write_text('per-tensor-ignores = [{ pattern = "model.layers.0.mlp.down_proj.*", codes = ["SC503"], reason = "r" }]\n')
    _, doc = _json(capsys, str(ckpt), "--config", str(cfg))
    assert DOWN1 in _modules(doc) and DOWN0 not in _modules(doc)


def test_baseline_has_one_fingerprint_per_module(ckpt, tmp_path, capsys):
    base = tmp_path / "baseline.json"
    code, _, err = cli_run(capsys, "check", str(ckpt), "--isolated", "-t", T, "--write-baseline", str(base))
    assert code == 0, err
    subjects = [e["subject"] for e in json.loads(base.read_text())["findings"] if e["code"] == "SC503"]
    assert DOWN0 in subjects and DOWN1 in subjects
    _, doc = _json(capsys, str(ckpt), "--isolated", "--baseline", str(base))
    assert doc["findings"] == [] and doc["summary"]["ignored"]["by_baseline"] == len(subjects)


def test_a_new_failing_layer_is_not_hidden_by_the_baseline(ckpt, tmp_path, capsys):
    """A baseline that accepted layer 0's defect (as one written when only layer 0 failed would)
    does not accept the same defect in layer 1, although the report aggregates the two."""
    base = tmp_path / "baseline.json"
    cli_run(capsys, "check", str(ckpt), "--isolated", "-t", T, "--write-baseline", str(base))
    doc = json.loads(base.read_text())
    doc["findings"] = [e for e in doc["findings"] if e["subject"] != DOWN1]
    base.write_text(json.dumps(doc))
    code, rep = _json(capsys, str(ckpt), "--isolated", "--baseline", str(base))
    assert code == 1
    assert _modules(rep) == {DOWN1}
    (acc_down,) = [a for a in rep["accepted"] if a["module"] == DOWN0]
    assert acc_down["accepted_by"] == "baseline"
