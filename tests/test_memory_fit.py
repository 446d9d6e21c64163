"""DP806 gpu-memory-fit in `check --gpu/--tp`, and `inspect`'s fit verdict, against per-GPU bytes
computed by hand from DeepSeek-V3's dimensions (10 layers: 3 dense + 7 MoE, block FP8, ~86 GB)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from ckptlint.inspect import DEFAULT_KV_CACHE_FRACTION, DEFAULT_RESERVE_FRACTION, memory_fit
from ckptlint.testing.models import Layout, Spec, deepseek_dims, moe_modules
from helpers import build, cli_run

DSV3 = dict(hidden=7168, intermediate=18432, moe_intermediate=2048, n_routed_experts=256, n_shared_experts=1,
            first_k_dense_replace=3, q_lora_rank=1536, kv_lora_rank=512, heads=128, qk_nope=128, qk_rope=64,
            v_head=128, vocab=129280, num_nextn_predict_layers=0)
L = 10
H100 = 80 * 10**9  # bytes (gpus.toml: 80 GB HBM3)


def _fp8(n, k):
    return n * k + 4 * math.ceil(n / 128) * math.ceil(k / 128)


def per_gpu(tp: int) -> float:
    """Weights on one GPU under SGLang's TP layout, by hand (as in test_deployment_rules)."""
    H, I, Im, E, dense, V = 7168, 18432, 2048, 256, 3, 129280
    qa, kva = _fp8(1536, H), _fp8(512 + 64, H)
    qb, kvb, o = _fp8(128 * 192, 1536), _fp8(128 * 256, 512), _fp8(H, 128 * 128)
    norms = 2 * (H + H + 1536 + 512)
    dense_mlp = 2 * _fp8(I, H) + _fp8(H, I)
    experts = E * (2 * _fp8(Im, H) + _fp8(H, Im))
    shared = 2 * _fp8(Im, H) + _fp8(H, Im)
    router = 2 * E * H + 4 * E
    replicated = L * (qa + kva + norms) + (L - dense) * router + 2 * H
    sharded = L * (qb + kvb + o) + dense * dense_mlp + (L - dense) * (experts + shared) + 2 * (2 * V * H)
    return replicated + sharded / tp


@pytest.fixture(scope="module")
def dsv3(tmp_path_factory):
    quant = {"expert", "shared_expert", "dense_mlp", "attn"}
    d = deepseek_dims(num_hidden_layers=L, **DSV3)
    cfg = d.config()
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                                  "weight_block_size": [128, 128]}
    layout = Layout(lambda m: "fp8_block" if m.category in quant else None)
    return build(tmp_path_factory.mktemp("dsv3-10"), Spec(cfg, layout.tensors(moe_modules(d, with_mtp=False))), shards=4)


def _dp806(capsys, *args):
    code, out, err = cli_run(capsys, "check", *args, "--isolated", "-t", "sglang==0.5.23", "-f", "json")
    assert code in (0, 1), err
    return code, [f for f in json.loads(out)["findings"] if f["code"] == "DP806"]


def test_weights_that_do_not_fit_one_gpu_are_a_load_error(dsv3, capsys):
    code, (f,) = _dp806(capsys, str(dsv3), "--gpu", "h100")
    assert code == 1 and f["consequence"] == "load-error"
    d = f["data"]
    assert d["status"] == "weights-exceed" and abs(d["weights_bytes"] - per_gpu(1)) <= 1 and d["memory_bytes"] == H100
    assert f["error_text"].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert "at --tp 2 each NVIDIA H100" in f["hint"]  # the smallest TP size that fits
    assert "NVIDIA H100" in f["message"] and "tensor parallel 1" in f["message"]


def test_memory_is_checked_only_when_the_deployment_is_stated(dsv3, capsys):
    assert _dp806(capsys, str(dsv3))[1] == []  # default deployment: no claim about memory
    assert _dp806(capsys, str(dsv3), "--gpu", "h100", "--tp", "2")[1] == []  # fits: KV cache ~30 GB


def test_kv_cache_under_the_headroom_is_degraded(dsv3, capsys):
    kv = H100 - per_gpu(2) - round(H100 * DEFAULT_RESERVE_FRACTION)
    code, (f,) = _dp806(capsys, str(dsv3), "--gpu", "h100", "--tp", "2", "--kv-cache-fraction", "0.5")
    assert code == 0 and f["consequence"] == "degraded" and f["severity"] == "warning"
    assert f["data"]["status"] == "tight" and abs(f["data"]["kv_cache_bytes"] - kv) <= 1
    assert f["data"]["kv_cache_needed_bytes"] == H100 // 2
    code, _, _ = cli_run(capsys, "check", str(dsv3), "--isolated", "-t", "sglang==0.5.23", "--gpu", "h100", "--tp", "2",
                         "--kv-cache-fraction", "0.5", "--fail-on", "warning")
    assert code == 1


def test_the_text_report_names_the_numbers(dsv3, capsys):
    code, out, _ = cli_run(capsys, "check", str(dsv3), "--isolated", "-t", "sglang==0.5.23", "-t", "vllm==0.33.0",
                           "--gpu", "h100")
    joined = " ".join(out.split())
    assert code == 1
    assert "error DP806 gpu-memory-fit [load-error] sglang 0.5.23, vllm 0.33.0" in out  # one entry, both releases
    assert f"the weights each GPU holds, {per_gpu(1) / 2**30:,.2f} GiB, do not fit in one NVIDIA H100" in joined


def test_inspect_says_fits_only_with_kv_headroom(dsv3, capsys):
    code, out, _ = cli_run(capsys, "inspect", str(dsv3), "--gpu", "h100")
    assert code == 1 and "DOES NOT FIT: the weights alone exceed the GPU's memory" in out
    code, out, _ = cli_run(capsys, "inspect", str(dsv3), "--gpu", "h100", "--tp", "2")
    assert code == 0 and ": fits (the KV cache needs 10% of the GPU" in out
    code, out, _ = cli_run(capsys, "inspect", str(dsv3), "--gpu", "h100", "--tp", "2", "--kv-cache-fraction", "0.5",
                           "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["fit"] == "tight" and doc["fits"] is False and doc["kv_cache_fraction"] == 0.5


def test_fit_arithmetic_at_the_edges():
    gpu = SimpleNamespace(memory_bytes=80 * 2**30, label="GPU")
    reserve = round(80 * 2**30 * DEFAULT_RESERVE_FRACTION)
    # the case: 0.86 GiB left for the KV cache is not "fits"
    w = 80 * 2**30 - reserve - int(0.86 * 2**30)
    fit = memory_fit(gpu, w)
    assert fit.status == "tight" and not fit.fits and abs(fit.kv_cache_bytes - 0.86 * 2**30) < 2
    assert memory_fit(gpu, 80 * 2**30 - reserve).status == "no-kv-cache"  # weights fit, nothing left
    assert memory_fit(gpu, 80 * 2**30 + 1).status == "weights-exceed"
    enough = 80 * 2**30 - reserve - round(80 * 2**30 * DEFAULT_KV_CACHE_FRACTION)
    assert memory_fit(gpu, enough).status == "fits" and memory_fit(gpu, enough + 1).status == "tight"
    assert memory_fit(gpu, w, kv_fraction=0.0).fits  # no headroom asked: any KV cache will do
    assert memory_fit(gpu, enough + reserve, reserve_bytes=0).fits  # --reserve-gib 0
