"""A release with no behaviour change is added by one data file plus regeneration (docs/extending.md).

Done on a copy of the package: a data file for the release after the newest vLLM one, `extends` the
newest and says nothing changed; then the regeneration steps that need no wheel here: compiled.json
(`python -m ckptlint.targets.compile`), and the extracted knowledge (standing in for `scripts/conformance.py
extract`, which reads the wheel: the newest release's files under the new version). The copy then lists
the release, resolves `-t vllm==NEW` to it without the "not verified" warning, and gives it the newest
release's verdicts. Nothing else in the package is edited."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ckptlint.targets import known_versions, parse_version
from helpers import run_python

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"


def _run(pkg: Path, *args: str) -> subprocess.CompletedProcess:
    return run_python(*args, pythonpath=str(pkg), cwd=ROOT)


def test_one_data_file_plus_regeneration(tmp_path):
    newest = known_versions("vllm")[-1]
    nums = parse_version(newest)
    new = ".".join(map(str, (nums[0], nums[1] + 1, 0)))
    pkg = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "ckptlint", pkg / "ckptlint", ignore=shutil.ignore_patterns("__pycache__"))
    targets = pkg / "ckptlint" / "targets"
    (targets / "data" / "vllm" / f"{new}.toml").write_text(
        f'# vLLM {new}\nschema = 1\nframework = "vllm"\nversion = "{new}"\nextends = "{newest}"\n'
        f'released = "2027"\nsummary = """Nothing relevant to the simulated rules changed since {newest}."""\n\n'
        '[[sources]]\nfile = "vllm/model_executor/models/registry.py"\n'
        f'what = "identical behaviour to {newest}"\n', encoding="utf-8")
    r = _run(pkg, "-m", "ckptlint.targets.compile")
    assert r.returncode == 0, r.stderr
    compiled = json.loads((targets / "data" / "compiled.json").read_text())
    assert f"vllm=={new}" in json.dumps(compiled)
    # an architecture without hand data needs the extracted knowledge of the release: without it ...
    from casefiles import build_case, discover

    (case,) = [c for c in discover() if c.id == "TG605/minimax-m2-fp8-extracted"]
    minimax = tmp_path / "minimax"
    build_case(case, minimax)
    margs = ("-m", "ckptlint", "check", str(minimax), "--isolated", "-q", "-f", "json",
             "-t", f"vllm=={new}", "-t", f"vllm=={newest}")
    doc = json.loads(_run(pkg, *margs).stdout)
    assert not doc["verdicts"][f"vllm=={new}"].get("extracted")
    shutil.copytree(targets / "extracted" / "vllm" / newest, targets / "extracted" / "vllm" / new)
    # ... and with it, the same simulation as the newest release
    doc = json.loads(_run(pkg, *margs).stdout)
    got, ref = doc["verdicts"][f"vllm=={new}"], doc["verdicts"][f"vllm=={newest}"]
    assert got.get("extracted") is True and got["label"] == ref["label"] and got["counts"] == ref["counts"]

    listed = _run(pkg, "-m", "ckptlint", "targets")
    assert any(ln.startswith(f"vllm=={new} ") for ln in listed.stdout.splitlines()), listed.stdout
    args = ("-m", "ckptlint", "check", str(BUGGY), "--isolated", "-q", "-f", "json")
    doc = json.loads(_run(pkg, *args, "-t", f"vllm=={new}", "-t", f"vllm=={newest}").stdout)
    assert doc["resolved_targets"][f"vllm=={new}"] == f"vllm=={new}"
    assert not any(f["code"] == "TG602" for f in doc["findings"])  # verified: no "newer than the data"
    got, ref = doc["verdicts"][f"vllm=={new}"], doc["verdicts"][f"vllm=={newest}"]
    assert got["verdict"] == ref["verdict"] != "no-verdict" and got["counts"] == ref["counts"]
    # ranges take it in: `vllm` now ends at the new release
    doc = json.loads(_run(pkg, *args, "-t", "vllm").stdout)
    assert list(doc["verdicts"])[-1] == f"vllm=={new}"
