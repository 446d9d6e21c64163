"""Smoke test of benchmarks/bench.py: the tiny scale runs end to end and writes sane JSON.

Checks structure and sanity (counts, ratios, that ckptlint read only headers), never timing
thresholds: the acceptance targets are for full scale on a quiet machine (benchmarks/README.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench.py"

pytestmark = pytest.mark.skipif(not BENCH.exists(), reason="benchmarks/ not present")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("bench")
    out = work / "results.json"
    cmd = [sys.executable, str(BENCH), "--scale", "tiny", "--reps", "1", "--workdir", str(work),
           "--json-out", str(out), "--profile", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ck/floor" in proc.stdout  # the table was printed
    data = json.loads(out.read_text())
    data["_workdir"] = work
    data["_cmd"] = cmd
    return data


def test_top_level_fields(results: dict) -> None:
    assert results["schema"] == 1
    assert results["scale"] == "tiny" and results["reps"] == 1
    assert results["date"][:2] == "20"
    m = results["machine"]
    assert m["cores"] >= 1 and m["python"].count(".") == 2
    assert "cpu_model" in m
    assert set(results["checkpoints"]) == {"deepseek", "kimi", "million"}
    st = results["startup"]
    for k in ("python_pass", "ckptlint_version"):
        assert st[k]["median_s"] > 0 and st[k]["max_rss_kib"] > 0
    assert st["ratio"] > 0
    ip = results["import_profile"]
    assert ip["total_ms"] > 0 and ip["top_cumulative"] and ip["top_self"]
    assert any(r["module"].startswith("ckptlint") for r in ip["top_cumulative"])
    names = {a["target"] for a in results["acceptance"]}
    assert len(names) == 6 and all(isinstance(a["pass"], bool) for a in results["acceptance"])
    (ratio,) = [a for a in results["acceptance"] if a["target"] == "deepseek: ckptlint <= 2.5x floor"]
    ds = results["checkpoints"]["deepseek"]
    assert ratio["quickest"] == round(ds["ckptlint"]["min_s"] / ds["floor"]["min_s"], 2)
    assert ratio["per_round_median"] == round(ds["ckptlint"]["runs_s"][0] / ds["floor"]["runs_s"][0], 2)  # 1 rep


def test_million_is_compared_with_deepseek_in_the_same_loop(results: dict) -> None:
    """The DeepSeek-V3 check runs in the million-tensor checkpoint's loop, and the 10x target uses
    that pair (a machine whose speed drifts between the two checkpoints' loops cannot skew it)."""
    mi, ds = results["checkpoints"]["million"], results["checkpoints"]["deepseek"]
    pr = mi["ckptlint_paired"]
    assert pr["checkpoint"] == "deepseek" and pr["exit_codes"] == [0] and len(pr["runs_s"]) == 1
    assert "ckptlint_paired" not in ds
    (target,) = [a for a in results["acceptance"] if a["target"].startswith("million: ckptlint <= 10x")]
    assert target["target"].endswith("(same loop)")
    assert target["measured"] == round(mi["ckptlint"]["median_s"] / pr["median_s"], 2)


@pytest.mark.parametrize("name", ["deepseek", "kimi", "million"])
def test_checkpoint_entry(results: dict, name: str) -> None:
    r = results["checkpoints"][name]
    # the same tensors seen by all three readers
    assert r["tensors"] > 100
    assert r["floor"]["tensors"] == r["safe_open"]["tensors"] == r["phases"]["tensors"] == r["tensors"]
    assert r["shards"] == r["phases"]["shards"] > 1
    # sparse: apparent size is the tensor bytes, the disk holds only headers and JSON
    assert r["apparent_bytes"] > r["header_bytes"] > 0
    assert r["disk_bytes"] < r["apparent_bytes"]
    assert r["index_bytes"] > 0
    # ckptlint reads headers only: exactly the bytes the floor reads
    assert r["phases"]["bytes_read"] == r["floor"]["header_bytes"] == r["header_bytes"]
    for kind in ("floor", "safe_open", "ckptlint", "phases"):
        s = r[kind]
        assert s["median_s"] > 0 and len(s["runs_s"]) == 1
        assert s["max_rss_kib"] > 1024  # > 1 MiB: a real process was measured
        assert s["rchar"] is None or s["rchar"] > 0
    assert r["floor"]["exit_codes"] == [0] and r["safe_open"]["exit_codes"] == [0]
    assert r["ckptlint"]["exit_codes"] == [0]  # the generated checkpoints are valid
    p = r["phases"]
    assert p["findings"] == 0, p["findings_by_code"]
    for k in ("import_s", "targets_s", "read_s", "simulate_s", "rules_s", "render_s"):
        assert p[k] >= 0
    assert p["check_s"] >= p["read_s"]
    assert len(p["targets"]) >= 2
    assert r["ratio_ckptlint_floor"] == pytest.approx(r["ckptlint"]["median_s"] / r["floor"]["median_s"])
    assert r["profile"]["top_cumulative"] and r["profile"]["top_self"]
    assert (results["_workdir"] / r["profile"]["file"]).is_file()


def test_generation_is_cached(results: dict) -> None:
    """A second run with the same parameters does not regenerate anything."""
    work = results["_workdir"]
    stamps = {p: p.stat().st_mtime_ns for p in work.glob("*.stamp.json")}
    assert len(stamps) == 3
    cmd = [sys.executable, str(BENCH), "--scale", "tiny", "--workdir", str(work), "--generate-only", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert {p: p.stat().st_mtime_ns for p in work.glob("*.stamp.json")} == stamps
