from __future__ import annotations

from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.quant import parse_quant_config
from ckptlint.rules.base import Rule, RuleContext


class QuantConfigInvalid(Rule):
    """
    ## What it does
    Checks that `quantization_config` (or `hf_quant_config.json`) has the structure the
    frameworks read: an object with a string `quant_method`, and lists and numbers where the
    method expects them.

    ## Why is this bad?
    Frameworks index the config directly; a list where an object belongs or a number where a
    string belongs fails at startup with a Python exception that does not name the file.

    ## Example
    `"quantization_config": ["quark"]` or `"exclude": "lm_head"`.

    ## How to fix
    Regenerate the config with the quantizer, or correct the field the finding names.
    """

    code = "CF311"
    name = "quantization-config-invalid"
    summary = "quantization_config / hf_quant_config.json is not structured as frameworks expect"
    scope = "checkpoint"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        cfg = ctx.checkpoint.config
        _, findings = parse_quant_config(cfg if isinstance(cfg, dict) else None, ctx.checkpoint.hf_quant_config)
        for f in findings:
            f.code, f.name = self.code, self.name
            yield f
