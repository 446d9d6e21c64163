from __future__ import annotations

from ckptlint.findings import Consequence
from ckptlint.rules._layout import LayoutRule


class QuantizedShapeMismatch(LayoutRule):
    """
    ## What it does
    Compares the shape of every packed weight and scale of a quantized module with the shape the
    target allocates for its scheme (pack factor, group or block scale grid, per-tensor scalar),
    computed from the module's logical in/out features.

    ## Why is this bad?
    Parameters are allocated before loading; a tensor of another shape fails the loader's shape
    assertion (or, for experts, the `copy_` into the FusedMoE slot) after minutes of loading.

    ## Example
    A Quark MXFP4 linear `[N, K/2]` whose `weight_scale` is `[N, K/16]` (NVFP4 grid) instead of
    `[N, K/32]`.

    ## How to fix
    Re-export with the scheme the config declares, or correct the config's group/block size.
    """

    code = "SC503"
    name = "quantized-shape-mismatch"
    summary = "A packed weight or scale has a shape the target's scheme does not allocate"
    consequences = (Consequence.LOAD_ERROR,)
    kinds = ("shape",)

    def hint(self, issue):
        return "re-export the module with the declared scheme, or fix group_size / weight_block_size in the config"
