"""``check --format markdown``: a rule's findings that share their explanation are one entry, and
nothing the JSON says of a finding is lost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"


def ckptlint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_shared_explanation_once_every_module_kept():
    args = ("check", str(BUGGY), "--isolated", "-t", "sglang", "-t", "vllm")
    md = ckptlint(*args, "-f", "markdown").stdout
    doc = json.loads(ckptlint(*args, "-f", "json").stdout)
    qd = [f for f in doc["findings"] if f["code"] == "QD401"]
    heads = [ln for ln in md.splitlines() if ln.startswith("- **error `QD401`")]
    assert len(heads) == 1 and heads[0].endswith(" findings  ")
    assert md.count("no `exclude` entry matches the runtime name") == 1
    assert md.count("speculative decoding with the checkpoint's own MTP/NextN layer on") == 1
    assert md.count("Keep the checkpoint-named entries") == 1
    unescaped = md.replace("\\[", "[").replace("\\]", "]").replace("\\_", "_")
    for f in qd:
        assert f"`{f['module']}`" in unescaped
        assert f"`{f['error_text']}`" in unescaped
        assert f"`{f['data']['failed_entries'][0]}`" in unescaped
    assert len(md.splitlines()) < 5 * len(qd)
