"""gpt-oss MXFP4 experts (`*_blocks`/`*_scales`, one fused tensor per projection and layer): the
scales of this format get the same checks as any other format's (vLLM quantization/mxfp4.py and
SGLang layers/quantization/mxfp4.py create w13/w2 weight and scale parameters of these shapes; the
loaders copy the blocks and scales into them without a completeness check)."""

from __future__ import annotations

import pytest

from ckptlint.testing.published import gpt_oss
from helpers import build, run

TARGETS = ("sglang==0.5.5", "sglang==0.5.23", "vllm==0.11.0", "vllm==0.33.0")


def issues(report, target):
    return {(f.code, f.consequence.value, f.module) for f in report.findings
            if f.target == target and f.severity.value == "error"}


@pytest.mark.parametrize("size", ["20b", "120b"])
def test_published_gpt_oss_is_clean(tmp_path, size):
    rep = run(build(tmp_path, gpt_oss(size)), "sglang", "vllm")
    for t in rep.targets:
        assert issues(rep, t.id) == set(), t.id


def _broken(how: str):
    spec = gpt_oss("20b", layers=1)
    name = "model.layers.0.mlp.experts.gate_up_proj_scales"
    out = []
    for n, dt, s in spec.tensors:
        if n == name:
            if how == "missing":
                continue
            if how == "bf16":
                dt = "BF16"
            if how == "reshaped":
                s = (s[0], s[1] // 2, s[2])
        out.append((n, dt, s))
    spec.tensors = out
    return spec


def test_missing_scales_stay_at_their_initial_value(tmp_path):
    # the scale parameter keeps torch.zeros (vLLM; SGLang until 0.5.16) or 127 (SGLang 0.5.17+): the
    # experts run on wrong scales, silently
    rep = run(build(tmp_path, _broken("missing")), *TARGETS)
    for t in TARGETS:
        assert ("SC501", "silent-corruption", "model.layers.0.mlp.experts") in issues(rep, t), t


def test_scales_in_a_float_dtype_are_converted_by_value(tmp_path):
    # the weight loaders copy_() into the U8 exponent parameter: a BF16 tensor of the right shape is
    # converted by value, not reinterpreted
    rep = run(build(tmp_path, _broken("bf16")), *TARGETS)
    for t in TARGETS:
        assert ("SC504", "silent-corruption", "model.layers.0.mlp.experts") in issues(rep, t), t


def test_scales_of_the_wrong_shape_fail(tmp_path):
    rep = run(build(tmp_path, _broken("reshaped")), *TARGETS)
    for t in TARGETS:
        assert ("SC503", "load-error", "model.layers.0.mlp.experts") in issues(rep, t), t
