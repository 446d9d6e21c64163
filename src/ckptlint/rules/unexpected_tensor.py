from __future__ import annotations

from ckptlint.findings import Consequence
from ckptlint.rules._layout import LayoutRule


class UnexpectedTensor(LayoutRule):
    """
    ## What it does
    Flags tensors of a quantized module that the target's scheme does not register as a
    parameter, including a scale stored under another scale's name (block-FP8 `weight_scale`
    where the framework registers `weight_scale_inv`, or the reverse).

    ## Why is this bad?
    Hand-written loaders (vLLM DeepSeek) look every name up and raise `KeyError`; permissive
    loaders (SGLang DeepSeek) warn and skip it, so the real scale is never loaded and the layer
    runs with a placeholder scale: garbage output.

    ## Example
    llm-compressor `model_free_ptq` block FP8 saved as `…gate_proj.weight_scale` for a target
    whose fp8 block method registers `weight_scale_inv` (vLLM issue #43564).

    ## How to fix
    Rename the tensors to the names the target registers (or export with a quantizer version
    that writes them), or pick the quant method whose names the checkpoint uses.
    """

    code = "SC502"
    name = "unexpected-tensor"
    summary = "A quantized module carries a tensor the target registers no parameter for"
    consequences = (Consequence.LOAD_ERROR, Consequence.SILENT_CORRUPTION)
    kinds = ("unexpected", "scale-name")

    def hint(self, issue):
        return f"rename or drop `{issue.shard.ckpt_module}.{issue.suffix}` to match the target's parameters"
