"""Release boundaries of quant methods and config keys, each read in the released wheels (the target
data's [[sources]] cite the files): every test checks the verdict on both sides of the boundary."""

from __future__ import annotations

from functools import partial

from ckptlint.testing.models import (DenseDims, Layout, all_linears, awq_config, dense_spec,
                                     gptq_config, store_gptq)
from helpers import build, run


def got(report, target, code=None):
    return {(f.code, f.consequence.value, f.module) for f in report.findings
            if f.target == target and (code is None or f.code == code) and f.severity.value != "info"}


def tg601(report, target):
    return [f.error_text for f in report.findings if f.target == target and f.code == "TG601"]


def tg603(report, target):
    return [f for f in report.findings if f.target == target and f.code == "TG603"]


def test_sglang_fbgemm_fp8_removed_in_0_5_16(tmp_path):
    spec = dense_spec(DenseDims(), Layout(lambda m: None), {"quant_method": "fbgemm_fp8"})
    rep = run(build(tmp_path, spec), "sglang==0.5.15", "sglang==0.5.16", "sglang==0.5.23")
    assert tg603(rep, "sglang==0.5.15") and not tg601(rep, "sglang==0.5.15")
    for t in ("sglang==0.5.16", "sglang==0.5.23"):
        (err,) = tg601(rep, t)
        assert err.startswith("ValueError: Unknown quantization method: fbgemm_fp8.")


def test_bitsandbytes_registry_boundaries(tmp_path):
    # SGLang registers bitsandbytes from 0.5.9; vLLM dropped it in 0.28.0 (not 0.30/0.33: present in
    # 0.26.0, absent in 0.28.0).
    spec = dense_spec(DenseDims(), Layout(lambda m: None),
                      {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"})
    rep = run(build(tmp_path, spec), "sglang==0.5.5", "sglang==0.5.9", "vllm==0.26.0", "vllm==0.28.0",
              "vllm==0.33.0")
    for t in ("sglang==0.5.5", "vllm==0.28.0", "vllm==0.33.0"):
        (err,) = tg601(rep, t)
        assert err.startswith("ValueError: Unknown quantization method: bitsandbytes.")
    for t in ("sglang==0.5.9", "vllm==0.26.0"):
        assert tg603(rep, t) and not tg601(rep, t)


def test_vllm_refuses_3bit_gptq_from_0_24(tmp_path):
    # AutoGPTQConfig.TYPE_MAP ((4, sym), (8, sym)) is checked from 0.24.0; 0.11.0 falls back to plain
    # gptq (2/3/4/8 bits) and loads it (TheBloke/Genz-70b-GPTQ: 3-bit, group -1, desc_act).
    store = partial(store_gptq, bits=3, group=-1)
    spec = dense_spec(DenseDims(), Layout(lambda m: None if m.category in ("lm_head", "embed") else store),
                      gptq_config(bits=3, group_size=-1, desc_act=True))
    rep = run(build(tmp_path, spec), "vllm==0.11.0", "vllm==0.24.0", "vllm==0.28.0")
    assert got(rep, "vllm==0.11.0") == set()
    for t in ("vllm==0.24.0", "vllm==0.28.0"):
        assert tg601(rep, t) == ["ValueError: Unsupported quantization config: bits=3, sym=True"]


def test_vllm_refuses_gptq_desc_act_from_0_30(tmp_path):
    spec = dense_spec(DenseDims(), all_linears("gptq"), gptq_config(desc_act=True))
    rep = run(build(tmp_path, spec), "vllm==0.24.0", "vllm==0.28.0", "vllm==0.30.0")
    assert got(rep, "vllm==0.24.0") == got(rep, "vllm==0.28.0") == set()
    (err,) = tg601(rep, "vllm==0.30.0")
    assert "desc_act=True" in err


def test_gptq_act_order_needs_g_idx_where_it_is_loaded(tmp_path):
    # desc_act with groups: g_idx is the act-order permutation. vLLM 0.24-0.28 and SGLang register it
    # and read it; without it the permutation is torch.empty (silent). desc_act without groups is a
    # no-op, so a missing g_idx is fine there.
    d = DenseDims(num_hidden_layers=1)
    spec = dense_spec(d, all_linears("gptq"), gptq_config(desc_act=True))
    spec.tensors = [t for t in spec.tensors if not t[0].endswith("self_attn.o_proj.g_idx")]
    rep = run(build(tmp_path / "a", spec), "vllm==0.28.0", "sglang==0.5.18")
    for t in ("vllm==0.28.0", "sglang==0.5.18"):
        assert ("SC501", "silent-corruption", "model.layers.0.self_attn.o_proj") in got(rep, t)
    spec = dense_spec(d, all_linears("gptq"), gptq_config(desc_act=True, group_size=-1))
    spec.tensors = [(n, dt, (1, s[1]) if n.endswith((".qzeros", ".scales")) else s) for n, dt, s in spec.tensors
                    if not n.endswith("self_attn.o_proj.g_idx")]
    rep = run(build(tmp_path / "b", spec), "vllm==0.28.0")
    assert got(rep, "vllm==0.28.0") == set()


def _float_o_proj_awq(**cfg):
    d = DenseDims()
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or m.path.endswith("self_attn.o_proj")
                    else "awq")
    return dense_spec(d, layout, awq_config(**cfg))


def test_vllm_awq_skip_list_inferred_from_0_24(tmp_path):
    # vLLM 0.24+ AutoAWQConfig.maybe_update_config infers an empty modules_to_not_convert from the
    # dtypes (all-float modules are skipped); 0.11 awq_marlin has no inference: the F16 o_proj is
    # built AWQ and its `.weight` has no parameter.
    rep = run(build(tmp_path, _float_o_proj_awq()), "vllm==0.11.0", "vllm==0.24.0", "vllm==0.33.0")
    assert ("QD401", "load-error", "model.layers.0.self_attn.o_proj") in got(rep, "vllm==0.11.0")
    assert got(rep, "vllm==0.24.0") == got(rep, "vllm==0.33.0") == set()


def test_vllm_0_11_awq_tests_fused_names_as_substrings(tmp_path):
    # awq_marlin 0.11: `entry in prefix` on the fused prefix; `self_attn.o_proj` excludes o_proj, but
    # a q_proj entry is not a substring of `...qkv_proj` (no shard expansion).
    rep = run(build(tmp_path, _float_o_proj_awq(modules_to_not_convert=["self_attn.o_proj"])), "vllm==0.11.0")
    assert got(rep, "vllm==0.11.0") == set()


def _modelopt_dense(exclude: list[str], *, lm_head_fp4: bool = False, config_json_key: str | None = None,
                    float_mlp_layer: int | None = None):
    """Llama, every Linear NVFP4 (the LM head too with ``lm_head_fp4``; the MLP of ``float_mlp_layer``
    BF16), ModelOpt's exclusions under hf_quant_config.json, or in config.json under ``config_json_key``."""
    def pick(m):
        if m.category == "embed" or (m.category == "lm_head" and not lm_head_fp4):
            return None
        if float_mlp_layer is not None and m.layer == float_mlp_layer and m.category == "dense_mlp":
            return None
        return "nvfp4"
    qc = None
    hq = {"producer": {"name": "modelopt", "version": "0.37.0"},
          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                           "exclude_modules": exclude}}
    if config_json_key is not None:
        qc = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, config_json_key: exclude}
        hq = None
    return dense_spec(DenseDims(), Layout(pick), qc, hf_quant_config=hq)


def test_modelopt_quantizes_the_lm_head_from_sglang_0_5_15_and_vllm_0_24(tmp_path):
    # _get_quant_method tests isinstance(layer, LinearBase) only in SGLang 0.5.5-0.5.12 and vLLM 0.11.0;
    # (LinearBase, ParallelLMHead) from SGLang 0.5.15 and vLLM 0.24.0. An NVFP4 LM head meets a BF16
    # [vocab, hidden] parameter before.
    rep = run(build(tmp_path, _modelopt_dense([], lm_head_fp4=True)),
              "sglang==0.5.12", "sglang==0.5.15", "vllm==0.11.0", "vllm==0.24.0", "vllm==0.33.0")
    for t in ("sglang==0.5.12", "vllm==0.11.0"):
        assert ("QD401", "load-error", "lm_head") in got(rep, t)
    for t in ("sglang==0.5.15", "vllm==0.24.0", "vllm==0.33.0"):
        assert "lm_head" not in {m for _, _, m in got(rep, t)}


def test_modelopt_config_json_exclude_modules_key_per_release(tmp_path):
    # config.json form with only `exclude_modules`: vLLM 0.11 reads exclude_modules, 0.24-0.32 read only
    # `ignore`, 0.33 `ignore` else `exclude_modules`; SGLang's NVFP4 reads only `ignore` until 0.5.22 and
    # falls back to modules_to_not_convert / exclude_modules in 0.5.23.
    spec = _modelopt_dense(["lm_head", "model.layers.1.mlp*"], config_json_key="exclude_modules", float_mlp_layer=1)
    rep = run(build(tmp_path, spec), "vllm==0.11.0", "vllm==0.24.0", "vllm==0.32.0", "vllm==0.33.0",
              "sglang==0.5.22", "sglang==0.5.23")
    mlp = "model.layers.1.mlp.gate_up_proj"
    for t in ("vllm==0.24.0", "vllm==0.32.0", "sglang==0.5.22"):
        assert ("QD401", "load-error", mlp) in got(rep, t), t
    for t in ("vllm==0.11.0", "vllm==0.33.0", "sglang==0.5.23"):
        assert got(rep, t, "QD401") == set(), t


def test_vllm_nvfp4_nan_scale_check_from_0_30(tmp_path):
    # The NVFP4 Linear weight_scale is a NaN sentinel checked after loading from 0.30.0 (absent in
    # 0.28.0, where a missing scale stays uninitialised silently).
    spec = _modelopt_dense(["lm_head"])
    spec.tensors = [t for t in spec.tensors if t[0] != "model.layers.0.self_attn.o_proj.weight_scale"]
    rep = run(build(tmp_path, spec), "vllm==0.28.0", "vllm==0.30.0")
    assert ("SC501", "silent-corruption", "model.layers.0.self_attn.o_proj") in got(rep, "vllm==0.28.0")
    (f,) = [f for f in rep.findings if f.target == "vllm==0.30.0" and f.code == "SC501"]
    assert f.consequence.value == "load-error" and "was never loaded (still NaN)" in f.error_text


def test_vllm_0_11_modelopt_never_excludes_a_fused_moe(tmp_path):
    # vLLM 0.11 ModelOptNvFp4Config.get_quant_method returns ModelOptNvFp4FusedMoE for every FusedMoE;
    # from 0.24 an excluded RoutedExperts is built unquantized.
    from ckptlint.testing.models import qwen3_moe_dims
    d = qwen3_moe_dims()

    def pick(m):
        return "nvfp4" if m.category == "expert" and m.layer == 0 else None
    hq = {"producer": {"name": "modelopt", "version": "0.37.0"},
          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                           "exclude_modules": ["lm_head", "*self_attn*", "*mlp.gate", "model.layers.1.mlp.experts"]}}
    rep = run(build(tmp_path, dense_spec(d, Layout(pick), None, hf_quant_config=hq)), "vllm==0.11.0", "vllm==0.24.0")
    assert ("QD401", "load-error", "model.layers.1.mlp.experts") in got(rep, "vllm==0.11.0")
    assert got(rep, "vllm==0.24.0") == set()


def _fp8_llama(**cfg):
    base = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    base.update(cfg)
    return dense_spec(DenseDims(num_hidden_layers=1), all_linears("fp8_block"),
                      {k: v for k, v in base.items() if v is not None})


def test_fp8_activation_scheme_refusals_every_release(tmp_path):
    # Fp8Config (both frameworks, every release): activation_scheme is required, must be static or
    # dynamic, and block FP8 takes only dynamic activations.
    targets = ("sglang==0.5.5", "sglang==0.5.23", "vllm==0.11.0", "vllm==0.33.0")
    cases = {"missing": ({"activation_scheme": None}, "ValueError: Cannot find any of ['activation_scheme'] in the "
                         "model's quantization config."),
             "odd": ({"activation_scheme": "per_token"}, "ValueError: Unsupported activation scheme per_token"),
             "static-block": ({"activation_scheme": "static"}, "ValueError: The block-wise quantization only supports "
                              "dynamic activation scheme for now, but got static activation scheme.")}
    for name, (cfg, text) in cases.items():
        rep = run(build(tmp_path / name, _fp8_llama(**cfg)), *targets)
        for t in targets:
            assert tg601(rep, t) == [text], (name, t)
    rep = run(build(tmp_path / "ok", _fp8_llama()), *targets)
    assert all(tg601(rep, t) == [] for t in targets)


def _modelopt_algo(algo: str):
    spec = _modelopt_dense(["lm_head"])
    spec.hf_quant_config["quantization"]["quant_algo"] = algo
    return spec


def test_modelopt_quant_algo_allow_lists(tmp_path):
    # W4A16_NVFP4: SGLang's ModelOptFp4Config accepts it from 0.5.20 (allow-list FP8, NVFP4; +NVFP4_AWQ
    # 0.5.17; +W4A16_NVFP4 0.5.20); vLLM 0.11's QUANT_ALGOS is ['FP8', 'NVFP4'] (0.24+: seven algorithms).
    rep = run(build(tmp_path / "w4a16", _modelopt_algo("W4A16_NVFP4")), "sglang==0.5.18", "sglang==0.5.20",
              "vllm==0.11.0", "vllm==0.24.0")
    assert tg601(rep, "sglang==0.5.18") == ["ValueError: ModelOpt currently only supports: FP8, NVFP4, NVFP4_AWQ "
                                            "quantizations in sglang. Please check the quantization config for your "
                                            "model's configuration."]
    assert tg601(rep, "vllm==0.11.0")[0].startswith("ValueError: ModelOpt currently only supports: ['FP8', 'NVFP4']")
    assert tg601(rep, "sglang==0.5.20") == tg601(rep, "vllm==0.24.0") == []
    # NVFP4_AWQ: SGLang from 0.5.17; never in vLLM's list
    rep = run(build(tmp_path / "awq", _modelopt_algo("NVFP4_AWQ")), "sglang==0.5.16", "sglang==0.5.17", "vllm==0.33.0")
    assert tg601(rep, "sglang==0.5.16") and tg601(rep, "vllm==0.33.0") and not tg601(rep, "sglang==0.5.17")


def test_vllm_missing_shard_stops_start_up_from_0_26(tmp_path):
    # weight_utils.filter_duplicate_safetensors_files raises for shards the index names but the folder
    # lacks from 0.26.0; 0.24.0 loads the shards that are present.
    path = build(tmp_path, dense_spec(DenseDims(), all_linears("gptq"), gptq_config()))
    (path / "model-00002-of-00002.safetensors").unlink()
    rep = run(path, "vllm==0.24.0", "vllm==0.26.0")
    by = {f.target: f for f in rep.findings if f.code == "IX204"}
    assert by["vllm==0.24.0"].consequence.value == "silent-corruption"
    assert by["vllm==0.26.0"].consequence.value == "load-error"
    assert by["vllm==0.26.0"].error_text == ("FileNotFoundError: Weight files referenced in index but missing: "
                                             "{'model-00002-of-00002.safetensors'}")


def test_targets_listing_names_the_boundaries(capsys):
    # `ckptlint targets` prints each release's first summary sentence: the boundaries tested above.
    from helpers import cli_run

    code, out, _ = cli_run(capsys, "targets")
    assert code == 0
    lines: dict[str, str] = {}  # each release's entry, its wrapped lines joined
    for line in out.splitlines():
        if line.strip() and not line.startswith(" "):
            key = line.split()[0]
            lines[key] = line
        elif line.strip():
            lines[key] += " " + line.strip()
    assert "bitsandbytes" in lines["sglang==0.5.5"] and "fbgemm_fp8" in lines["sglang==0.5.16"]
    assert "LM head" in lines["sglang==0.5.15"] and "ignore" in lines["sglang==0.5.23"]
    assert "exclude_modules" in lines["vllm==0.11.0"] and "3-bit" in lines["vllm==0.11.0"]
    assert "4- and 8-bit symmetric" in lines["vllm==0.24.0"] and "bitsandbytes" in lines["vllm==0.28.0"]
    assert "desc_act" in lines["vllm==0.30.0"] and "NaN" in lines["vllm==0.30.0"]
    assert "FileNotFoundError" in lines["vllm==0.26.0"]
