"""Baselines: --write-baseline records fingerprints, --baseline reports only new findings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptlint import baseline as bl
from ckptlint.findings import Consequence, Finding, Severity
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
T = "sglang==0.5.15"


ckptlint = cli_run  # (exit code, stdout, stderr) of an in-process CLI call


@pytest.fixture
def ckpt(tmp_path, monkeypatch) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(BUGGY, dst)
    monkeypatch.chdir(tmp_path)
    return dst


def test_write_then_apply(ckpt, tmp_path, capsys):
    base = tmp_path / "baseline.json"
    code, out, err = ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated", "--write-baseline", str(base))
    assert code == 0, err  # the findings are now accepted
    assert "wrote 2 fingerprint(s)" in err
    assert out == ""  # one line on stderr, no report (it is for --output)
    assert len(err.strip().splitlines()) == 1 and "of 2 finding(s) on 1 release(s) (2 error(s)" in err
    doc = json.loads(base.read_text())
    assert doc["ckptlint_baseline"] == 1
    assert {(e["code"], e["target"], e["subject"]) for e in doc["findings"]} == {
        ("QD401", T, "model.eh_proj"), ("QD401", T, "model.decoder.mlp.experts")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json", "ckpt"]  # no temp file left

    code, out, err = ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated", "--baseline", str(base), "-f", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["findings"] == [] and rep["summary"]["ignored"] == {"by_config": 0, "by_baseline": 2}
    assert "2 by baseline" in err


def test_only_new_findings_fail(ckpt, tmp_path, capsys):
    base = tmp_path / "baseline.json"
    ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated", "--write-baseline", str(base))
    doc = json.loads(base.read_text())
    doc["findings"] = [e for e in doc["findings"] if e["subject"] == "model.eh_proj"]  # deleting entries is fine
    base.write_text(json.dumps(doc))
    code, out, _ = ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated", "--baseline", str(base), "-f", "json")
    assert code == 1
    rep = json.loads(out)
    assert [f["module"] for f in rep["findings"]] == ["model.decoder.mlp.experts"]
    assert rep["summary"]["ignored"]["by_baseline"] == 1


def test_baseline_is_per_target(ckpt, tmp_path, capsys):
    base = tmp_path / "baseline.json"
    ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated", "--write-baseline", str(base))
    # sglang==0.5.12 has the same two defects: they are new findings for that target.
    code, out, _ = ckptlint(capsys, "check", str(ckpt), "-t", T, "-t", "sglang==0.5.12", "--isolated",
                            "--baseline", str(base), "-f", "json")
    assert code == 1
    assert {f["target"] for f in json.loads(out)["findings"]} == {"sglang==0.5.12"}


def test_baseline_after_config_ignores(ckpt, tmp_path, capsys):
    """Findings the configuration ignores are not written to the baseline."""
    (ckpt / "ckptlint.toml").write_text(
        f'target = ["{T}"]\nper-module-ignores = [{{ pattern = "model.eh_proj", codes = ["QD401"], reason = "r" }}]\n')
    base = tmp_path / "b.json"
    ckptlint(capsys, "check", str(ckpt), "--write-baseline", str(base))
    assert [e["subject"] for e in json.loads(base.read_text())["findings"]] == ["model.decoder.mlp.experts"]
    code, out, _ = ckptlint(capsys, "check", str(ckpt), "--baseline", str(base), "-f", "json")
    assert code == 0 and json.loads(out)["summary"]["ignored"] == {"by_config": 1, "by_baseline": 1}


def test_write_is_deterministic(ckpt, tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    ckptlint(capsys, "check", str(ckpt), "-t", T, "-t", "sglang==0.5.12", "--isolated", "--write-baseline", str(a))
    ckptlint(capsys, "check", str(ckpt), "-t", "sglang==0.5.12", "-t", T, "--isolated", "--write-baseline", str(b))
    assert a.read_bytes() == b.read_bytes()
    assert len(json.loads(a.read_text())["findings"]) == 4


def _f(**kw) -> Finding:
    base = dict(code="QD401", consequence=Consequence.LOAD_ERROR, message="built mxfp4 but stored BF16",
                target=T, module="model.eh_proj", tensors=["model.layers.78.eh_proj.weight",
                                                            "model.layers.78.eh_proj.bias"],
                file="model-00002-of-00002.safetensors", hint="add it")
    base.update(kw)
    return Finding(**base)


def test_fingerprint_ignores_wording_and_order():
    fp = bl.fingerprint(_f())
    assert bl.fingerprint(_f(message="reworded", hint=None, error_text="x", severity=Severity.WARNING,
                             consequence=Consequence.SILENT_CORRUPTION, data={"k": 1})) == fp
    assert bl.fingerprint(_f(tensors=["model.layers.78.eh_proj.bias", "model.layers.78.eh_proj.weight"])) == fp
    assert bl.fingerprint(_f(file="model-00001-of-00002.safetensors")) == fp  # module given: file not used
    for other in (_f(code="QD402"), _f(target="sglang==0.5.16"), _f(target=None), _f(module="model.decoder.eh_proj"),
                  _f(tensors=["model.layers.77.eh_proj.weight"])):
        assert bl.fingerprint(other) != fp
    # without a module, the file is the subject
    assert bl.fingerprint(_f(module=None)) != bl.fingerprint(_f(module=None, file="other.safetensors"))


def test_filter_keeps_order_and_counts():
    a, b, c = _f(), _f(module="model.decoder.mlp.experts"), _f(code="MT701")
    kept, dropped = bl.filter_findings([c, a, b], {bl.fingerprint(a)})
    assert kept == [c, b] and dropped == 1


@pytest.mark.parametrize("content, needle", [
    (None, "not found"),
    ("{", "invalid JSON"),
    (b"\xff\xfe", "is UTF-16 text"),
    ("[]", "not a ckptlint baseline"),
    ('{"findings": []}', "ckptlint_baseline"),
    ('{"ckptlint_baseline": 3, "findings": []}', "format 3 is not supported"),
    ('{"ckptlint_baseline": 2, "findings": []}', "not a ckptlint baseline"),  # format 2 is keyed
    ('{"ckptlint_baseline": 1, "findings": [{}, {}]}', "missing required field `fingerprint`"),
    ('{"ckptlint_baseline": 1, "findings": [[[[[[[[[[]]]]]]]]]]}', "not a ckptlint baseline"),
    ('{"ckptlint_baseline": 1, "findings": [{"code": "QD401"}]}', "not a ckptlint baseline"),
    ('{"ckptlint_baseline": 1, "findings": [], "extra": 1}', "extra"),
    ('{"ckptlint_baseline": 1, "findings": [{"fingerprint": "00000000000000000000000000000000", "code": "QD401", "target": null, '
     '"subject": null, "tensor": null}]}', "does not match its fields"),
])
def test_bad_baseline_is_usage_error(ckpt, tmp_path, capsys, content, needle):
    base = tmp_path / "baseline.json"
    if isinstance(content, bytes):
        base.write_bytes(content)
    elif content is not None:
        base.write_text(content)
    code, out, err = ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated", "--baseline", str(base))
    assert code == 2, out + err
    assert needle in err and "Traceback" not in err
    assert out == ""  # rejected before checking


def test_write_baseline_into_missing_directory_is_usage_error(ckpt, tmp_path, capsys):
    code, _, err = ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated",
                            "--write-baseline", str(tmp_path / "no" / "such" / "b.json"))
    assert code == 2 and "cannot write baseline" in err and "Traceback" not in err


def test_refresh_with_both_flags(ckpt, tmp_path, capsys):
    """--baseline and --write-baseline together rewrite the baseline from all current findings."""
    base = tmp_path / "b.json"
    base.write_text(bl.dumps([_f(module="model.gone")]))
    code, _, _ = ckptlint(capsys, "check", str(ckpt), "-t", T, "--isolated", "--baseline", str(base),
                          "--write-baseline", str(base))
    assert code == 0
    assert {e["subject"] for e in json.loads(base.read_text())["findings"]} == {"model.eh_proj",
                                                                                "model.decoder.mlp.experts"}
    assert len(bl.load(base)) == 2
