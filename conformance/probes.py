"""The probe matrix: single-entry skip lists over a small synthetic model per architecture family
and method, built in memory (``ckptside.in_memory``: no files).

Families: Llama (dense), Qwen3-MoE, Mixtral, and DeepSeek-V3 (MLA ``fused_qkv_a_proj_with_mqa``,
shared experts, a dense first layer, the MTP/NextN draft layer with speculative decoding on): a
two-layer model (draft = ``model.layers.2``) for every entry kind, and the real 61-layer numbering
(draft = ``model.layers.61``, the index SGLang's DeepSeek NextN name mapper is written for) for the
draft entry kinds only.

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
    if method == "modelopt_fp4":  # the usual export: hf_quant_config.json, no quantization_config
        return (None, "nvfp4", {"producer": {"name": "modelopt", "version": "0.23.0"},
                                "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                                                 "group_size": 16, "exclude_modules": ["lm_head"] + entries}})
    if method == "gptq":
        return models.gptq_config(dynamic=dynamic or {}), "gptq", None
    raise ValueError(method)


METHODS = ("fp8", "compressed-tensors", "quark", "modelopt_fp8", "modelopt_fp4", "gptq")


def _entries(family: str, d: models.DenseDims) -> dict[str, str | list[str]]:
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
                    "mlp_parent": f"{p}.mlp",
                    "all_shards_gate_up": [f"{p}.mlp.gate_proj", f"{p}.mlp.up_proj"]})
    return out


def _deepseek_entries(mtp: int, *, draft_only: bool = False) -> dict[str, str | list[str]]:
    """Entry kind -> skip-list entry (or entries) of a DeepSeek-V3 checkpoint: layer 0 dense,
    layer 1 MoE, ``mtp`` the draft layer."""
    d = f"model.layers.{mtp}"
    out: dict[str, str | list[str]] = {
        "mtp_layer": d, "mtp_layer_dot": f"{d}.", "mtp_glob": f"{d}.*", "mtp_regex": f"re:{d}\\..*",
        "mtp_eh_proj": f"{d}.eh_proj", "mtp_attn": f"{d}.self_attn", "mtp_experts": f"{d}.mlp.experts",
        "mtp_per_expert": f"{d}.mlp.experts.0.gate_proj", "mtp_shared_experts": f"{d}.mlp.shared_experts",
        "mtp_runtime_decoder": "model.decoder", "mtp_runtime_eh_proj": "model.eh_proj",
        "mtp_prefix_word": "mtp",
    }
    if draft_only:
        return out
    a, m, dense = "model.layers.1.self_attn", "model.layers.1.mlp", "model.layers.0.mlp"
    out.update({
        "parent": a, "dotted_suffix": "self_attn.kv_b_proj", "fused_qkv_a": f"{a}.fused_qkv_a_proj_with_mqa",
        "shard_q_a": f"{a}.q_a_proj", "shard_kv_a": f"{a}.kv_a_proj_with_mqa",
        "all_shards_qkv_a": [f"{a}.q_a_proj", f"{a}.kv_a_proj_with_mqa"], "bare_q_a": "q_a_proj",
        "bare_kv_b": "kv_b_proj", "glob_attn": "*self_attn*", "regex_attn": "re:.*self_attn\\.kv_b_proj",
        "moe_prefix": f"{m}.experts", "per_expert": f"{m}.experts.0.gate_proj", "router": "mlp.gate",
        "shared_experts": f"{m}.shared_experts", "shared_expert_shard": f"{m}.shared_experts.gate_proj",
        "shared_experts_both_shards": [f"{m}.shared_experts.gate_proj", f"{m}.shared_experts.up_proj"],
        "shared_experts_regex": "re:.*shared_experts.*", "dense_fused_gate_up": f"{dense}.gate_up_proj",
        "dense_shard_gate": f"{dense}.gate_proj",
        "dense_both_shards": [f"{dense}.gate_proj", f"{dense}.up_proj"],
    })
    return out


def _deepseek_gptq_rules(mtp: int) -> dict[str, dict[str, Any]]:
    return {
        "neg_q_a": {r"-:.*self_attn\.q_a_proj": {}},
        "neg_fused_qkv_a": {r"-:.*fused_qkv_a_proj_with_mqa": {}},
        "neg_shared_experts": {r"-:.*shared_experts.*": {}},
        "neg_mtp": {rf"-:model\.layers\.{mtp}\..*": {}},
    }


# (probe family, dims, draft entry kinds only)
DEEPSEEK = {
    "deepseek_v3": (models.deepseek_dims(num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=2), False),
    "deepseek_v3_61": (models.deepseek_dims(first_k_dense_replace=1, n_routed_experts=2), True),
}


def _deepseek_probes(methods: tuple[str, ...]) -> Iterator["Probe"]:
    for family, (d, draft_only) in DEEPSEEK.items():
        mods = models.moe_modules(d)
        mtp = d.num_hidden_layers
        for method in methods:
            if method == "gptq":
                rules = _deepseek_gptq_rules(mtp)
                if draft_only:
                    rules = {"neg_mtp": rules["neg_mtp"]}
                cases = {k: ([], v) for k, v in rules.items()}
            else:
                cases = {k: (e if isinstance(e, list) else [e], None)
                         for k, e in _deepseek_entries(mtp, draft_only=draft_only).items()}
            for kind, (entries, dynamic) in cases.items():
                yield _probe(family, method, kind, d, mods, entries, dynamic)


def _probe(family: str, method: str, kind: str, d: Any, mods: list, entries: list[str],
           dynamic: dict[str, Any] | None) -> "Probe":
    qc, store, hq = _config(method, entries, dynamic)
    cfg = d.config()
    if qc is not None:
        cfg["quantization_config"] = qc
    tensors = models.all_linears(store).tensors(mods)
    pid = f"probe:{family}/{method}/{kind}"
    return Probe(pid, family, method, in_memory(cfg, tensors, hq, root=pid))


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
                        cases[kind] = (e if isinstance(e, list) else [e], None)
            for kind, (entries, dynamic) in cases.items():
                yield _probe(family, method, kind, d, mods, entries, dynamic)
    yield from _deepseek_probes(methods)
