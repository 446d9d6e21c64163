"""Upstream issues reproduced as shipped fixtures (fixtures/upstream/): each gives the consequence the
issue reports on the release it was reported against, and loads on the release that fixed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptlint.testing.upstream import CASES
from helpers import run

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
SERIOUS = ("load-error", "silent-corruption")


def test_at_least_twenty_cases_each_citing_upstream():
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)
    for c in CASES:
        assert c.refs and all("#" in r for r in c.refs)
        assert c.reported


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_upstream_case(case):
    path = ROOT / case.name
    assert path.is_dir(), f"run `python -m ckptlint.testing.fixtures fixtures` ({case.name} missing)"
    rep = run(path, *case.reported, *case.fixed, **case.deployment)
    for target, expected in case.reported.items():
        found = [(f.code, f.consequence.value, f.module) for f in rep.findings
                 if f.target == target and f.severity.value != "info"]
        if not expected:
            assert not [f for f in found if f[1] in SERIOUS], (target, found)
        for code, cons, module in expected:
            assert any(c == code and k == cons and (module is None or m == module) for c, k, m in found), \
                (target, (code, cons, module), found)
    for target in case.fixed:
        bad = [(f.code, f.module) for f in rep.findings if f.target == target and f.consequence.value in SERIOUS]
        assert bad == [], (target, bad)


def test_fusion_depends_on_the_gpu_and_the_server_flag():
    # The same NVFP4 checkpoint on SGLang 0.5.20: the default B200 (SM100) runner turns fusion off
    # (loads); SM120 fuses (crash); --disable-shared-experts-fusion is the fix that needs no re-export.
    path = ROOT / "nvfp4-bf16-shared-expert-fused-on-rtx-pro-6000"
    default = run(path, "sglang==0.5.20")
    assert not [f for f in default.findings if f.code == "QD403"]
    assert "flashinfer_trtllm" in default.plans["sglang==0.5.20"].fusion_reason
    rtx = run(path, "sglang==0.5.20", gpu="rtx-pro-6000")
    (f,) = [f for f in rtx.findings if f.code == "QD403"][:1]
    assert "--disable-shared-experts-fusion" in f.hint and f.data["server_flag"] == "--disable-shared-experts-fusion"
    off = run(path, "sglang==0.5.20", gpu="rtx-pro-6000", shared_experts_fusion=False)
    assert not [f for f in off.findings if f.code == "QD403"]
