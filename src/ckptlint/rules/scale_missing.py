from __future__ import annotations

from ckptlint.findings import Consequence
from ckptlint.rules._layout import LayoutRule


class ScaleMissing(LayoutRule):
    """
    ## What it does
    For every module the target builds quantized and the checkpoint stores quantized, checks
    that each tensor the scheme requires (scales, global scales, zero points, static input
    scales) is present.

    ## Why is this bad?
    Frameworks allocate the scale parameters when they build the layer and nothing checks
    afterwards that they received a value: vLLM's FP8 linear scales keep a sentinel, FP8 MoE
    scales stay at 1.0, others keep uninitialised memory. The model loads and produces garbage.
    Only ModelOpt NVFP4 weight scales on vLLM 0.33 are checked (NaN placeholder).

    ## Example
    A block-FP8 DeepSeek export whose index lists `…mlp.experts.7.down_proj.weight` but whose
    shards lack `…mlp.experts.7.down_proj.weight_scale_inv`.

    ## How to fix
    Re-export the module (or re-download the shard that should hold the scale); never drop
    scale tensors when re-sharding.
    """

    code = "SC501"
    name = "scale-missing"
    summary = "A quantized module lacks a scale or companion tensor its scheme requires"
    consequences = (Consequence.SILENT_CORRUPTION, Consequence.LOAD_ERROR)
    kinds = ("missing",)

    def hint(self, issue):
        return f"store `{issue.shard.ckpt_module}.{issue.suffix}` with the module, or re-export the checkpoint"
