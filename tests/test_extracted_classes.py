"""Per-class facts extracted from the wheels (classes.json) and the simulation built from them.

Offline: the extractor runs on a small synthetic source tree written here; the committed files are
checked against their stamps (extractor version, digest, the wheel the registry was read from).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.knowledge import EXTRACTORS, classes as extractor  # noqa: E402
from conformance.knowledge.common import content_digest, extractor_version  # noqa: E402

from ckptlint.targets import known_versions, resolve  # noqa: E402
from ckptlint.targets import class_facts as cf  # noqa: E402
from ckptlint.targets import extracted_classes as xc  # noqa: E402

EXTRACTED = REPO / "src" / "ckptlint" / "targets" / "extracted"


def _releases() -> list[tuple[str, str]]:
    return [(fw, v) for fw in ("sglang", "vllm") for v in known_versions(fw)]


# --- the committed files ------------------------------------------------------------------------

def test_every_release_has_classes_stamped_by_the_current_extractor():
    want = extractor_version(extractor)
    assert EXTRACTORS["classes"][1] is extractor
    for fw, v in _releases():
        path = EXTRACTED / fw / v / "classes.json"
        assert path.is_file(), f"{fw}=={v}: no classes.json (scripts/conformance.py extract {fw} {v} --only classes)"
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert (doc["framework"], doc["version"]) == (fw, v)
        assert doc["extractor"] == want, f"{fw}=={v}: classes.json is stale (extractor changed): regenerate it"
        assert doc["digest"] == content_digest(doc), f"{fw}=={v}: classes.json was edited by hand"
        reg = json.loads((path.parent / "registry.json").read_text(encoding="utf-8"))
        assert doc["wheel_sha256"] == reg["wheel_sha256"], f"{fw}=={v}: classes.json and registry.json disagree on the wheel"


def test_every_registered_architecture_resolves_to_an_extracted_class():
    from ckptlint.targets.extracted import knowledge

    for fw, v in _releases():
        k = knowledge(fw, v)
        missing = [a for a, e in k.architectures.items()
                   if e.table != "entry_class" and xc.class_for(fw, v, a) is None and "Bidirectional" not in a]
        # (a registry entry naming a class the release's model packages do not define is allowed to miss,
        # but it must stay rare)
        assert len(missing) <= max(3, len(k.architectures) // 50), (fw, v, missing[:10])


# --- the extractor on a synthetic release ---------------------------------------------------------

_MODEL = '''
from sglang.srt.layers.linear import ReplicatedLinear, QKVParallelLinear
from sglang.srt.layers.moe import FusedMoE, get_moe_impl_class
from sglang.srt.utils import add_prefix, make_layers


class ToyMoE(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        self.experts = get_moe_impl_class(quant_config)(quant_config=quant_config, prefix=add_prefix("experts", prefix))
        self.gate = ReplicatedLinear(4, 4, quant_config=None, prefix=add_prefix("gate", prefix))


class ToyLayer(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        self.qkv_proj = QKVParallelLinear(4, 4, quant_config=quant_config, prefix=add_prefix("qkv_proj", prefix))
        self.moe_block = ToyMoE(config, quant_config, prefix=add_prefix("moe_block", prefix))


class ToyModel(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        self.layers, self.start_layer, self.end_layer = make_layers(
            config.num_hidden_layers, lambda idx, prefix: ToyLayer(config, quant_config, prefix=prefix),
            prefix=add_prefix("layers", prefix))


TOY_STACKED = [("gate_up_proj", "gate_proj", 0), ("gate_up_proj", "up_proj", 1)]


class ToyDenseForCausalLM(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        self.experts = FusedMoE(quant_config=quant_config, prefix=add_prefix("experts", prefix))

    def load_weights(self, weights):
        stacked_params_mapping = TOY_STACKED


class ToyForCausalLM(nn.Module):
    packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}
    hf_to_sglang_mapper = WeightsMapper(orig_to_new_prefix={"transformer.": "model."})

    def __init__(self, config, quant_config=None, prefix=""):
        self.model = ToyModel(config, quant_config, prefix=add_prefix("model", prefix))
        self.lm_head = ParallelLMHead(4, 4, quant_config=None, prefix=add_prefix("lm_head", prefix))
        if config.q_lora_rank is not None:
            self.packed_modules_mapping["fused_qa"] = ["q_a_proj", "kv_a_proj"]

    def load_weights(self, weights):
        stacked_params_mapping = [("qkv_proj", "q_proj", "q"), ("qkv_proj", "k_proj", "k"), ("qkv_proj", "v_proj", "v")]
        expert_params_mapping = FusedMoE.make_expert_params_mapping(
            ckpt_gate_proj_name="w1", ckpt_down_proj_name="w2", ckpt_up_proj_name="w3", num_experts=4)


class ToyForCausalLMNextN(ToyForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        self.model = ToyModel(config, quant_config, prefix=add_prefix("model", prefix))


EntryClass = [ToyForCausalLM, ToyForCausalLMNextN]
'''

_OVERRIDE = '''
class ModelConfig:
    def __init__(self, is_draft_model):
        if is_draft_model and self.hf_config.architectures[0] == "ToyForCausalLM":
            self.hf_config.architectures[0] = "ToyForCausalLMNextN"
'''


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("release")
    models = root / "sglang" / "srt" / "models"
    models.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    moe = root / "sglang" / "srt" / "layers" / "moe"
    moe.mkdir(parents=True)
    (moe / "layer.py").write_text("class FusedMoE:\n    def __init__(self, quant_config=None, prefix='', "
                                  "ckpt_names=('gate_proj', 'down_proj', 'up_proj')):\n        pass\n")
    (models / "toy.py").write_text(textwrap.dedent(_MODEL))
    cfg = root / "sglang" / "srt" / "configs"
    cfg.mkdir(parents=True)
    (cfg / "model_config.py").write_text(textwrap.dedent(_OVERRIDE))
    return extractor.extract_classes("sglang", "0.0.0", root)


def test_extractor_class_facts(toy):
    f = toy["classes"]["sglang.srt.models.toy:ToyForCausalLM"]
    assert f["packed_modules_mapping"] == {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}
    assert f["packed_init"] == [{"set": {"fused_qa": ["q_a_proj", "kv_a_proj"]}, "if": "q_lora_rank"}]
    assert f["stacked"][0]["rows"] == [["qkv_proj", "q_proj", "q"], ["qkv_proj", "k_proj", "k"], ["qkv_proj", "v_proj", "v"]]
    assert f["expert_mapping"] == [{"gate": "w1", "down": "w2", "up": "w3"}]
    assert f["mappers"]["hf_to_sglang_mapper"] == {"orig_to_new_prefix": {"transformer.": "model."}}
    assert f["entry_class"] is True
    leaves = {leaf["path"]: leaf for leaf in f["tree"]["leaves"]}
    assert leaves["model.layers.{N}.moe_block.gate"]["quant"] == "none"
    assert leaves["model.layers.{N}.moe_block.experts"]["class"] == "get_moe_impl_class()"
    assert leaves["model.layers.{N}.qkv_proj"]["quant"] == "passed"
    assert leaves["lm_head"]["quant"] == "none"


def test_extractor_constant_tables_and_layer_defaults(toy):
    """A loader table named by a module-level constant is resolved; a FusedMoE built without ckpt_names
    gets its constructor's default names."""
    f = toy["classes"]["sglang.srt.models.toy:ToyDenseForCausalLM"]
    assert f["stacked"][0]["rows"] == [["gate_up_proj", "gate_proj", 0], ["gate_up_proj", "up_proj", 1]]
    (leaf,) = [x for x in f["tree"]["leaves"] if x["path"] == "experts"]
    assert leaf["ckpt_names"] == ["gate_proj", "down_proj", "up_proj"] and leaf["ckpt_names_default"]


def test_extractor_drafts(toy):
    d = toy["classes"]["sglang.srt.models.toy:ToyForCausalLMNextN"]["draft"]
    assert d["serves"] == ["arch:ToyForCausalLM"] and d["serves_from"] == "draft override"
    assert d["layer_naming"] == "model.layers.{N}"
    assert toy["draft_overrides"] == {"arch:ToyForCausalLM": ["ToyForCausalLMNextN"]}


def test_facts_become_architecture_fields(toy):
    fields, notes = cf.extracted_fields(toy["classes"]["sglang.srt.models.toy:ToyForCausalLM"], "sglang")
    assert fields["stacked"] == [{"fused": "qkv_proj", "shards": ["q_proj", "k_proj", "v_proj"], "requires_config": None}]
    assert fields["packed_modules_mapping_if"] == [{"key": "q_lora_rank", "mapping": {"fused_qa": ["q_a_proj", "kv_a_proj"]}}]
    assert fields["expert_w13"] == ["w1", "w3"] and fields["expert_w2"] == ["w2"]
    import re

    rx = re.compile(fields["experts"])
    m = rx.match("model.layers.3.moe_block.experts.7.w3")
    assert m and m.group("moe", "expert", "proj") == ("model.layers.3.moe_block.experts", "7", "w3")
    assert not rx.match("model.layers.3.mlp.experts.7.gate_proj")
    kinds = {k["pattern"]: k["kind"] for k in fields["kinds"]}
    assert kinds[r"\.moe_block\.gate$"] == "unquantized_linear"
    assert kinds["^lm_head$"] == "unquantized_linear"
    assert fields["rename"] == [{"kind": "prefix", "pattern": "transformer.", "to": "model.", "count": 1}]
    # a sub-layer of the decoder layers is named by its tail (the draft's layers are named alike); one of
    # another list (a vision tower's blocks) by its whole path, so that it names nothing in the decoder
    assert cf._tail("model.layers.{N}.mlp.gate") == (r"\.mlp\.gate$", True)
    assert cf._tail("vision.blocks.{N}.mlp.w1")[0] == r"^vision\.blocks\.\d+\.mlp\.w1$"
    blocks_rx, blocks, own = fields["absent_experts"]
    assert own == ["moe_block.experts"]
    assert "mlp" in blocks and re.match(blocks_rx, "model.layers.0.mlp.experts.0.")


_LOADER = """
class M:
    def load_weights(self, weights):
        stacked_params_mapping = [("qkv_proj", "q_proj", "q")]
        expert_params_mapping = FusedMoE.make_expert_params_mapping(ckpt_gate_proj_name="w1", ckpt_down_proj_name="w2", ckpt_up_proj_name="w3", num_experts=4)
        params_dict = dict(self.named_parameters())
        for name, loaded_weight in weights:
            for param_name, weight_name, shard_id in stacked_params_mapping:
                if weight_name not in name:
                    continue
                param = params_dict[name.replace(weight_name, param_name)]
                break
            else:
                for mapping in expert_params_mapping:
                    param_name, weight_name, expert_id, shard_id = mapping
                    if weight_name not in name:
                        continue
                    param = params_dict[name]
                    break
                else:
%s
                    param = params_dict[name]
                    weight_loader(param, loaded_weight)
"""


def _guard(*lines: str):
    import ast

    body = "\n".join(" " * 20 + line for line in lines) if lines else " " * 20 + "pass"
    (cls,) = ast.parse(textwrap.dedent(_LOADER % body)).body
    return extractor._class_facts(cls).get("unexpected_other")


def test_extractor_reads_the_other_names_guard_of_load_weights():
    """The branch of load_weights for names no stacked or expert row matched: a membership test guards it,
    a `.bias`-only test guards biases, PP/`is None`/name skips guard nothing; any other use of params_dict
    (a `.get`, an `in` branch, another helper) leaves it unknown."""
    bias = 'if name.endswith(".bias") and name not in params_dict:\n' + " " * 24 + "continue"
    assert _guard() == {"guard": "unguarded"}
    assert _guard(bias, "name = maybe_remap_kv_scale_name(name, params_dict)",
                  "if name is None:\n" + " " * 24 + "continue") == {"guard": "unguarded", "bias_skipped": True}
    assert _guard("if is_pp_missing_parameter(name, self):\n" + " " * 24 + "continue") == {"guard": "unguarded"}
    assert _guard("if name not in params_dict:\n" + " " * 24 + "continue") == {"guard": "guarded"}
    assert _guard("param = params_dict.get(name)") is None
    assert _guard("name = _resolve_scale_name(name, params_dict)") is None
    assert _guard("if name in params_dict:\n" + " " * 24 + "pass") is None
    assert _guard('if "rotary" in name:\n' + " " * 24 + "name = name[1:]") is None
    (auto,) = __import__("ast").parse("class A:\n    def load_weights(self, w):\n"
                                      "        return AutoWeightsLoader(self).load_weights(w)\n").body
    assert "unexpected_other" not in extractor._class_facts(auto)
    fields, _ = cf.extracted_fields({"unexpected_other": {"guard": "unguarded", "bias_skipped": True}}, "sglang")
    assert fields["unexpected_other"]["guard"] == "unguarded"
    assert "unexpected_other" not in cf.extracted_fields({}, "sglang")[0]


def test_unguarded_other_names_become_a_key_error_from_extracted_facts():
    """SGLang 0.5.23 PhiMoEForCausalLM.load_weights (models/phimoe.py) indexes params_dict for other names
    after skipping a missing `.bias` only: a KeyError for them, the generic rule for stacked and expert
    names. vLLM 0.34.0's PhiMoE loads through AutoWeightsLoader: nothing read, the generic rule."""
    t = resolve("sglang==0.5.23")[0]
    em = xc.extracted_model(t, "PhiMoEForCausalLM")
    assert em is not None and em.provenance["unexpected"] == "extracted" and "unexpected" in em.extracted
    u = _get(em.arch, "unexpected")
    other = _get(u, "other")
    assert _get(other, "consequence") == "load-error" and _get(other, "error") == "KeyError: '{ckpt}'"
    assert _get(u, "stacked") is None and _get(u, "expert") is None
    assert list(_get(u, "ignored_suffixes")) == [".bias"] and list(_get(u, "ignored_classes")) == ["other"]
    vl = xc.extracted_model(resolve("vllm==0.34.0")[0], "PhiMoEForCausalLM")
    assert vl is not None and vl.provenance["unexpected"] == "generic" and _get(vl.arch, "unexpected") is None


# --- the simulation from extracted facts, layered --------------------------------------------------

def _get(arch, name):
    return arch[name] if isinstance(arch, dict) else getattr(arch, name)


def test_minimax_m2_from_extracted_facts_on_both_frameworks():
    """The class differences the extraction sees: SGLang builds the LM head without the quant config,
    vLLM with it; both keep the experts under block_sparse_moe as w1/w3/w2 and the router unquantized."""
    sg = xc.extracted_model(resolve("sglang==0.5.23")[0], "MiniMaxM2ForCausalLM")
    vl = xc.extracted_model(resolve("vllm==0.33.0")[0], "MiniMaxM2ForCausalLM")
    assert sg is not None and vl is not None
    assert sg.key.endswith("minimax_m2:MiniMaxM2ForCausalLM") and vl.key.endswith("minimax_m2:MiniMaxM2ForCausalLM")
    for em in (sg, vl):
        kinds = {k["pattern"]: k["kind"] for k in _get(em.arch, "kinds")}
        assert kinds[r"\.block_sparse_moe\.gate$"] == "unquantized_linear"
        assert list(_get(em.arch, "expert_w13")) == ["w1", "w3"] and list(_get(em.arch, "expert_w2")) == ["w2"]
        assert em.provenance["experts"] == "extracted" and em.provenance["unexpected_param"] == "generic"
    assert {k["pattern"]: k["kind"] for k in _get(sg.arch, "kinds")}["^lm_head$"] == "unquantized_linear"
    assert {k["pattern"]: k["kind"] for k in _get(vl.arch, "kinds")}["^lm_head$"] == "lm_head"
    # vLLM's MiniMax-M2 declares only q/k/v as packed (no dense MLP): gate/up is not fused there
    assert [s["fused"] for s in _get(vl.arch, "stacked")] == ["qkv_proj"]
    assert sorted(s["fused"] for s in _get(sg.arch, "stacked")) == ["gate_up_proj", "qkv_proj"]


def test_quant_config_prefix_that_is_not_the_attribute_path():
    """A sub-layer's literal prefix becomes a quant_rename rule (layer index kept); a computed prefix, or
    branches that disagree, stay notes; sub-layers built without the quant config need no rule."""
    from ckptlint.simulate.renames import Renames
    from ckptlint.targets.schema import Architecture

    def quant_name(arch, name, role="main"):
        return Renames(arch).quant_name(name, role)

    leaves = [
        {"path": "model.layers.{N}.block_sparse_moe.experts", "class": "FusedMoE", "quant": "passed",
         "prefix": "model.layers.{N}.mlp.experts"},
        {"path": "model.layers.{N}.block_sparse_moe.gate", "class": "GateLinear", "quant": "absent",
         "prefix": "model.layers.{N}.mlp.gate"},
        {"path": "model.layers.{N}.self_attn.qkv_proj", "class": "QKVParallelLinear", "quant": "passed"},
        {"path": "model.eh_proj", "class": "ReplicatedLinear", "quant": "passed",
         "prefix": "model.layers.{config.num_hidden_layers}.eh_proj"},
        {"path": "model.layers.{N}.mlp.down_proj", "class": "RowParallelLinear", "quant": "passed",
         "prefix": "model.layers.{N}.ffn.down_proj"},
        {"path": "model.layers.{N}.mlp.down_proj", "class": "RowParallelLinear", "quant": "passed"},
    ]
    rules, notes = cf._quant_renames({"tree": {"leaves": leaves}})
    assert len(rules) == 1
    arch = Architecture.model_validate({"quant_rename": rules})
    assert quant_name(arch, "model.layers.12.block_sparse_moe.experts") == "model.layers.12.mlp.experts"
    assert quant_name(arch, "model.layers.12.block_sparse_moe.experts", "draft") == "model.layers.12.block_sparse_moe.experts"
    assert quant_name(arch, "model.layers.1.self_attn.qkv_proj") == "model.layers.1.self_attn.qkv_proj"
    assert any("model.eh_proj" in n and "cannot compute" in n for n in notes)
    assert any("model.layers.{N}.mlp.down_proj" in n and "different quant-config prefixes" in n for n in notes)
    # and on a real release: vLLM's MiniMax-M2 builds block_sparse_moe with the prefix `mlp` (models/minimax_m2.py)
    em = xc.extracted_model(resolve("vllm==0.33.0")[0], "MiniMaxM2ForCausalLM")
    assert em is not None and em.provenance["quant_rename"] == "extracted"
    assert quant_name(em.arch, "model.layers.3.block_sparse_moe.experts") == "model.layers.3.mlp.experts"
    assert not any("block_sparse_moe" in n for n in em.notes)


def test_hand_data_layered_over_extracted_facts():
    """vLLM 0.28.0 writes a placeholder entry for Qwen3_5MoeForCausalLM (generic = true) with the class's
    packed mapping and stacked shards by hand: those stay hand data, the rest comes from the extraction,
    and what neither gives from the generic rules."""
    t = resolve("vllm==0.28.0")[0]
    em = xc.extracted_model(t, "Qwen3_5MoeForCausalLM")
    assert em is not None
    hand = t.architecture("Qwen3_5MoeForCausalLM")
    assert em.provenance["packed_modules_mapping"] == "hand" and em.provenance["stacked"] == "hand"
    assert dict(_get(em.arch, "packed_modules_mapping")) == dict(_get(hand, "packed_modules_mapping"))
    assert em.provenance["unexpected_param"] == "generic"
    assert "extracted" in em.provenance.values()
    assert not _get(em.arch, "generic")


def test_hand_entries_are_not_replaced_by_extraction():
    from ckptlint.simulate import _extracted

    t = resolve("sglang==0.5.23")[0]
    assert _extracted(t, "DeepseekV3ForCausalLM", t.architecture("DeepseekV3ForCausalLM")) is None
    assert _extracted(t, "SomeNewForCausalLM", None) is None  # not registered: no class, no extraction


def test_classes_file_is_read_only_when_needed():
    """A checkpoint whose architecture has hand data never opens classes.json (check start-up)."""
    import subprocess

    code = ("from ckptlint.targets import resolve; from ckptlint.targets import extracted_classes as x; "
            "from ckptlint.simulate import _extracted; t = resolve('sglang==0.5.23')[0]; "
            "_extracted(t, 'DeepseekV3ForCausalLM', t.architecture('DeepseekV3ForCausalLM')); "
            "print(x._doc.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_coverage_doc_is_current():
    sys.path.insert(0, str(REPO / "scripts"))
    import update_coverage

    assert update_coverage.main(["--check"]) == 0, "docs/coverage.md is stale: python scripts/update_coverage.py"


def test_coverage_counts_add_up():
    from ckptlint.targets.coverage import coverage

    rows = coverage()
    assert {r["target"] for r in rows} == {f"{fw}=={v}" for fw, v in _releases()}
    for r in rows:
        c = r["counts"]
        unsupported = sum(1 for a in r["architectures"].values() if a["mode"] == "unsupported")
        assert c["hand"] + c["extracted"] + c["generic"] + unsupported == c["registered"]
        assert r["architectures"].get("MiniMaxM2ForCausalLM", {"mode": "extracted"})["mode"] == "extracted"


# --- the fixtures of real layouts, checked with every rule ------------------------------------------

_AS_PUBLISHED = ["LD901/minimax-m2-fp8-as-published", "QD401/phi3-fp8-as-published", "QD402/gemma3-fp8-as-published",
                 "QD402/mistral-fp8-as-published", "QD401/nemotron-fp8-as-published-vllm", "QD402/gemma2-fp8-as-published",
                 "QD402/phimoe-fp8-as-published"]


@pytest.mark.parametrize("case_id", _AS_PUBLISHED)
def test_layouts_as_published_are_clean_under_every_rule_and_not_generic(case_id, tmp_path):
    """The correct twin of each broken fixture: no finding but the hygiene note, on every target it names,
    and that note is TG605 (extracted), never TG604 (generic)."""
    sys.path.insert(0, str(REPO / "tests"))
    import contextlib
    import io

    from casefiles import build_case, discover

    from ckptlint import cli

    case = next(c for c in discover() if c.id == case_id)
    path = build_case(case, tmp_path / "ckpt")
    args = ["check", str(path), "--format", "json", "--isolated", "--quiet"]
    for t in case.data["targets"]:
        args += ["--target", t]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code
    findings = json.loads(out.getvalue())["findings"]
    assert code == 0, [(f["code"], f["target"], f["message"][:120]) for f in findings]
    assert sorted(f["code"] for f in findings) == ["TG605"] * len(case.data["targets"])
    assert {f["target"] for f in findings} == set(case.data["targets"])


def test_runtime_accessor_and_draft_facts_of_real_releases():
    """What the committed data says about two drafts the hand data also describes: SGLang's NextN draft of
    DeepSeek-V3 builds its layer as `model.decoder` (the release rewrites the architecture to it), vLLM's
    DeepSeek MTP keeps `model.layers.{N}`."""
    from ckptlint.targets.extracted import classes

    sg = classes("sglang", "0.5.23")
    assert sg.for_architecture("MiniMaxM2ForCausalLM") == "sglang.srt.models.minimax_m2:MiniMaxM2ForCausalLM"
    d = sg.facts("sglang.srt.models.deepseek_nextn:DeepseekV3ForCausalLMNextN")["draft"]
    assert "arch:DeepseekV3ForCausalLM" in d["serves"] and d["layer_naming"] == "model.decoder"
    vl = classes("vllm", "0.33.0")
    assert vl.facts("vllm.model_executor.models.deepseek_mtp:DeepSeekMTP")["draft"]["layer_naming"] == "model.layers.{N}"
    assert vl.stamp["wheel_sha256"] and classes("vllm", "0.0.1") is None


def test_plan_says_where_the_model_data_came_from(tmp_path):
    import contextlib
    import io

    sys.path.insert(0, str(REPO / "tests"))
    from casefiles import build_case, discover

    from ckptlint import cli

    case = next(c for c in discover() if c.id == "LD901/minimax-m2-fp8-as-published")
    path = build_case(case, tmp_path / "ckpt")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main(["plan", str(path), "--target", "sglang==0.5.23", "--format", "json"])
        except SystemExit:
            pass
    doc = json.loads(out.getvalue())
    assert doc["model_data"].startswith("extracted from sglang.srt.models.minimax_m2:MiniMaxM2ForCausalLM")
    mods = {m["module"]: m for m in doc["modules"]}
    assert mods["model.layers.0.block_sparse_moe.gate"]["kind"] == "unquantized_linear"
    assert mods["lm_head"]["kind"] == "unquantized_linear"
    assert mods["model.layers.0.block_sparse_moe.experts"]["kind"] == "moe"
