"""The command line: JSON contract, exit codes, text output, plan/targets/rules/rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlint import cli
from ckptlint.targets import known_versions

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
FIXED = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"


def ckptlint(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100", **(env or {})}
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_json_contract_on_buggy_fixture():
    r = ckptlint("check", str(BUGGY), "--target", "sglang==0.5.15", "--format", "json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)  # nothing but JSON on stdout
    assert doc["schema_version"] == 1
    assert doc["checkpoint"] == str(BUGGY)
    assert doc["targets"] == ["sglang==0.5.15"] and doc["resolved_targets"] == {"sglang==0.5.15": "sglang==0.5.15"}
    keys = {"code", "name", "severity", "consequence", "target", "module", "tensors", "file", "message", "hint"}
    assert doc["findings"]
    for f in doc["findings"]:
        assert keys <= set(f)
        assert f["severity"] in ("error", "warning", "info")
        assert f["consequence"] in ("load-error", "silent-corruption", "degraded", "hygiene")
        assert isinstance(f["tensors"], list) and len(f["tensors"]) <= 50
    mods = {(f["code"], f["module"], f["target"]) for f in doc["findings"]}
    assert ("QD401", "model.eh_proj", "sglang==0.5.15") in mods
    assert ("QD401", "model.decoder.mlp.experts", "sglang==0.5.15") in mods
    assert doc["summary"]["by_severity"]["error"] == 2


def test_fixed_twin_exit_zero_on_default_targets():
    r = ckptlint("check", str(FIXED))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sglang==" in r.stdout and "vllm==" in r.stdout


def test_text_output_names_module_error_and_fix():
    r = ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15")
    assert r.returncode == 1
    out = r.stdout
    # the two draft modules share their explanation and fix: said once, each module one bullet
    assert "\nerror QD401 quantization-mismatch [load-error] sglang 0.5.15 [1] \u2014 2 findings\n" \
        "  built mxfp4 but stored unquantized: no `exclude` entry matches the runtime name under" in out
    assert "\n  fix: add each runtime name to `quantization_config.exclude` [2]\n" in out
    assert "\n  - `model.eh_proj` (draft ReplicatedLinear): BF16 [64, 128] stored, U8 [64, 64] allocated;" in out
    assert "model.eh_proj: `model.eh_proj`" not in out  # the module is named once
    assert "\n  \u2192 AssertionError: param.shape=torch.Size(" in out
    assert "\n[2] Keep the checkpoint-named entries for frameworks that use them.\n" in out
    # wrapped ($COLUMNS; not a terminal); the checkpoint's path is one word, as long as the clone's path
    assert max(len(line) for line in out.splitlines() if str(BUGGY) not in line) <= 100
    assert "\x1b[" not in out  # no colour when stdout is not a terminal


def test_framework_without_version_prints_matrix():
    r = ckptlint("check", str(BUGGY), "-t", "sglang", "-t", "vllm")
    rows = [l for l in r.stdout.splitlines() if l.startswith(("sglang", "vllm"))
            and l.rstrip().endswith(("load", "loads", "not supported by this release"))]
    # one row per release, or per run of consecutive releases whose rows would be identical
    covered = []
    for l in rows:
        name = l.split("  ")[0]
        fw, _, span = name.replace("==", " ").partition(" ")
        first, _, last = span.partition("\u2013")
        versions = known_versions(fw)
        covered += [f"{fw}=={v}" for v in versions[versions.index(first):versions.index(last or first) + 1]]
    assert covered == [f"{fw}=={v}" for fw in ("sglang", "vllm") for v in known_versions(fw)]
    assert any(l.startswith("sglang 0.5.12\u20130.5.15") and "will not load" in l for l in rows)
    newest = known_versions("sglang")[-1]
    assert any(l.split("  ")[0].endswith(newest) and l.rstrip().endswith("loads") for l in rows)
    # GLM-5 has no model class in sglang 0.5.5 and vllm 0.11.0: their rows say so
    assert [l for l in rows if l.rstrip().endswith("not supported by this release")] == [
        l for l in rows if l.startswith(("sglang==0.5.5 ", "vllm==0.11.0 "))]
    # ... one entry per framework: each prints its own refusal (read from its wheel's registry)
    assert r.stdout.count("TG601") == 1
    assert "TG601 target-unsupported [load-error] sglang 0.5.5, vllm 0.11.0 \u2014 2 findings\n" in r.stdout
    assert "\u2192 ValueError: Cannot find model module. 'GlmMoeDsaForCausalLM'" in r.stdout
    assert "\u2192 ValueError: Model architectures ['GlmMoeDsaForCausalLM'] are not supported" in r.stdout


@pytest.mark.parametrize("args", [
    ["check", "/nonexistent/checkpoint"],
    ["check", str(BUGGY), "--target", "tensorrt==1.0"],
    ["check", str(BUGGY), "--target", "sglang==0.4.0"],
    ["check", str(BUGGY), "--format", "xml"],
    ["check", str(BUGGY), "--select", "XX999"],
    ["rule", "NOPE1"],
])
def test_usage_errors_exit_2(args):
    r = ckptlint(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_fail_on_threshold(tmp_path):
    # An unverified version yields an info finding only: exit 0 by default, 1 with --fail-on info.
    r = ckptlint("check", str(FIXED), "-t", "sglang==0.5.19")
    assert r.returncode == 0
    r = ckptlint("check", str(FIXED), "-t", "sglang==0.5.19", "--fail-on", "info")
    assert r.returncode == 1


def test_output_file_written_only_when_asked(tmp_path):
    out = tmp_path / "report.json"
    r = ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15", "-f", "json", "-o", str(out))
    assert r.returncode == 1 and r.stdout == ""
    assert json.loads(out.read_text())["findings"]


def test_internal_error_exit_3_without_traceback(monkeypatch, capsys):
    import ckptlint.engine as engine

    def boom(*a, **k):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(engine, "check", boom)
    with pytest.raises(SystemExit) as exc:
        cli.main(["check", str(BUGGY)])
    assert exc.value.code == 3
    err = capsys.readouterr().err
    assert "internal error" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        cli.main(["--debug", "check", str(BUGGY)])
    assert "Traceback" in capsys.readouterr().err


def test_plan_shows_decisions_and_reasons():
    r = ckptlint("plan", str(BUGGY), "-t", "sglang==0.5.15", "--module", "eh_proj")
    assert r.returncode == 0, r.stderr
    assert "draft model.eh_proj" in r.stdout and "quantized mxfp4" in r.stdout
    r = ckptlint("plan", str(BUGGY), "-t", "sglang==0.5.16", "--format", "json")
    doc = json.loads(r.stdout)
    eh = [m for m in doc["modules"] if m["module"] == "model.eh_proj"][0]
    assert eh["decision"] == "unquantized" and "model.eh_proj" in eh["reason"]
    assert doc["draft_class"] == "GlmMoeDsaForCausalLMNextN" and doc["mtp_layers"] == [78]


def test_targets_rules_and_rule_docs():
    r = ckptlint("targets")
    assert r.returncode == 0 and "sglang==0.5.15" in r.stdout and "vllm==0.33.0" in r.stdout
    r = ckptlint("rules", "--format", "json")
    codes = {x["code"] for x in json.loads(r.stdout)}
    assert {"QD401", "MT701"} <= codes
    r = ckptlint("rule", "QD401")
    assert r.returncode == 0
    for section in ("## What it does", "## Why is this bad?", "## Example", "## How to fix"):
        assert section in r.stdout


def test_version_fast_path():
    r = ckptlint("--version")
    assert r.returncode == 0 and r.stdout.startswith("ckptlint ")


def test_targets_is_wrapped_to_the_width():
    from ckptlint.targets import list_targets

    r = subprocess.run([sys.executable, "-m", "ckptlint", "targets"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"}, timeout=60)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 100 or len(ln.split()) <= 1 for ln in lines)
    starts = [ln.split()[0] for ln in lines if not ln.startswith(" ")]
    assert starts == [t.id for t in list_targets()]
    assert all(ln.startswith(" " * 29) for ln in lines if ln.startswith(" "))
