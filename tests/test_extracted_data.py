"""Offline: the release knowledge extracted from the wheels (src/ckptlint/targets/extracted/) is current.

Every generated file must carry the version of the extractor that writes it today (a hash of the
extractor's source: changing the extractor without ``scripts/conformance.py extract --all`` fails here),
a content digest that matches its content (a hand edit fails), and the same wheel digest as every other
file extracted from that release; every supported release has one. The hand-written target data must
agree with the registries it is layered on. No wheel or network is needed: the wheels themselves are
checked by the opt-in conformance suite (tests/conformance).
"""

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance import ckptside, knowledge  # noqa: E402
from conformance.knowledge import common  # noqa: E402

from ckptlint.targets import list_targets  # noqa: E402
from ckptlint.targets.extracted import EXTRACTED_DIR, extracted_releases, knowledge as release_knowledge  # noqa: E402

FILES = sorted(Path(EXTRACTED_DIR).glob("*/*/*.json"))


def _rel(p: Path) -> str:
    return str(p.relative_to(EXTRACTED_DIR))


def test_every_supported_release_is_extracted():
    have = set(extracted_releases())
    missing = [t for t in ckptside.targets() if tuple(t.split("==")) not in have]
    assert not missing, f"no extracted registry for {missing}: run `python scripts/conformance.py extract FW VER`"


@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_generated_file_is_current(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    name = path.stem
    fw, ver = path.parent.parent.name, path.parent.name
    rerun = f"python scripts/conformance.py extract {fw} {ver}"
    assert (doc["framework"], doc["version"]) == (fw, ver)
    if name in knowledge.EXTRACTORS:  # (a file of an extractor on another branch is checked by its own test)
        want = common.extractor_version(knowledge.EXTRACTORS[name][1])
        assert doc["extractor"] == want, f"{_rel(path)} was written by extractor {doc['extractor']}, now {want}: {rerun}"
    assert doc["digest"] == common.content_digest(doc), f"{_rel(path)} was edited by hand: {rerun}"
    assert len(doc["wheel_sha256"]) == 64 and doc["wheel"].startswith(f"{fw}-{ver}-")


def test_files_of_one_release_name_the_same_wheel():
    by: dict[tuple[str, str], set[str]] = {}
    for p in FILES:
        doc = json.loads(p.read_text(encoding="utf-8"))
        by.setdefault((doc["framework"], doc["version"]), set()).add(doc["wheel_sha256"])
    assert {k: v for k, v in by.items() if len(v) > 1} == {}


def test_digest_sees_a_change():
    doc = json.loads(FILES[0].read_text(encoding="utf-8"))
    before = common.content_digest(doc)
    doc["architectures"] = {**doc.get("architectures", {}), "XForCausalLM": {"module": "m", "class": "X"}}
    assert common.content_digest(doc) != before


def test_extractor_version_sees_a_code_change(tmp_path, monkeypatch):
    import types

    src = tmp_path / "fake_extractor.py"
    src.write_text("def extract():\n    return 1\n")
    mod = types.ModuleType("fake_extractor")
    mod.__file__ = str(src)
    monkeypatch.setattr(common.inspect, "getsource", lambda m: Path(m.__file__).read_text())
    a = common.extractor_version(mod)
    src.write_text("def extract():\n    # a comment does not count\n    return 1\n")
    assert common.extractor_version(mod) == a
    src.write_text("def extract():\n    return 2\n")
    assert common.extractor_version(mod) != a


@pytest.mark.parametrize("target", list_targets(), ids=lambda t: t.resolved)
def test_hand_data_agrees_with_the_registries(target):
    """An architecture the hand data simulates is registered by the release; one it marks unsupported is
    not; a method it simulates is accepted (registered, or rewritten to a registered one by an override;
    ckptlint's ModelOpt variants are the release's `modelopt`)."""
    k = release_knowledge(target.framework, target.version)
    archs, methods = target.data["architectures"], target.data["methods"]
    for name, a in archs.items():
        if name == "*":
            continue
        if a.get("supported", True):
            assert k.registers(name), f"{target.resolved}: hand data simulates {name}, which the release does not register"
        else:
            assert not k.registers(name), f"{target.resolved}: hand data says {name} is unsupported, but it is registered"
    for name, m in methods.items():
        if not m.get("supported", True):
            continue
        fw_name = "modelopt" if name.startswith("modelopt") and name not in k.methods else name
        assert fw_name in k.methods or fw_name in k.override_names, (
            f"{target.resolved}: hand data supports method {name}, which the release neither registers nor rewrites")


@pytest.mark.parametrize("target", list_targets(), ids=lambda t: t.resolved)
def test_registry_facts(target):
    """Facts that must hold in every release's registry (a broken extraction fails here)."""
    k = release_knowledge(target.framework, target.version)
    assert len(k.architectures) > 100
    assert k.drafts, "no draft class found"
    assert all(e.module.startswith(f"{target.framework}.") for e in k.architectures.values())
    assert {"fp8", "awq", "compressed-tensors"} <= set(k.methods)
    assert k.method_refusal("fp8") is None
    msg = k.unknown_method_message("nosuchmethod")
    assert msg.startswith("ValueError: Unknown quantization method: nosuchmethod. Must be one of ['")
    assert k.method_refusal("nosuchmethod") == msg


def test_typo_architecture_is_refused_on_every_target():
    """A typo in `architectures` (no release registers the name) is one TG601 load-error per target,
    with that release's own text."""
    from ckptlint.reader import load_checkpoint
    from ckptlint.deployment import Deployment
    from ckptlint.simulate import simulate

    fixture = REPO / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"
    ckpt = load_checkpoint(str(fixture))
    ckpt.config = {**ckpt.config, "architectures": ["GlmMoeDsaXForCausalLM"]}
    for t in list_targets():
        plan = simulate(ckpt, t, Deployment())
        k = release_knowledge(t.framework, t.version)
        assert plan.unsupported is not None and "GlmMoeDsaXForCausalLM" in plan.unsupported, t.resolved
        assert plan.unsupported_error == k.unknown_arch_message(["GlmMoeDsaXForCausalLM"]), t.resolved
        assert "GlmMoeDsaXForCausalLM" in plan.unsupported_error


def test_unregistered_method_is_refused_on_every_target():
    """A quant_method no release registers (optimum-quanto's) is one TG601 load-error per target, with
    that release's own "Unknown quantization method" text."""
    from ckptlint.deployment import Deployment
    from ckptlint.reader import load_checkpoint
    from ckptlint.simulate import simulate

    ckpt = load_checkpoint(str(REPO / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"))
    ckpt.config = {**ckpt.config, "quantization_config": {"quant_method": "quanto", "weights": "int8"}}
    for t in list_targets():
        plan = simulate(ckpt, t, Deployment())
        k = release_knowledge(t.framework, t.version)
        assert plan.unsupported is not None and "quanto" in plan.unsupported, t.resolved
        assert plan.unsupported_error == k.unknown_method_message("quanto"), t.resolved


def test_refusal_texts_of_known_releases():
    """Facts read in the wheels (vllm 0.33.0: model_executor/models/registry.py _raise_for_unsupported,
    config/model.py _verify_quantization, platforms/rocm.py; sglang 0.5.23: layers/quantization/__init__.py
    platform branches, configs/model_config.py rocm_supported_quantization)."""
    v = release_knowledge("vllm", "0.33.0")
    assert v.unknown_arch_message("MotifForCausalLM").startswith(
        "ValueError: Model architecture MotifForCausalLM was supported in vLLM until v0.10.2")
    assert "install the plugin at https://" in v.unknown_arch_message("BartModel")
    assert v.dropped(["MotifForCausalLM"]) and v.dropped(["LlamaForCausalLM"]) is None
    assert v.method_refusal("experts_int8", "rocm") == "ValueError: experts_int8 quantization is currently not supported in rocm."
    assert v.method_refusal("experts_int8", "cuda") is None
    assert "--allow-deprecated-quantization" in v.method_refusal("fbgemm_fp8")
    assert v.method_refusal("auto-round") is None  # rewritten to `inc` by its override
    assert v.architectures["DeepSeekMTPModel"] == ("vllm.model_executor.models.deepseek_mtp", "DeepSeekMTP", True,
                                                   "speculative_decoding")
    s = release_knowledge("sglang", "0.5.23")
    assert s.method_refusal("gguf", "rocm") == "ValueError: gguf quantization is currently not supported in ROCm."
    assert s.method_refusal("mlx_q4", "cuda").startswith("ValueError: Unknown quantization method: mlx_q4.")
    assert s.methods["mxfp4"].platforms == ("cuda", "rocm")
    assert s.architectures["GlmMoeDsaForCausalLMNextN"].is_draft
    assert not s.architectures["GlmMoeDsaForCausalLM"].is_draft
