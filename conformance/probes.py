"""The probe matrix: single-entry skip lists over a small synthetic model per architecture family
and method, built in memory (``ckptside.in_memory``: no files).

Each probe is one checkpoint whose linears are all stored quantized in the method's format and whose
skip list holds one entry of a kind (``ENTRY_KINDS``): the parent module, a dotted suffix, the fused
runtime name, one shard, a glob, a ``re:`` regex, a bare leaf name, a per-expert entry, the FusedMoE
prefix; for GPTQ ``dynamic``, a ``-:`` rule alone and ``+:``/``-:`` rules in both orders. ckptlint's
decision for every module of the probe is compared with the framework's, like a fixture's.
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple

from ckptlint.checkpoint import Checkpoint
from ckptlint.testing import models

from conformance.ckptside import in_memory

# (family, dims): the architecture families the SGLang and vLLM targets simulate with fused
# q/k/v and gate/up (dense) and with FusedMoE experts (MoE)
FAMILIES = {
    "llama": models.DenseDims(num_hidden_layers=2),
    "qwen3_moe": models.qwen3_moe_dims(num_hidden_layers=2),
    "mixtral": models.mixtral_dims(num_hidden_layers=2),
}

FP8_CHANNEL = {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "strategy": "channel",
               "dynamic": False, "actorder": None, "block_structure": None, "observer": "minmax"}


def _config(method: str, entries: list[str], dynamic: dict[str, Any] | None = None
            ) -> tuple[dict[str, Any], str, dict[str, Any] | None]:
    """(quantization_config, store format, hf_quant_config)."""
    if method == "fp8":
        return ({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                 "ignored_layers": entries}, "fp8_block", None)
    if method == "compressed-tensors":
        return (models.ct_config("float-quantized", weights=FP8_CHANNEL,
                                 input_activations={**FP8_CHANNEL, "strategy": "token", "dynamic": True},
                                 ignore=["lm_head"] + entries), "ct_fp8_channel", None)
    if method == "quark":
        return models.quark_mxfp4_config(["lm_head"] + entries), "mxfp4", None
    if method == "modelopt_fp8":
        return ({"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"] + entries},
                "fp8_tensor", None)
    if method == "gptq":
        return models.gptq_config(dynamic=dynamic or {}), "gptq", None
    raise ValueError(method)


METHODS = ("fp8", "compressed-tensors", "quark", "modelopt_fp8", "gptq")


def _entries(family: str, d: models.DenseDims) -> dict[str, str]:
    """Entry kind -> one skip-list entry (checkpoint names, layer 0)."""
    p = "model.layers.0"
    out = {
        "parent": f"{p}.self_attn",
        "dotted_suffix": "self_attn.o_proj",
        "fused_qkv": f"{p}.self_attn.qkv_proj",
        "shard_q": f"{p}.self_attn.q_proj",
        "all_shards_qkv": None,  # expanded below: q, k and v listed
        "glob": "*.o_proj",
        "glob_layer": f"{p}.*",
        "regex": "re:.*self_attn\\.o_proj",
        "regex_layer": f"re:{p}\\..*",
        "bare_leaf": "o_proj",
        "case": "O_PROJ",
    }
    if d.n_experts:
        blk = d.moe_block
        g = d.expert_projs[0]
        out.update({"moe_prefix": f"{p}.{blk}.experts", "per_expert": f"{p}.{blk}.experts.0.{g}",
                    "router": f"{blk}.{d.router}"})
    else:
        out.update({"fused_gate_up": f"{p}.mlp.gate_up_proj", "shard_gate": f"{p}.mlp.gate_proj",
                    "mlp_parent": f"{p}.mlp"})
    return out


class Probe(NamedTuple):
    id: str
    family: str
    method: str
    ckpt: Checkpoint


def _gptq_rules() -> dict[str, dict[str, Any]]:
    o = r".*self_attn\.o_proj"
    return {
        "neg": {f"-:{o}": {}},
        "neg_qkv": {r"-:.*self_attn\.(q|k|v)_proj": {}},
        "neg_fused": {r"-:.*qkv_proj": {}},
        "neg_experts": {r"-:.*experts.*": {}},
        "pos_then_neg": {f"+:{o}": {"bits": 8}, f"-:{o}": {}},
        "neg_then_pos": {f"-:{o}": {}, f"+:{o}": {"bits": 8}},
        "pos_experts": {r"+:.*experts.*": {"bits": 8}},
    }


def probes(methods: tuple[str, ...] = METHODS) -> Iterator[Probe]:
    for family, d in FAMILIES.items():
        mods = models.dense_modules(d)
        for method in methods:
            if method == "gptq":
                cases = {k: ([], v) for k, v in _gptq_rules().items()}
            else:
                cases = {}
                for kind, e in _entries(family, d).items():
                    if kind == "all_shards_qkv":
                        cases[kind] = ([f"model.layers.0.self_attn.{s}_proj" for s in "qkv"], None)
                    else:
                        cases[kind] = ([e], None)
            for kind, (entries, dynamic) in cases.items():
                qc, store, hq = _config(method, entries, dynamic)
                cfg = d.config()
                cfg["quantization_config"] = qc
                tensors = models.all_linears(store).tensors(mods)
                pid = f"probe:{family}/{method}/{kind}"
                yield Probe(pid, family, method, in_memory(cfg, tensors, hq, root=pid))
