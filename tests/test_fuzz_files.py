"""Property test: generated config.json, hf_quant_config.json and index files (not only headers)
never make ``ckptlint check`` crash, hang or print a traceback.

Each example writes a small checkpoint directory (two valid shards) with generated side files,
runs the command line in-process in every output format, and asserts exit 0, 1 or 2 (2: not a
checkpoint at all) with nothing about an internal error on stderr, within a time bound.

Bounded by default (~40 examples); ``CKPTLINT_FUZZ_EXAMPLES=5000`` for a nightly run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlint.testing import shard_name, write_safetensors

EXAMPLES = int(os.environ.get("CKPTLINT_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SHARDS = {shard_name(1, 2): ["model.embed_tokens.weight BF16 [128, 64]",
                             "model.layers.0.self_attn.q_proj.weight F8_E4M3 [64, 64]",
                             "model.layers.0.self_attn.q_proj.weight_scale_inv F32 [1, 1]"],
          shard_name(2, 2): ["model.layers.0.mlp.down_proj.weight F8_E4M3 [64, 64]",
                             "model.norm.weight BF16 [64]", "lm_head.weight BF16 [128, 64]"]}
TENSORS = [line.split()[0] for lines in SHARDS.values() for line in lines]

scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_infinity=True)
           | st.text(max_size=8) | st.sampled_from(["*", "re:.*", "re:(", "lm_head", "model.layers.0.mlp", "-:.*"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=10)
QUANT_KEYS = ["quant_method", "ignore", "ignored_layers", "exclude", "exclude_modules", "modules_to_not_convert",
              "weight_block_size", "config_groups", "quant_algo", "bits", "group_size", "dynamic", "desc_act",
              "sym", "kv_cache_scheme", "quantized_layers", "global_quant_config", "layer_quant_config", "fmt"]
METHODS = ["fp8", "compressed-tensors", "modelopt", "modelopt_fp4", "quark", "gptq", "awq", "mxfp4", "bitsandbytes",
           "nope", 7]


@st.composite
def quant_configs(draw):
    q = draw(st.dictionaries(st.sampled_from(QUANT_KEYS), json_values, max_size=5))
    if draw(st.booleans()):
        q["quant_method"] = draw(st.sampled_from(METHODS))
    return q


@st.composite
def configs(draw):
    cfg = {"architectures": draw(st.sampled_from([["LlamaForCausalLM"], ["DeepseekV3ForCausalLM"], ["Nope"], [],
                                                  "LlamaForCausalLM", None])),
           "model_type": draw(st.sampled_from(["llama", "deepseek_v3", 3, None])),
           "hidden_size": 64, "num_hidden_layers": draw(st.sampled_from([1, 0, -1, "1", 10**30])),
           "num_attention_heads": 4, "vocab_size": 128}
    for k in draw(st.lists(st.sampled_from(["n_routed_experts", "num_nextn_predict_layers", "tie_word_embeddings",
                                            "torch_dtype", "num_experts", "first_k_dense_replace"]), max_size=3)):
        cfg[k] = draw(json_values)
    if draw(st.booleans()):
        cfg["quantization_config"] = draw(quant_configs() | json_values)
    return cfg


def encoded(value_strategy):
    """A side file's bytes: the JSON of a generated value, or that text damaged, or raw bytes."""
    return st.one_of(
        value_strategy.map(lambda v: json.dumps(v, allow_nan=True).encode()),
        value_strategy.map(lambda v: json.dumps(v, indent=1).encode()).flatmap(
            lambda b: st.integers(0, len(b)).map(lambda i: b[:i])),  # cut off
        value_strategy.map(lambda v: _duplicated(json.dumps(v).encode())),
        st.sampled_from([b"", b"[" * 5000, b'{"a": 1, "a": 2}', b"\xff\xfe{}", b'{"\\ud800": 1}', b"NaN", b"{}"]),
        st.binary(max_size=64),
    )


def _duplicated(b: bytes) -> bytes:
    """The object's first member written twice (a duplicate key), when it is an object."""
    if not b.startswith(b"{") or b == b"{}":
        return b
    first = b[1:].split(b", ", 1)[0].rstrip(b"}")
    return b"{" + first + b", " + b[1:]


shard_values = st.sampled_from([*SHARDS, "extra.safetensors", "model-00003-of-00002.safetensors", "../escape.safetensors",
                                "/etc/passwd", "C:\\x.safetensors", "", ".", "x.bin", "sub/dir.safetensors"]) | json_values


@st.composite
def indexes(draw):
    wm = {t: s for lines in SHARDS.values() for t, s in ((line.split()[0], None) for line in lines)}
    for t, s in zip(TENSORS, [s for s, lines in SHARDS.items() for _ in lines]):
        wm[t] = s
    for _ in range(draw(st.integers(0, 4))):  # damage some entries, add others
        key = draw(st.sampled_from(TENSORS) | st.text(max_size=12))
        wm[key] = draw(shard_values)
    index = {"metadata": draw(st.sampled_from([{"total_size": 0}, {"total_size": "x"}, [], None, {}])),
             "weight_map": wm}
    if draw(st.integers(0, 9)) == 0:
        index["weight_map"] = draw(json_values)
    return index


def run_check(root: Path, fmt: str) -> tuple[int, str]:
    from ckptlint import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(["check", str(root), "-f", fmt, "-q", "--isolated"])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, err.getvalue()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-files")


EXTRA = "extra.safetensors"  # a shard no generated index names, holding a copy of another shard's tensor


@FUZZ
@given(config=st.none() | encoded(configs()), quant=st.none() | encoded(quant_configs() | json_values),
       index=st.none() | encoded(indexes()), extra=st.none() | st.sampled_from(["BF16 [128, 64]", "F32 [3]"]))
def test_generated_side_files_never_crash(workdir, config, quant, index, extra):
    root = workdir / "ck"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for name, lines in SHARDS.items():
        write_safetensors(root / name, "\n".join(lines), sparse=True)
    if extra is not None:
        write_safetensors(root / EXTRA, f"model.embed_tokens.weight {extra}", sparse=True)
    for name, data in (("config.json", config), ("hf_quant_config.json", quant),
                       ("model.safetensors.index.json", index)):
        if data is not None:
            (root / name).write_bytes(data)
    for fmt in ("json", "text", "sarif", "github"):
        start = time.perf_counter()
        code, err = run_check(root, fmt)
        assert code in (0, 1, 2), (fmt, code, err[-2000:])
        assert "internal error" not in err and "Traceback" not in err, err[-2000:]
        assert time.perf_counter() - start < 20, fmt
