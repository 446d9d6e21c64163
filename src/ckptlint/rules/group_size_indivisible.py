from __future__ import annotations

from ckptlint.findings import Consequence
from ckptlint.rules._layout import LayoutRule


class GroupSizeIndivisible(LayoutRule):
    """
    ## What it does
    Flags a group-quantized module (MXFP4 group 32, NVFP4 group 16, INT4 group 128, …) whose
    input features are not a multiple of the group size.

    ## Why is this bad?
    Frameworks allocate `K / group` scale columns and their kernels require whole groups; a
    partial group either fails the scale shape check at load or cannot be built at all.

    ## Example
    A GPTQ `group_size: 128` export of a layer with in-features 11008 + 64.

    ## How to fix
    Exclude the module from quantization, or quantize with a group size that divides its
    in-features.
    """

    code = "SC505"
    name = "group-size-indivisible"
    summary = "A group-quantized module's in-features are not a multiple of the group size"
    consequences = (Consequence.LOAD_ERROR,)
    kinds = ("group",)

    def hint(self, issue):
        return f"exclude `{issue.shard.ckpt_module}` from quantization or use a group size that divides its in-features"
