"""``check --format concise``: one ``PATH:LINE:COL: CODE [consequence] releases: message`` line per
finding (ruff's concise shape), then one line of verdicts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ckptlint.targets import known_versions

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
FIXED = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]{2}\d{3}) "
                  r"\[(?P<cons>load-error|silent-corruption|degraded|hygiene)\] (?P<where>[^:]+): (?P<msg>.+)$")


def ckptlint(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_one_line_per_finding_pointing_at_its_line():
    rel = BUGGY.relative_to(ROOT)
    r = ckptlint("check", str(rel), "--isolated", "-t", "sglang", "-t", "vllm", "-f", "concise")
    assert r.returncode == 1, r.stderr
    *lines, last = r.stdout.splitlines()
    parsed = [LINE.match(ln) for ln in lines]
    assert all(parsed), [ln for ln, m in zip(lines, parsed) if not m]
    # as many lines as the text report has findings (a finding on several releases is one line)
    text = ckptlint("check", str(rel), "--isolated", "-t", "sglang", "-t", "vllm").stdout
    shown = int(re.search(r"Found (\d+) finding\(s\)", text).group(1))
    assert len(lines) == shown
    config = (BUGGY / "config.json").read_text().splitlines()
    for m in parsed:
        assert m["path"] == f"{rel}/config.json"
        src = config[int(m["line"]) - 1]
        token = src[int(m["col"]) - 1:]
        if m["code"] == "QD401":
            # the skip-list entry under the checkpoint's name that failed to match
            entry = re.search(r"checkpoint-named entr(?:y|ies) `([^`]+)`", m["msg"]).group(1)
            assert token.startswith(json.dumps(entry)), (src, entry)
        else:
            assert token.startswith('"architectures"')
    eh = [m for m in parsed if "`model.eh_proj`" in m["msg"]]
    assert len(eh) == 1 and eh[0]["where"] == "sglang 0.5.12\u20130.5.15"
    # the verdict line: every release once, under its verdict
    doc = json.loads(ckptlint("check", str(rel), "--isolated", "-t", "sglang", "-t", "vllm", "-f", "json").stdout)
    assert last.startswith(f"{rel}: {shown} finding(s) ({len(doc['findings'])} counting each release); ")
    for label in {v["label"] for v in doc["verdicts"].values()}:
        assert f"; {label}: " in last
    assert sum(1 for fw in ("sglang", "vllm") for _ in known_versions(fw)) == len(doc["verdicts"])


def test_outside_the_working_directory_and_clean(tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(BUGGY, ck)
    r = ckptlint("check", str(ck), "--isolated", "-t", "sglang==0.5.15", "-f", "concise", cwd=ROOT)
    assert r.returncode == 1
    first = LINE.match(r.stdout.splitlines()[0])
    assert first and first["path"] == f"{ck}/config.json" and first["code"] == "QD401"
    r = ckptlint("check", str(FIXED.relative_to(ROOT)), "--isolated", "-t", "sglang==0.5.15", "-f", "concise")
    assert r.returncode == 0
    assert r.stdout == f"{FIXED.relative_to(ROOT)}: 0 finding(s); loads: sglang 0.5.15\n"


def test_several_checkpoints_and_a_report_file(tmp_path):
    out = tmp_path / "lint.txt"
    r = ckptlint("check", str(BUGGY.relative_to(ROOT)), str(FIXED.relative_to(ROOT)), str(tmp_path / "missing"),
                 "--isolated", "-t", "sglang==0.5.15", "-f", "concise", "--report", f"concise:{out}")
    assert r.returncode == 2  # one path could not be checked
    lines = r.stdout.splitlines()
    assert sum(1 for ln in lines if LINE.match(ln)) == 2
    assert f"{FIXED.relative_to(ROOT)}: 0 finding(s); loads: sglang 0.5.15" in lines
    assert any(ln.startswith(f"{tmp_path / 'missing'}: error: ") for ln in lines)
    assert out.read_text() == r.stdout
