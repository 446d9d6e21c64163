"""``check --format sarif``: valid SARIF 2.1.0 (official schema), rules, regions, fingerprints; the JSON locator."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptlint.render import locate
from ckptlint.render.locate import JsonLocator
from ckptlint.render.sarif import to_sarif
from ckptlint.rules import ALL_RULES
from ckptlint.testing.models import MoeDims, glm5_quark_mxfp4

from helpers import build, run

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SCHEMA_FILE = DATA / "sarif-schema-2.1.0.json"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"


def _validator():
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def assert_valid(doc: dict) -> None:
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


def sarif_cli(*args: str, cwd: Path = ROOT) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "ckptlint", "check", *args, "--format", "sarif"],
                       capture_output=True, text=True, timeout=120, cwd=cwd)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def token_at(path: Path, region: dict) -> str:
    line = lines_of(path)[region["startLine"] - 1]
    return line[region["startColumn"] - 1:region["endColumn"] - 1]


@pytest.fixture(scope="module")
def fixture_sarif() -> tuple[int, dict]:
    return sarif_cli(os.path.relpath(BUGGY, ROOT), "--target", "sglang==0.5.15")


# ------------------------------------------------------------------------------ schema


def test_vendored_schema_is_the_recorded_file():
    assert hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest() == SCHEMA_SHA256
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif-schema-2.1.0.json") and "draft-04" in schema["$schema"]


def test_schema_rejects_an_invalid_document():
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {}}, "results": [{"message": {}}]}]}
    assert list(_validator().iter_errors(bad))


def test_fixture_sarif_is_valid_and_exit_code_kept(fixture_sarif):
    rc, doc = fixture_sarif
    assert rc == 1  # findings: the exit code does not depend on the format
    assert_valid(doc)
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    run_ = doc["runs"][0]
    assert run_["invocations"] == [{"executionSuccessful": True}]


# ------------------------------------------------------------------------------- rules


def test_driver_rules_come_from_the_registry(fixture_sarif):
    _, doc = fixture_sarif
    driver = doc["runs"][0]["tool"]["driver"]
    assert driver["name"] == "ckptlint" and driver["version"]
    assert [r["id"] for r in driver["rules"]] == [r.code for r in ALL_RULES]
    by_id = {r["id"]: r for r in driver["rules"]}
    qd = by_id["QD401"]
    assert qd["name"] == "quantization-mismatch"
    assert qd["shortDescription"]["text"].startswith("A module is built quantized but stored unquantized")
    assert qd["fullDescription"]["text"].startswith("Simulates, for the selected framework release")
    assert "## Why is this bad?" in qd["help"]["markdown"] and "## How to fix" in qd["help"]["text"]
    assert qd["defaultConfiguration"]["level"] == "error"
    for r in driver["rules"]:
        assert 0 < len(r["shortDescription"]["text"]) <= 1024 and 0 < len(r["fullDescription"]["text"]) <= 1024
        assert r["defaultConfiguration"]["level"] in ("error", "warning", "note")
        assert "security-severity" not in r.get("properties", {})


# ----------------------------------------------------------------------------- results


def test_fixture_results_point_at_the_exclude_entries(fixture_sarif):
    _, doc = fixture_sarif
    run_ = doc["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    results = run_["results"]
    assert {r["ruleId"] for r in results} == {"QD401"} and len(results) == 2
    rel = os.path.relpath(BUGGY, ROOT).replace(os.sep, "/")
    assert run_["originalUriBaseIds"]["CHECKPOINT"] == {
        "uri": rel + "/", "uriBaseId": "%SRCROOT%", "description": {"text": "The checkpoint directory."}}
    for res in results:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] == "error"
        assert res["message"]["text"].startswith("sglang==0.5.15: `model.")
        phys = res["locations"][0]["physicalLocation"]
        assert phys["artifactLocation"] == {"uri": f"{rel}/config.json", "uriBaseId": "%SRCROOT%"}
        region = phys["region"]
        # The failed checkpoint-named entry of quantization_config.exclude, quoted.
        tok = token_at(BUGGY / "config.json", region)
        assert tok.startswith('"model.layers.78.') and tok.endswith('"')
        assert json.loads(tok) in json.loads((BUGGY / "config.json").read_text())["quantization_config"]["exclude"]
        logical = res["locations"][0]["logicalLocations"]
        assert logical[0]["kind"] == "module" and logical[0]["fullyQualifiedName"].startswith("model.")
        assert all(ll["kind"] == "member" for ll in logical[1:]) and len(logical) > 1
        assert res["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(".safetensors")
        assert "region" not in res["relatedLocations"][0]["physicalLocation"]
        props = res["properties"]
        assert props["consequence"] == "load-error" and props["target"] == "sglang==0.5.15"
        assert "`model." in props["hint"] and props["error_text"]
    eh = next(r for r in results if r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "model.eh_proj")
    assert token_at(BUGGY / "config.json", eh["locations"][0]["physicalLocation"]["region"]) == '"model.layers.78.eh_proj"'


def test_fingerprints_stable_across_runs_and_include_the_target():
    a = to_sarif(run(BUGGY, "sglang==0.5.15"), cwd=str(ROOT))
    b = to_sarif(run(BUGGY, "sglang==0.5.15"), cwd=str(ROOT))
    fa = [r["partialFingerprints"] for r in a["runs"][0]["results"]]
    fb = [r["partialFingerprints"] for r in b["runs"][0]["results"]]
    assert fa and fa == fb and len({f["ckptlint/v1"] for f in fa}) == len(fa)
    assert all(f["primaryLocationLineHash"] == f["ckptlint/v1"][:16] + ":1" for f in fa)
    # The same defect seen by another requested target is another alert.
    c = to_sarif(run(BUGGY, "sglang==0.5.12", "sglang==0.5.15"), cwd=str(ROOT))
    by_target: dict[str, set] = {}
    for r in c["runs"][0]["results"]:
        by_target.setdefault(r["properties"]["target"], set()).add(r["partialFingerprints"]["ckptlint/v1"])
    assert by_target["sglang==0.5.15"] == {f["ckptlint/v1"] for f in fa} and len(by_target) == 2
    for t, fps in by_target.items():
        if t != "sglang==0.5.15":
            assert not fps & by_target["sglang==0.5.15"]


def test_no_findings_is_valid_with_empty_results():
    doc = to_sarif(run(ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed", "sglang==0.5.15"),
                   cwd=str(ROOT))
    assert_valid(doc)
    assert doc["runs"][0]["results"] == []
    assert len(doc["runs"][0]["tool"]["driver"]["rules"]) == len(ALL_RULES)
    assert doc["runs"][0]["originalUriBaseIds"]["CHECKPOINT"]["uri"] == "fixtures/glm5-quark-mxfp4-mtp-exclude-prefix-fixed/"


def test_mtp_missing_points_at_num_nextn_predict_layers(tmp_path):
    ck = build(tmp_path, glm5_quark_mxfp4(MoeDims(num_hidden_layers=4, first_k_dense_replace=1), with_mtp=False))
    report = run(ck)
    doc = to_sarif(report, cwd=str(tmp_path))
    assert_valid(doc)
    mt = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "MT701"]
    assert mt, [r["ruleId"] for r in doc["runs"][0]["results"]]
    for r in mt:
        phys = r["locations"][0]["physicalLocation"]
        assert phys["artifactLocation"]["uri"] == "ckpt/config.json"
        assert token_at(ck / "config.json", phys["region"]) == '"num_nextn_predict_layers"'


def test_index_findings_point_at_weight_map_entries(tmp_path):
    ck = build(tmp_path, glm5_quark_mxfp4(MoeDims(num_hidden_layers=4, first_k_dense_replace=1)))
    shard = sorted(p.name for p in ck.glob("*.safetensors"))[-1]
    (ck / shard).unlink()
    report = run(ck, "sglang==0.5.17")
    doc = to_sarif(report, cwd=str(tmp_path))
    assert_valid(doc)
    missing = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "IX204"]
    assert missing
    idx = json.loads((ck / "model.safetensors.index.json").read_text())["weight_map"]
    for r in missing:
        phys = r["locations"][0]["physicalLocation"]
        assert phys["artifactLocation"]["uri"] == "ckpt/model.safetensors.index.json"
        tok = token_at(ck / "model.safetensors.index.json", phys["region"])
        assert idx[json.loads(tok)] == shard  # the weight_map entry of a tensor in the missing shard


def test_container_problems_and_outside_cwd_are_valid(tmp_path):
    ck = build(tmp_path, glm5_quark_mxfp4(MoeDims(num_hidden_layers=4, first_k_dense_replace=1)))
    shard = sorted(ck.glob("*.safetensors"))[0]
    with open(shard, "r+b") as fh:  # truncate inside the data: SF113
        fh.truncate(shard.stat().st_size // 2)
    (ck / "stray.safetensors").write_bytes(b"")  # unreferenced and too small
    (ck / "config.json").write_text((ck / "config.json").read_text().replace('"model_type"', '"model_type": "x", "model_type"'))
    report = run(ck, "sglang==0.5.15", "vllm")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    doc = to_sarif(report, cwd=str(elsewhere))
    assert_valid(doc)
    results = doc["runs"][0]["results"]
    codes = {r["ruleId"] for r in results}
    assert {"SF113", "IX209", "CF304"} <= codes, codes
    for r in results:
        for loc in r["locations"]:
            if "physicalLocation" in loc:
                art = loc["physicalLocation"]["artifactLocation"]
                assert art["uri"].startswith("file:///") and "uriBaseId" not in art
                if art["uri"].endswith(".safetensors"):
                    assert "region" not in loc["physicalLocation"]  # never line-hash a binary
    dup = next(r for r in results if r["ruleId"] == "CF304")
    assert dup["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1


def test_single_file_checkpoint_has_no_region(tmp_path):
    ck = build(tmp_path, glm5_quark_mxfp4(MoeDims(num_hidden_layers=4, first_k_dense_replace=1)), shards=1)
    files = list(ck.glob("*.safetensors"))
    assert len(files) == 1
    report = run(ck, "sglang==0.5.15")
    doc = to_sarif(report, cwd=str(tmp_path))
    assert_valid(doc)


# ------------------------------------------------------------------------------ locator


CONFIG_TEXT = """{
  "a": {"exclude": ["x", "y"], "b": [{"exclude": "z"}]},
  "exclude": [
    "y",
    "esc\\"aped\\u00e9"
  ],
  "dup": 1,
  "dup": 2
}
"""


@pytest.mark.parametrize("large", [False, True])
def test_locator_paths_values_and_escapes(large):
    loc = JsonLocator(CONFIG_TEXT)
    loc.large = large
    assert loc.key(("a", "exclude")).line == 2
    assert loc.value(("a", "exclude"), "y").line == 2
    assert loc.value(("exclude",), 'esc"apedé').line == 5
    if not large:  # nesting is tracked exactly only on small texts (large: path order, not depth)
        assert loc.key(("exclude",)).line == 3
        assert loc.value(("exclude",), "y").line == 4
        assert loc.key(("a", "b", 0, "exclude")).line == 2
        assert loc.key(("dup",)).line == 8  # the key in effect is the later one
        assert loc.value(("a", "exclude"), "q") is None
    assert loc.key(("missing",)) is None
    s = loc.key(("a", "exclude"))
    line = CONFIG_TEXT.split("\n")[s.line - 1]
    assert line[s.column - 1:s.end_column - 1] == '"exclude"'


def test_locator_bulk_mode_agrees_with_find_mode(monkeypatch):
    wm = {f"model.layers.{i}.w": f"s{i % 3}.safetensors" for i in range(200)}
    text = json.dumps({"metadata": {"total_size": 1}, "weight_map": wm}, indent=2)
    small = JsonLocator(text)
    big = JsonLocator(text)
    big.large = True
    monkeypatch.setattr(locate, "BULK_AFTER", 10)
    for i in range(0, 200, 7):
        assert big.key(("weight_map", f"model.layers.{i}.w")) == small.key(("weight_map", f"model.layers.{i}.w"))
    assert big._bulk_keys is not None  # switched to the one-pass index
    assert big.value(("weight_map",), "s2.safetensors") == small.value(("weight_map",), "s2.safetensors")
    assert big.key(("weight_map", "nope")) is None


def test_locator_is_fast_on_a_large_index():
    n = 120_000  # ~13 MB of index JSON; a 1M-tensor index (~110 MB): ~15 ms a lookup, ~2 s in bulk mode
    wm = {f"model.layers.{i // 1000}.mlp.experts.{i % 1000}.down_proj.weight_scale_{i}": f"model-{i % 64 + 1:05d}-of-00064.safetensors"
          for i in range(n)}
    text = json.dumps({"metadata": {"total_size": 1}, "weight_map": wm}, indent=2)
    assert len(text) > locate.SMALL_TEXT
    loc = JsonLocator(text)
    t0 = time.perf_counter()
    for i in range(0, n, n // 20):
        name = f"model.layers.{i // 1000}.mlp.experts.{i % 1000}.down_proj.weight_scale_{i}"
        s = loc.key(("weight_map", name))
        assert s is not None and s.line == i + 6
    assert time.perf_counter() - t0 < 3.0  # typically ~0.1 s: no full parse for a few lookups
    assert loc._keys is None and loc._bulk_keys is None


def test_json_syntax_error_points_at_its_position(tmp_path):
    ck = build(tmp_path, glm5_quark_mxfp4(MoeDims(num_hidden_layers=4, first_k_dense_replace=1)))
    text = (ck / "config.json").read_text().split("\n")
    text[5] = text[5] + " oops"
    (ck / "config.json").write_text("\n".join(text))
    doc = to_sarif(run(ck, "sglang==0.5.15"), cwd=str(tmp_path))
    assert_valid(doc)
    bad = next(r for r in doc["runs"][0]["results"] if r["ruleId"] == "CF302")
    region = bad["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 6 and region["startColumn"] > 1


def test_result_cap_keeps_the_most_severe(tmp_path, monkeypatch):
    from ckptlint.checkpoint import Checkpoint
    from ckptlint.engine import Report
    from ckptlint.findings import Consequence, Finding
    from ckptlint.render import sarif

    monkeypatch.setattr(sarif, "MAX_RESULTS", 3)
    fs = [Finding(code="IX207", name="tensor-not-in-index", consequence=Consequence.HYGIENE, message=f"h{i}",
                  tensors=[f"t{i}"]) for i in range(4)]
    fs.insert(2, Finding(code="SF113", name="shard-truncated", consequence=Consequence.LOAD_ERROR, message="e",
                         file="a.safetensors"))
    doc = sarif.to_sarif(Report(checkpoint=Checkpoint(root=str(tmp_path)), targets=[], findings=fs), cwd=str(tmp_path))
    assert_valid(doc)
    run_ = doc["runs"][0]
    assert [r["message"]["text"] for r in run_["results"]] == ["h0", "h1", "e"]
    assert run_["properties"]["results_left_out"] == 2
