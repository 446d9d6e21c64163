"""Many checkpoints in one run (`check A B C…`), the upgrade question, and checkpoint files as input:
the real outputs (text, JSON, JSON lines, Markdown, SARIF) read back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptlint.testing.builder import write_checkpoint
from ckptlint.testing.models import DenseDims, all_linears, ct_config, dense_spec
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
FIXED = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"
SCALE = ROOT / "fixtures" / "upstream" / "ct-fp8-channel-scale-1d"
SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"


def ckptlint(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    # wide, so that long clone paths do not wrap the lines the tests look for
    full = {**os.environ, "COLUMNS": "1000", **(env or {})}
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True,
                          timeout=timeout, env=full)


def small(path: Path, *, bad: bool = False) -> Path:
    """A small W4A16 Llama; ``bad``: one layer's MLP kept BF16 but not ignored (a load error on every release)."""
    d = DenseDims()
    layout = all_linears("ct_w4a16", skip=lambda m: m.category in ("lm_head", "embed", "router")
                         or (bad and m.path.startswith("model.layers.1.mlp.")))
    spec = dense_spec(d, layout, ct_config())
    path.mkdir(parents=True, exist_ok=True)
    write_checkpoint(path, config=spec.config, tensors=spec.tensors, shards=1)
    return path


def test_matrix_of_checkpoints_and_releases():
    r = ckptlint("check", str(BUGGY), str(FIXED), str(SCALE), "-t", "sglang==0.5.15", "-t", "sglang==0.5.23",
                 "--isolated")
    assert r.returncode == 1, r.stderr
    out = r.stdout
    # each checkpoint's own report, in the order given, then one matrix
    assert out.index(f"{BUGGY}: ") < out.index(f"{FIXED}: ") < out.index(f"{SCALE}: ")
    tail = out[out.index("3 checkpoints \u00d7 2 releases"):].splitlines()
    assert tail[1].split() == ["sglang"] and tail[2].split() == ["checkpoint", "0.5.15", "0.5.23"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in tail[3:6]}
    assert rows == {str(BUGGY): ["FAIL", "ok"], str(FIXED): ["ok", "ok"], str(SCALE): ["FAIL", "FAIL"]}
    assert tail[6].startswith("(ok loads")


def test_json_jsonl_markdown_and_sarif_of_several(tmp_path):
    args = [str(BUGGY), str(FIXED), "-t", "sglang==0.5.15", "--isolated", "-q"]
    doc = json.loads(ckptlint("check", *args, "-f", "json").stdout)
    assert doc["schema_version"] == 1 and [r["checkpoint"] for r in doc["reports"]] == [str(BUGGY), str(FIXED)]
    assert doc["matrix"][str(BUGGY)]["sglang==0.5.15"]["verdict"] == "will-not-load"
    assert doc["matrix"][str(FIXED)]["sglang==0.5.15"]["verdict"] == "loads"
    # each report is the single-checkpoint document
    single = json.loads(ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15", "--isolated", "-f", "json").stdout)
    assert doc["reports"][0] == single

    lines = ckptlint("check", *args, "-f", "jsonl").stdout.splitlines()
    assert [json.loads(ln) for ln in lines] == doc["reports"]

    md = ckptlint("check", *args, "-f", "markdown").stdout
    assert md.startswith("## ckptlint: 2 checkpoints, 1 failing\n")
    assert md.index("| checkpoint |") < md.index(f"### ckptlint: `{BUGGY}`") < md.index(f"### ckptlint: `{FIXED}`")
    assert f"| `{BUGGY}` | ❌ will not load |" in md

    sarif = json.loads(ckptlint("check", *args, "-f", "sarif").stdout)
    assert len(sarif["runs"]) == 2
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"QD401"} and sarif["runs"][1]["results"] == []


def test_unusable_checkpoint_among_many_is_reported_and_the_rest_checked(tmp_path):
    missing = tmp_path / "nope"
    r = ckptlint("check", str(FIXED), str(missing), "-t", "sglang==0.5.23", "--isolated", "-f", "jsonl")
    assert r.returncode == 2
    a, b = (json.loads(ln) for ln in r.stdout.splitlines())
    assert a["checkpoint"] == str(FIXED) and a["verdicts"]["sglang==0.5.23"]["verdict"] == "loads"
    assert b["checkpoint"] == str(missing) and "No such file" in b["error"]
    text = ckptlint("check", str(FIXED), str(missing), "-t", "sglang==0.5.23", "--isolated").stdout
    # the report wraps to the terminal width, so where a line breaks depends on how long the paths are
    assert f"{missing} error: " in " ".join(text.split())


def test_progress_on_stderr_and_quiet(tmp_path):
    paths = [str(small(tmp_path / f"c{i}")) for i in range(3)]
    r = ckptlint("check", *paths, "-t", "vllm==0.33.0", "--isolated")
    assert r.returncode == 0, r.stderr
    assert f"ckptlint: [3/3] {paths[2]}: 1 release(s) checked" in r.stderr
    assert "ckptlint: checked 3 checkpoints" in r.stderr
    assert ckptlint("check", *paths, "-t", "vllm==0.33.0", "--isolated", "-q").stderr == ""


def test_baseline_of_several_checkpoints_is_keyed_by_checkpoint(tmp_path):
    """--write-baseline over several checkpoints writes one format-2 file, keyed by each checkpoint's
    directory relative to the baseline file; --baseline then accepts each checkpoint's own findings only."""
    work = tmp_path / "repo"
    (work / "models").mkdir(parents=True)
    shutil.copytree(BUGGY, work / "models" / "a")
    shutil.copytree(BUGGY, work / "models" / "b")
    args = ["-t", "sglang==0.5.15", "--isolated", "-q"]
    base = work / "ckptlint-baseline.json"
    r = ckptlint("check", str(work / "models" / "a"), str(work / "models" / "b"), *args, "--write-baseline", str(base))
    assert r.returncode == 0, r.stderr
    doc = json.loads(base.read_text())
    assert doc["ckptlint_baseline"] == 2 and sorted(doc["checkpoints"]) == ["models/a", "models/b"]
    assert doc["checkpoints"]["models/a"] == doc["checkpoints"]["models/b"] and doc["checkpoints"]["models/a"]["findings"]
    assert "for 2 checkpoints" in r.stderr
    # from another directory, with the other spelling of the same paths: the keys still match
    r = ckptlint("check", str(work / "models" / "a") + "/", str(work / "models" / "b"), *args, "-f", "jsonl",
                 "--baseline", str(base))
    assert r.returncode == 0, r.stderr
    assert all(json.loads(ln)["findings"] == [] for ln in r.stdout.splitlines())
    # a checkpoint the baseline has no key for: all its findings are new, and the run says so
    shutil.copytree(BUGGY, work / "models" / "c")
    r = ckptlint("check", str(work / "models" / "a"), str(work / "models" / "c"), *args, "-f", "jsonl",
                 "--baseline", str(base))
    assert r.returncode == 1
    found = {json.loads(ln)["checkpoint"]: json.loads(ln)["findings"] for ln in r.stdout.splitlines()}
    assert found[str(work / "models" / "a")] == [] and found[str(work / "models" / "c")]
    assert "no entry for 'models/c'" in r.stderr
    # one checkpoint reads its key from a format-2 file too
    r = ckptlint("check", str(work / "models" / "b"), *args, "--baseline", str(base))
    assert r.returncode == 0, r.stderr


def test_single_checkpoint_baseline_is_refused_for_several(tmp_path):
    base = tmp_path / "b.json"
    r = ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15", "--isolated", "-q", "--write-baseline", str(base))
    assert r.returncode == 0 and json.loads(base.read_text())["ckptlint_baseline"] == 1  # unchanged for one
    r = ckptlint("check", str(BUGGY), str(FIXED), "-t", "sglang==0.5.15", "--isolated", "-q", "--baseline", str(base))
    assert r.returncode == 2 and "names no checkpoint" in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_fifty_checkpoints_in_well_under_fifty_single_checks(tmp_path):
    paths = [str(small(tmp_path / f"ck{i:02d}", bad=i % 7 == 0)) for i in range(50)]
    args = ["-t", "sglang==0.5.23", "-t", "vllm==0.33.0", "--isolated", "-q", "-f", "jsonl"]
    singles = []
    for p in paths[:3]:
        t0 = time.perf_counter()
        r = ckptlint("check", p, *args)
        singles.append(time.perf_counter() - t0)
        assert r.returncode in (0, 1)
    one = min(singles)
    t0 = time.perf_counter()
    r = ckptlint("check", *paths, *args)
    many = time.perf_counter() - t0
    docs = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [d["checkpoint"] for d in docs] == paths
    bad = [d["checkpoint"] for d in docs if d["verdicts"]["vllm==0.33.0"]["verdict"] == "will-not-load"]
    assert bad == [p for i, p in enumerate(paths) if i % 7 == 0] and r.returncode == 1
    print(f"\none check {one:.2f} s; 50 checkpoints {many:.2f} s = {many / one:.1f}x one check")
    assert many < 12.5 * one, (one, many)  # "well under 50x": at most a quarter of it


# --- the upgrade question --------------------------------------------------------------------------

def test_upgrade_says_what_breaks_and_what_gets_fixed():
    # fp8 0.5.9 skips a fused name listed in modules_to_not_convert (raw substring); 0.5.12+ test only its shards
    broken_later = ROOT / "fixtures" / "upstream" / "fp8-fused-name-in-skip-list"
    r = ckptlint("upgrade", "--from", "sglang==0.5.9", "--to", "sglang==0.5.23", str(BUGGY), str(broken_later),
                 str(SCALE), "--isolated", "-q")
    assert r.returncode == 1, r.stderr  # something breaks
    out = r.stdout.splitlines()
    assert out[0] == "Upgrading sglang==0.5.9 -> sglang==0.5.23: 1 breaks, 1 fixed, 1 unchanged"
    rows = {ln.split()[0]: ln for ln in out[3:]}
    assert "will not load" in rows[str(BUGGY)] and "fixed: QD401 " in rows[str(BUGGY)]
    assert "BREAKS: QD401" in rows[str(broken_later)] and "loads, wrong outputs" in rows[str(broken_later)]
    assert rows[str(SCALE)].rstrip().endswith("unchanged")
    doc = json.loads(ckptlint("upgrade", "--from", "sglang==0.5.15", "--to", "sglang==0.5.23", str(BUGGY),
                              "--isolated", "-f", "json").stdout)
    (row,) = doc["checkpoints"]
    assert row["change"] == "fixed" and row["before"]["verdict"] == "will-not-load" and row["after"]["verdict"] == "loads"
    # nothing breaks: exit 0
    assert ckptlint("upgrade", "--from", "sglang==0.5.15", "--to", "sglang==0.5.23", str(BUGGY), "--isolated",
                    "-q").returncode == 0


def test_upgrade_needs_two_single_releases():
    r = ckptlint("upgrade", "--from", "sglang", "--to", "sglang==0.5.23", str(BUGGY))
    assert r.returncode == 2 and "--from takes one release" in r.stderr


# --- a checkpoint file as input -----------------------------------------------------------------

def test_a_shard_stands_for_its_checkpoint(capsys):
    shard = next(BUGGY.glob("*.safetensors"))
    code, out, err = cli_run(capsys, "check", str(shard), "-t", "sglang==0.5.15", "--isolated", "-f", "json")
    assert code == 1, err
    doc = json.loads(out)
    code, whole, _ = cli_run(capsys, "check", str(BUGGY), "-t", "sglang==0.5.15", "--isolated", "-f", "json")
    whole = json.loads(whole)
    assert doc["checkpoint"] == str(BUGGY) and doc["findings"] == whole["findings"]
    assert doc["input"]["note"].startswith(f"{shard} is a file of the checkpoint in {BUGGY}")
    code, out, _ = cli_run(capsys, "check", str(shard), "-t", "sglang==0.5.15", "--isolated")
    head = " ".join(out.split())[: 200 + 4 * len(str(BUGGY))]  # the report's opening lines, whatever the clone path
    assert head.count(f"{shard} is a file of the checkpoint in {BUGGY}") == 1
    # config.json works the same way
    code, out, _ = cli_run(capsys, "check", str(BUGGY / "config.json"), "-t", "sglang==0.5.15", "--isolated", "-f", "json")
    assert json.loads(out)["findings"] == whole["findings"]


def test_a_lone_shard_is_a_container_check(tmp_path, capsys):
    lone = tmp_path / "lone.safetensors"
    shutil.copyfile(next(FIXED.glob("*.safetensors")), lone)
    code, out, err = cli_run(capsys, "check", str(lone), "--isolated", "-f", "json")
    doc = json.loads(out)
    assert doc["checkpoint"] == str(lone)
    assert "checked as a safetensors container only" in doc["input"]["note"]
    assert not [f for f in doc["findings"] if f["code"].startswith(("QD", "CF"))]


def test_plan_fix_inspect_accept_a_shard(capsys):
    shard = next(BUGGY.glob("*.safetensors"))
    code, out, err = cli_run(capsys, "plan", str(shard), "-t", "sglang==0.5.15", "-m", "eh_proj")
    assert code == 0 and "model.eh_proj" in out and "is a file of the checkpoint" in err
    code, out, err = cli_run(capsys, "fix", str(shard), "-t", "sglang==0.5.15")
    assert code == 1 and '+      "model.eh_proj"' in out  # (1: a change is pending)
    code, out, err = cli_run(capsys, "inspect", str(shard))
    assert code == 0 and "3,237" in out


def test_glm5_fixture_readmes_state_the_verdicts():
    """The two GLM-5 fixtures' READMEs name the releases they fail and load on: those are the verdicts."""
    r = ckptlint("check", str(BUGGY), str(FIXED), "-t", "sglang", "-t", "vllm", "--isolated", "-q", "-f", "json")
    m = json.loads(r.stdout)["matrix"]

    def verdicts(path):
        return {t.replace("==", " "): v["verdict"] for t, v in m[str(path)].items()}

    unsupported = {"sglang 0.5.5", "vllm 0.11.0"}
    bad = {t for t, v in verdicts(BUGGY).items() if v == "will-not-load"}
    assert {t for t, v in verdicts(BUGGY).items() if v == "not-supported"} == unsupported
    assert bad == {"sglang 0.5.9", "sglang 0.5.12", "sglang 0.5.15", "vllm 0.24.0"}
    assert {t for t, v in verdicts(FIXED).items() if v == "will-not-load"} == {"sglang 0.5.9"}
    assert {t for t, v in verdicts(FIXED).items() if v == "not-supported"} == unsupported
    readme = (BUGGY / "README.md").read_text()
    assert "SGLang 0.5.9-0.5.15" in readme and "vLLM 0.24.0" in readme and "Loads on SGLang 0.5.16+ and vLLM 0.26.0+" in readme
    assert "SGLang 0.5.9 still fails" in (FIXED / "README.md").read_text()
