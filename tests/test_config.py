"""Configuration files (ckptlint.toml / [tool.ckptlint]): discovery, precedence, strict parsing,
CLI overrides, rule selection and per-tensor / per-module ignores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckptlint.config import ConfigError, find, load
from ckptlint.findings import Consequence, Finding
from ckptlint.targets import newest_targets
from ckptlint.selection import IgnoreRule, Layer, SelectorError, resolve_layers, resolve_selector
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
T = "sglang==0.5.15"  # the fixture's two QD401 errors (model.eh_proj, model.decoder.mlp.experts)

IGNORE_MTP = ('per-tensor-ignores = [{ pattern = "model.layers.78.*", codes = ["QD401"], '
              'reason = "the MTP layer is not served" }]\n')


ckptlint = cli_run  # (exit code, stdout, stderr) of an in-process CLI call


@pytest.fixture
def ckpt(tmp_path, monkeypatch) -> Path:
    """A copy of the buggy fixture (small, not sparse) inside the working directory (the user's
    repository, where the checkpoint's own settings apply)."""
    work = tmp_path / "work"
    dst = work / "ckpt"
    shutil.copytree(BUGGY, dst)
    monkeypatch.chdir(work)
    return dst


def check_json(capsys, *args: str) -> tuple[int, dict, str]:
    code, out, err = ckptlint(capsys, "check", *args, "--format", "json")
    return code, (json.loads(out) if out else {}), err


# --- discovery and precedence -------------------------------------------------------------

def test_ckptlint_toml_next_to_checkpoint(ckpt, capsys):
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}"]\n' + IGNORE_MTP)
    code, doc, err = check_json(capsys, str(ckpt))
    assert code == 0, err
    assert doc["targets"] == [T]
    assert doc["findings"] == []
    assert doc["summary"]["ignored"] == {"by_config": 2, "by_baseline": 0}
    assert doc["config_file"] == str(ckpt / "ckptlint.toml")
    assert "2 by rule selection and ignores" in err


def test_no_config_reports_zero_ignored(ckpt, capsys):
    code, doc, err = check_json(capsys, str(ckpt), "-t", T)
    assert code == 1
    assert doc["summary"]["ignored"] == {"by_config": 0, "by_baseline": 0}
    assert doc["config_file"] is None
    assert "ignored" not in err


def test_pyproject_in_working_directory(ckpt, capsys):
    Path("pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.ckptlint]\n' + f'target = ["{T}"]\n' + IGNORE_MTP)
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 0 and doc["summary"]["ignored"]["by_config"] == 2
    assert doc["config_file"] == "pyproject.toml"


def test_checkpoint_directory_beats_working_directory(ckpt, capsys):
    Path("ckptlint.toml").write_text(f'target = ["{T}"]\n' + IGNORE_MTP)
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}"]\n')  # no ignores: wins, so findings stay
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 1 and len(doc["findings"]) == 2
    assert doc["config_file"] == str(ckpt / "ckptlint.toml")


def test_pyproject_without_table_is_skipped(ckpt, capsys):
    (ckpt / "pyproject.toml").write_text('[project]\nname = "model"\n')
    Path("ckptlint.toml").write_text(f'target = ["{T}"]\n' + IGNORE_MTP)
    assert find(ckpt) == Path("ckptlint.toml")
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 0 and doc["summary"]["ignored"]["by_config"] == 2


def test_ckptlint_toml_beats_pyproject_in_same_directory(ckpt):
    (ckpt / "pyproject.toml").write_text('[tool.ckptlint]\ntp = 2\n')
    (ckpt / "ckptlint.toml").write_text('tp = 4\n')
    loaded = load(ckpt)
    assert loaded.path == ckpt / "ckptlint.toml" and loaded.config.tp == 4


def test_safetensors_file_path_uses_its_directory(ckpt):
    (ckpt / "ckptlint.toml").write_text('tp = 4\n')
    shard = next(ckpt.glob("*.safetensors"))
    assert find(shard) == ckpt / "ckptlint.toml"


def test_explicit_config_and_isolated(ckpt, tmp_path, capsys):
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}"]\n')
    other = tmp_path / "team.toml"
    other.write_text(f'target = ["{T}"]\n' + IGNORE_MTP)
    code, doc, _ = check_json(capsys, str(ckpt), "--config", str(other))
    assert code == 0 and doc["config_file"] == str(other)
    # --isolated: no file at all, so the default targets (newest releases, where the fixture loads)
    Path("ckptlint.toml").write_text('target = ["sglang==0.5.15"]\n' + IGNORE_MTP)
    code, doc, _ = check_json(capsys, str(ckpt), "--isolated", "-t", T)
    assert code == 1 and doc["config_file"] is None and doc["summary"]["ignored"]["by_config"] == 0
    code, _, err = ckptlint(capsys, "check", str(ckpt), "--isolated", "--config", str(other))
    assert code == 2 and "--isolated" in err


def test_explicit_pyproject_needs_its_table(ckpt, tmp_path, capsys):
    p = tmp_path / "pyproject.toml"
    p.write_text('[project]\nname = "x"\n')
    code, _, err = ckptlint(capsys, "check", str(ckpt), "--config", str(p))
    assert code == 2 and "[tool.ckptlint]" in err
    code, _, err = ckptlint(capsys, "check", str(ckpt), "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "not found" in err


# --- strict parsing: usage errors, one line naming the bad key -----------------------------

@pytest.mark.parametrize("text, needle", [
    ('selct = ["QD"]\n', "unknown field 'selct'"),
    ('extend_select = ["QD"]\n', "unknown field 'extend_select'"),
    ('per-tensor-ignores = [{ pattern = "x", codes = ["QD401"] }]\n', "per-tensor-ignores[0]: missing required field 'reason'"),
    ('per-module-ignores = [{ pattern = "x", codes = ["QD401"], reason = "  " }]\n', "per-module-ignores[0].reason"),
    ('per-module-ignores = [{ pattern = "x", codes = ["QD401"], reason = "r", reson = "t" }]\n',
     "per-module-ignores[0]: unknown field 'reson'"),
    ('per-tensor-ignores = [{ pattern = "x", codes = [], reason = "r" }]\n', "per-tensor-ignores[0].codes"),
    ('per-tensor-ignores = [{ pattern = "x", codes = ["QD999"], reason = "r" }]\n', "'QD999'"),
    ('select = ["QD9"]\n', "select: unknown rule code, prefix or name 'QD9'"),
    ('ignore = ["no-such-rule"]\n', "ignore: unknown rule code, prefix or name 'no-such-rule'"),
    ('extend-select = ["XX"]\n', "extend-select: unknown rule"),
    ('tp = "8"\n', "tp:"),
    ('tp = 0\n', "tp:"),
    ('speculative = "yes"\n', "speculative:"),
    ('platform = "tpu"\n', "platform:"),
    ('fail-on = "fatal"\n', "fail-on:"),
    ('target = ["sglang==0.1.0"]\n', "target:"),
    ('target = ["trtllm==1.0"]\n', "target:"),
    ('select = "QD401"\n', "select:"),
    ('select = [\n', "invalid TOML"),
])
def test_bad_config_is_a_usage_error(ckpt, capsys, text, needle):
    (ckpt / "ckptlint.toml").write_text(text)
    code, out, err = ckptlint(capsys, "check", str(ckpt))
    assert code == 2, out + err
    assert needle in err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckptlint: error: ")
    assert str(ckpt / "ckptlint.toml") in lines[0]


def test_pyproject_table_errors_name_the_table(ckpt, capsys):
    (ckpt / "pyproject.toml").write_text('[tool.ckptlint]\nselct = ["QD"]\n')
    code, _, err = ckptlint(capsys, "check", str(ckpt))
    assert code == 2 and "[tool.ckptlint]: unknown field 'selct'" in err


def test_bad_config_rejected_before_reading_checkpoint(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('selct = []\n')
    code, _, err = ckptlint(capsys, "check", str(tmp_path / "nowhere"), "--config", str(cfg))
    assert code == 2 and "selct" in err


def test_single_target_string_is_accepted(ckpt):
    (ckpt / "ckptlint.toml").write_text(f'target = "{T}"\n')
    assert load(ckpt).config.target == [T]


def test_load_raises_config_error(tmp_path):
    (tmp_path / "ckptlint.toml").write_text("bogus = 1\n")
    with pytest.raises(ConfigError, match="unknown field 'bogus'"):
        load(tmp_path, cwd=tmp_path)


# --- command-line flags override the file --------------------------------------------------

def test_cli_target_overrides_config(ckpt, capsys):
    (ckpt / "ckptlint.toml").write_text('target = ["sglang==0.5.16"]\n')
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 0 and doc["targets"] == ["sglang==0.5.16"]
    code, doc, _ = check_json(capsys, str(ckpt), "-t", T)
    assert code == 1 and doc["targets"] == [T]


def test_deployment_from_config_and_cli_override(ckpt, capsys):
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}"]\nspeculative = false\ntp = 2\nplatform = "rocm"\n')
    _, doc, _ = check_json(capsys, str(ckpt))
    assert doc["deployment"] == {"speculative": False, "platform": "rocm", "tp": 2, "gpu": None}
    assert not [f for f in doc["findings"] if f["code"] == "QD401"]  # no MTP draft: the exclude-prefix bug is moot
    code, doc, _ = check_json(capsys, str(ckpt), "--speculative", "--tp", "1")
    assert doc["deployment"] == {"speculative": True, "platform": "rocm", "tp": 1, "gpu": None}
    assert code == 1 and [f["code"] for f in doc["findings"]] == ["QD401", "QD401"]


def test_fail_on_from_config_and_cli_override(ckpt, capsys):
    # sglang==0.5.19 is unverified: one info finding (TG602) on a target where the fixture loads.
    (ckpt / "ckptlint.toml").write_text('target = ["sglang==0.5.19"]\nfail-on = "info"\n')
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 1 and {f["code"] for f in doc["findings"]} == {"TG602"}
    code, _, _ = check_json(capsys, str(ckpt), "--fail-on", "error")
    assert code == 0


def test_select_ignore_from_config_then_cli_layer(ckpt, capsys):
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}", "sglang==0.5.19"]\nignore = ["QD"]\n')
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 0 and {f["code"] for f in doc["findings"]} == {"TG602"}
    assert doc["summary"]["ignored"]["by_config"] == 2
    code, doc, _ = check_json(capsys, str(ckpt), "--extend-select", "quantization-mismatch")
    assert code == 1 and {f["code"] for f in doc["findings"]} == {"QD401", "TG602"}
    code, doc, _ = check_json(capsys, str(ckpt), "--select", "QD4,MT")
    assert code == 1 and {f["code"] for f in doc["findings"]} == {"QD401"}
    code, _, err = ckptlint(capsys, "check", str(ckpt), "--ignore", "QD9")
    assert code == 2 and "'QD9'" in err


def test_per_module_ignore(ckpt, capsys):
    (ckpt / "ckptlint.toml").write_text(
        f'target = ["{T}"]\nper-module-ignores = [{{ pattern = "model.eh_proj", codes = ["QD"], reason = "r" }}]\n')
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 1
    assert [f["module"] for f in doc["findings"]] == ["model.decoder.mlp.experts"]
    assert doc["summary"]["ignored"]["by_config"] == 1
    assert doc["summary"]["total"] == 1


def test_per_tensor_ignore_needs_every_tensor_to_match(ckpt, capsys):
    # Only expert 0 matches: the experts finding also involves experts 1..3, so it stays.
    (ckpt / "ckptlint.toml").write_text(
        f'target = ["{T}"]\nper-tensor-ignores = [{{ pattern = "model.layers.78.mlp.experts.0.*", '
        'codes = ["QD401"], reason = "r" }, { pattern = "model.layers.78.eh_proj.*", codes = ["MT"], reason = "r" }]\n')
    code, doc, _ = check_json(capsys, str(ckpt))
    assert code == 1 and len(doc["findings"]) == 2 and doc["summary"]["ignored"]["by_config"] == 0


def test_text_output_counts_only_kept_findings(ckpt, capsys):
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}"]\n' + IGNORE_MTP)
    code, out, err = ckptlint(capsys, "check", str(ckpt))
    assert code == 0
    assert "Found 0 finding(s)" in out
    # The verdict stays honest: the ignored findings still stop the server, and the reason is printed.
    assert "will not load (ignored by configuration)" in out
    # one line per left-out finding: what it was, where, and why
    assert "  error QD401 [load-error] sglang 0.5.15 `model.eh_proj`: per-tensor-ignores `model.layers.78.*`:" in out
    assert " ".join(out.split()).count("per-tensor-ignores `model.layers.78.*`: the MTP layer is not served") == 2
    assert "2 by rule selection and ignores" in err and "ckptlint.toml" in err


def test_plan_and_fix_take_target_and_deployment_from_config(ckpt, capsys):
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}"]\n')
    code, out, err = ckptlint(capsys, "plan", str(ckpt), "--module", "eh_proj", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["target"] == T
    code, out, _ = ckptlint(capsys, "fix", str(ckpt))
    assert code == 1 and "+      \"model.eh_proj\"" in out  # 1: the change is pending
    # speculative off in the config: nothing to fix on that target
    (ckpt / "ckptlint.toml").write_text(f'target = ["{T}"]\nspeculative = false\n')
    code, out, err = ckptlint(capsys, "fix", str(ckpt))
    assert code == 0 and out == "" and "nothing to fix" in err


def test_plan_without_single_target_is_usage_error(ckpt, capsys):
    code, out, err = ckptlint(capsys, "fix", str(ckpt))
    assert code == 2 and "--target" in err
    # plan, like inspect, defaults to the newest verified SGLang release and says so
    code, out, err = ckptlint(capsys, "plan", str(ckpt))
    newest = [t.id for t in newest_targets() if t.framework == "sglang"][0]
    assert code == 0 and f"target: {newest}" in out and f"no --target given: {newest}" in err
    # fix takes several releases (a range, every release of a framework) and makes one edit for them
    (ckpt / "ckptlint.toml").write_text('target = ["sglang>=0.5.12"]\n')
    code, out, err = ckptlint(capsys, "fix", str(ckpt))
    assert code == 1 and "+      \"model.eh_proj\"" in out and "re-checked with the change" in err


# --- selection semantics (unit) ------------------------------------------------------------

def test_selectors_code_prefix_name_all():
    assert resolve_selector("QD401") == (frozenset({"QD401"}), 100)
    assert resolve_selector("qd401")[0] == {"QD401"}
    assert resolve_selector("quantization-mismatch")[0] == {"QD401"}
    assert resolve_selector("QD4")[0] == {"QD401", "QD402", "QD403"}
    assert resolve_selector("QD")[0] == {"QD401", "QD402", "QD403"}
    assert "SF101" in resolve_selector("ALL")[0]
    for bad in ("QD9", "Q", "QD4011", "XX", "quantization", ""):
        with pytest.raises(SelectorError):
            resolve_selector(bad)


def test_layers_specificity_and_override():
    every = resolve_layers([])
    assert resolve_layers([Layer(ignore=["QD"], extend_select=["QD401"])]) == every - {"QD402", "QD403"}
    assert resolve_layers([Layer(select=["QD4"], ignore=["QD402", "QD403"])]) == {"QD401"}
    assert resolve_layers([Layer(select=["QD401"], ignore=["QD401"])]) == set()  # tie: ignore wins
    # A later (command-line) layer's select replaces the earlier selection...
    assert resolve_layers([Layer(select=["MT"]), Layer(select=["QD401"])]) == {"QD401"}
    # ...while without select it builds on it.
    assert resolve_layers([Layer(select=["MT"]), Layer(extend_select=["QD401"])]) == {"MT701", "MT702", "MT703", "QD401"}
    assert resolve_layers([Layer(ignore=["QD"]), Layer(ignore=["MT701"])]) == every - {"QD401", "QD402", "QD403", "MT701"}


def _finding(**kw) -> Finding:
    base = dict(code="QD401", consequence=Consequence.LOAD_ERROR, message="m", target=T)
    base.update(kw)
    return Finding(**base)


def test_ignore_rules_unit():
    t = IgnoreRule("tensor", "model.layers.78.*", ["QD"], "r")
    assert t.matches(_finding(tensors=["model.layers.78.a.weight", "model.layers.78.b.weight"]))
    assert not t.matches(_finding(tensors=["model.layers.78.a.weight", "model.layers.7.b.weight"]))
    assert not t.matches(_finding(tensors=[]))
    assert not t.matches(_finding(code="MT701", tensors=["model.layers.78.a.weight"]))
    m = IgnoreRule("module", "model.layers.*.mlp.experts", ["quantization-mismatch"], "r")
    assert m.matches(_finding(module="model.layers.10.mlp.experts"))
    assert not m.matches(_finding(module="model.decoder.mlp.experts"))
    assert not m.matches(_finding(module=None, tensors=["model.layers.10.mlp.experts"]))
    assert not IgnoreRule("module", "Model.*", ["QD"], "r").matches(_finding(module="model.eh_proj"))  # case-sensitive
