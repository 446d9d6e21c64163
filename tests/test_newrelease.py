"""Offline: the new-release comparison of loading code (conformance/newrelease.py) on small synthetic
sources -- units cut by their AST line range, the formatting / cosmetic / behaviour split, the
registry diff and the report's diffs -- and conformance/vllm.py's ``_source_of`` on a method that
is followed by more code."""

import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance import newrelease as N  # noqa: E402


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


# --- _source_of (the dedent bug: a method followed by top-level code was never found) -------------

def test_source_of_cuts_a_method_at_its_own_end(tmp_path):
    from conformance import vllm as V

    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent('''\
        import functools

        class Model:
            packed = {"qkv_proj": ["q_proj"]}

            @functools.lru_cache
            def helper(self):
                return 1

            def load_weights(self, weights):
                stacked = [("qkv_proj", "q_proj", "q")]
                for name, w in weights:
                    pass
                return set()


        EntryClass = Model
        x = 1
        '''), encoding="utf-8")
    ns: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    src = V._source_of(ns["Model"].load_weights)
    assert src is not None and src.startswith("def load_weights(self, weights):")
    assert "EntryClass" not in src and src.rstrip().endswith("return set()")
    helper = V._source_of(ns["Model"].__dict__["helper"].__wrapped__)
    assert helper is not None and helper.startswith("@functools.lru_cache") and "load_weights" not in helper


# --- classification -------------------------------------------------------------------------------

OLD_FN = '''\
def load_weights(self, weights):
    """Load the checkpoint."""
    stacked = [("qkv_proj", "q_proj", "q"), ("qkv_proj", "k_proj", "k")]
    for name, w in weights:
        if name not in self.params:
            logger.warning("skipping %s", name)
            continue
    if self.missing:
        raise ValueError("layer {} missing".format(self.missing))
    return set()
'''


def test_same_and_formatting_only():
    assert N.classify(OLD_FN, OLD_FN) == ("same", [])
    reflowed = OLD_FN.replace('stacked = [("qkv_proj", "q_proj", "q"), ("qkv_proj", "k_proj", "k")]',
                              'stacked = [  # shards\n        ("qkv_proj", "q_proj", "q"),\n'
                              '        ("qkv_proj", "k_proj", "k"),\n    ]')
    assert N.classify(OLD_FN, reflowed)[0] == "formatting"


@pytest.mark.parametrize("edit, reason", [
    (('"""Load the checkpoint."""', '"""Load every tensor of the checkpoint."""'), "docstring"),
    (('logger.warning("skipping %s", name)', 'logger.warning_once("ignored: %s", name)'), "log message"),
    (('"layer {} missing".format(self.missing)', 'f"layer {self.missing} missing"'), "formatted-string style"),
    (('"layer {} missing".format(self.missing)', '"layer %s missing" % self.missing'), "formatted-string style"),
])
def test_cosmetic_edits_are_named(edit, reason):
    verdict, reasons = N.classify(OLD_FN, OLD_FN.replace(*edit))
    assert verdict == "cosmetic" and reason in reasons


@pytest.mark.parametrize("edit", [
    ('("qkv_proj", "k_proj", "k")', '("qkv_proj", "k_proj", "v")'),  # a renaming table entry
    ("            continue\n", "            raise KeyError(name)\n"),  # an unknown name now fails
    ('        raise ValueError("layer {} missing".format(self.missing))\n', "        pass\n"),  # check removed
    ('raise ValueError("layer', 'raise ValueError("weights of layer'),  # an error text changed
    ('"layer {} missing".format(self.missing)', 'f"layer {self.missing + 1} missing"'),  # its argument
    ('for name, w in weights:', 'for name, w in weights:\n        name = f"model.{name}"'),  # a name built
])
def test_behaviour_changes(edit):
    new = OLD_FN.replace(*edit)
    assert new != OLD_FN
    assert N.classify(OLD_FN, new)[0] == "behaviour"


def test_raises_and_diff():
    new = OLD_FN.replace('        raise ValueError("layer {} missing".format(self.missing))\n', "        pass\n")
    assert N.raises(OLD_FN) == ["ValueError: 'layer {} missing'.format(self.missing)"] and N.raises(new) == []
    diff = N.unified(OLD_FN, new, "a", "b")
    assert diff[0] == "--- a" and diff[1] == "+++ b"
    assert '-        raise ValueError("layer {} missing".format(self.missing))' in diff and "+        pass" in diff
    long = N.unified(OLD_FN, "x = 1\n", limit=5)
    assert len(long) == 6 and long[-1].endswith("more diff lines")


# --- inventory and comparison of two synthetic releases ---------------------------------------------

REGISTRY = '''\
_TEXT = {
    "FooForCausalLM": ("foo", "FooForCausalLM"),
    "BarForCausalLM": ("bar", "BarForCausalLM"),
}
_SPECULATIVE_DECODING_MODELS = {
    "FooMTPModel": ("foo_mtp", "FooMTP"),
}
_VLLM_MODELS = {**_TEXT, **_SPECULATIVE_DECODING_MODELS}
'''
QUANT = '''\
from typing import Literal
QuantizationMethods = Literal["fp8", "awq", "old_method"]
DEPRECATED_QUANTIZATION_METHODS = ["old_method"]
def get_quantization_config(name):
    method_to_config = {"fp8": Fp8Config, "awq": AWQConfig, "old_method": OldConfig}
    return method_to_config[name]
'''
FOO = '''\
from .utils import fuse_experts


class FooModel:
    def load_weights(self, weights):
        stacked = [("qkv_proj", "q_proj", "q")]
        return self._rest(fuse_experts(weights), stacked)

    def _rest(self, weights, stacked):
        return set()


class FooForCausalLM:
    packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}
    hf_to_vllm_mapper = WeightsMapper(orig_to_new_prefix={"model.": "model."})
    supports_lora = True

    def __init__(self):
        self.model = FooModel()

    def load_weights(self, weights):
        return AutoWeightsLoader(self).load_weights(weights, mapper=self.hf_to_vllm_mapper)


EntryClass = FooForCausalLM
'''
FOO_MTP = '''\
class FooMTP:
    def load_weights(self, weights):
        loaded = set()
        if not loaded:
            raise ValueError("MTP layer weights missing from checkpoint")
        return loaded
'''
UTILS = '''\
def fuse_experts(weights):
    return weights


class AutoWeightsLoader:
    def load_weights(self, weights, mapper=None):
        return set()


class WeightsMapper:
    orig_to_new_prefix: dict = {}

    def apply(self, weights):
        return weights
'''
BAR = '''\
class BarForCausalLM:
    def load_weights(self, weights):
        return set()
'''


def _release(root: Path, **over: str) -> Path:
    files = {"vllm/__init__.py": "", "vllm/model_executor/models/registry.py": REGISTRY,
             "vllm/model_executor/layers/quantization/__init__.py": QUANT,
             "vllm/model_executor/models/foo.py": FOO, "vllm/model_executor/models/foo_mtp.py": FOO_MTP,
             "vllm/model_executor/models/utils.py": UTILS, "vllm/model_executor/models/bar.py": BAR}
    files.update(over)
    return _write(root, {k: v for k, v in files.items() if v is not None})


def test_inventory_units_and_registries(tmp_path):
    inv = N.inventory(_release(tmp_path / "a"), "vllm")
    m = "vllm.model_executor.models"
    keys = set(inv.units)
    assert {f"{m}.foo:FooModel.load_weights", f"{m}.foo:FooModel._rest", f"{m}.utils:fuse_experts",
            f"{m}.foo:FooForCausalLM.load_weights", f"{m}.foo:FooForCausalLM.packed_modules_mapping",
            f"{m}.foo:FooForCausalLM.hf_to_vllm_mapper", f"{m}.foo_mtp:FooMTP.load_weights",
            f"{m}.utils:AutoWeightsLoader.load_weights", f"{m}.utils:WeightsMapper.apply"} <= keys
    assert f"{m}.foo:FooForCausalLM.supports_lora" not in keys  # not a loading attribute
    # the unit is the method alone, although the file goes on after it
    assert inv.units[f"{m}.foo:FooForCausalLM.load_weights"].source.rstrip().endswith("mapper=self.hf_to_vllm_mapper)")
    assert inv.units[f"{m}.foo_mtp:FooMTP.load_weights"].draft
    assert inv.archs == {"FooForCausalLM": "foo:FooForCausalLM", "BarForCausalLM": "bar:BarForCausalLM"}
    assert inv.drafts == {"FooMTPModel": "foo_mtp:FooMTP"}
    assert inv.methods == {"fp8": "Fp8Config", "awq": "AWQConfig", "old_method": "OldConfig"}
    assert inv.deprecated == {"old_method"}


def test_compare_and_report(tmp_path):
    old = N.inventory(_release(tmp_path / "a"), "vllm")
    new_registry = REGISTRY.replace('"BarForCausalLM": ("bar", "BarForCausalLM"),',
                                    '"BazForCausalLM": ("baz", "BazForCausalLM"),\n'
                                    '    "FooForCausalLM": ("vllm.models.foo", "FooForCausalLM"),')
    new = N.inventory(_release(
        tmp_path / "b",
        **{"vllm/model_executor/models/registry.py": new_registry.replace(
            '    "FooForCausalLM": ("foo", "FooForCausalLM"),\n', ""),
           "vllm/model_executor/layers/quantization/__init__.py": QUANT.replace(', "old_method"]', ', "new_method"]')
           .replace('"old_method": OldConfig', '"new_method": NewConfig').replace('["old_method"]', '[]'),
           # the MTP completeness check removed
           "vllm/model_executor/models/foo_mtp.py": FOO_MTP.replace(
               '        if not loaded:\n            raise ValueError("MTP layer weights missing from checkpoint")\n', ""),
           # the docstring of an inner loader: cosmetic; a reflow: formatting
           "vllm/model_executor/models/foo.py": FOO.replace(
               "    def _rest(self, weights, stacked):\n",
               '    def _rest(self, weights, stacked):\n        """The rest."""\n').replace(
               'stacked = [("qkv_proj", "q_proj", "q")]', 'stacked = [\n            ("qkv_proj", "q_proj", "q"),\n        ]'),
           "vllm/model_executor/models/bar.py": None,
           "vllm/model_executor/models/baz.py": BAR.replace("Bar", "Baz")}), "vllm")
    cmp = N.compare(old, new)
    m = "vllm.model_executor.models"
    verdicts = {c.key: c.verdict for c in cmp.changes}
    assert verdicts[f"{m}.foo_mtp:FooMTP.load_weights"] == "behaviour"
    assert verdicts[f"{m}.foo:FooModel._rest"] == "cosmetic"
    assert verdicts[f"{m}.foo:FooModel.load_weights"] == "formatting"
    assert f"{m}.foo:FooForCausalLM.load_weights" not in verdicts  # unchanged
    # BarForCausalLM.load_weights left bar.py and BazForCausalLM's is new: a different qualified name
    assert verdicts[f"{m}.bar:BarForCausalLM.load_weights"] == "removed"
    assert verdicts[f"{m}.baz:BazForCausalLM.load_weights"] == "added"
    text = "\n".join(N.report(cmp, old_name="1.0", new_name="1.1", tracked={"FooForCausalLM", "FooMTP"},
                              models_pkg=m))
    assert "  + BazForCausalLM -> baz:BazForCausalLM" in text
    assert "  - BarForCausalLM (was bar:BarForCausalLM)" in text
    assert "  ~ FooForCausalLM: foo:FooForCausalLM -> vllm.models.foo:FooForCausalLM *" in text
    assert "  + new_method (NewConfig)" in text and "  - old_method (was deprecated)" in text
    assert "-- behaviour changes: 1 " in text
    assert "-- raises lost or gained in modelled classes and the shared loader: 1 unit(s)" in text
    assert "raise removed: ValueError: 'MTP layer weights missing from checkpoint'" in text
    assert '    -        raise ValueError("MTP layer weights missing from checkpoint")' in text  # the diff
    assert f"{m}.foo:FooModel._rest [helper] *: docstring" in text  # (1.1 registers FooForCausalLM elsewhere)
    # FooForCausalLM builds FooModel: AutoWeightsLoader's delegation reaches FooModel's loader
    assert N.serves(old, old.units[f"{m}.foo:FooModel._rest"], m) == ["FooForCausalLM"]
    assert N.serves(old, old.units[f"{m}.utils:WeightsMapper.apply"], m) == []
    assert "-- formatting only (same AST): 1" in text


def test_moved_unit_is_compared_with_its_old_self(tmp_path):
    old = N.inventory(_release(tmp_path / "a"), "vllm")
    new = N.inventory(_release(tmp_path / "b", **{
        "vllm/model_executor/models/bar.py": None,
        "vllm/model_executor/models/bar2.py": BAR.replace("return set()", "return {1}")}), "vllm")
    (c,) = [c for c in N.compare(old, new).changes if c.key.endswith("BarForCausalLM.load_weights")]
    assert c.verdict == "moved" and c.reasons[:2] == ["from vllm.model_executor.models.bar", "behaviour"]


def test_sglang_entry_classes(tmp_path):
    root = _write(tmp_path, {
        "sglang/__init__.py": "",
        "sglang/srt/models/foo.py": FOO.replace("EntryClass = FooForCausalLM",
                                                "class FooNextN(FooForCausalLM):\n    pass\n\n\n"
                                                "EntryClass = [FooForCausalLM, FooNextN]"),
        "sglang/srt/layers/quantization/__init__.py": 'BASE_QUANTIZATION_METHODS = {"fp8": Fp8Config}\n'})
    inv = N.inventory(root, "sglang")
    assert inv.archs == {"FooForCausalLM": "sglang.srt.models.foo:FooForCausalLM"}
    assert inv.drafts == {"FooNextN": "sglang.srt.models.foo:FooNextN"}
    assert inv.methods == {"fp8": "Fp8Config"}


def test_annotations_are_cosmetic_and_fingerprinted_objects_are_attributes(tmp_path):
    old = 'def apply_vllm_mapper(self, m: "WeightsMapper") -> None:\n    self.x = m.apply(self.x)\n'
    new = "def apply_vllm_mapper(self, m: WeightsMapper):\n    self.x = m.apply(self.x)\n"
    assert N.classify(old, new) == ("cosmetic", ["annotations"])
    for name in ("a", "b"):
        _write(tmp_path / name, {"pkg/m.py": "class C:\n    mapper = WeightsMapper()\n\n    def f(self):\n"
                                             f"        return {name!r}\n"})
    got = {k: v for k, v, *_ in N.classify_keys(tmp_path / "a", tmp_path / "b", ["pkg.m:C.mapper", "pkg.m:C.f"])}
    assert got == {"pkg.m:C.mapper": "attributes", "pkg.m:C.f": "behaviour"}


def test_new_command_prints_the_loading_report_offline(tmp_path, monkeypatch, capsys):
    """`scripts/conformance.py new ... --no-decisions` on two synthetic releases (no wheel, no network):
    the previous release's target data marks what it models."""
    import importlib.util

    from conformance import wheels

    old = _release(tmp_path / "old", **{"vllm/model_executor/models/registry.py": REGISTRY.replace(
        '"FooForCausalLM": ("foo", "FooForCausalLM")', '"DeepseekV3ForCausalLM": ("foo", "FooForCausalLM")')})
    new = _release(tmp_path / "new", **{
        "vllm/model_executor/models/registry.py": REGISTRY.replace(
            '"FooForCausalLM": ("foo", "FooForCausalLM")', '"DeepseekV3ForCausalLM": ("foo", "FooForCausalLM")'),
        "vllm/model_executor/models/foo.py": FOO.replace('("qkv_proj", "q_proj", "q")', '("qkv_proj", "q_proj", 0)')})
    roots = {"0.33.0": old, "0.34.0": new}
    monkeypatch.setattr(wheels, "source_dir", lambda fw, v, download=True: roots[v])
    spec = importlib.util.spec_from_file_location("conformance_script", REPO / "scripts" / "conformance.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["new", "vllm", "0.34.0", "--previous", "0.33.0", "--no-decisions", "--no-download"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== loading code 0.33.0 -> 0.34.0:")
    assert "vllm.model_executor.models.foo:FooModel.load_weights [load_weights] * serves DeepseekV3ForCausalLM" in out
    assert '+    stacked = [("qkv_proj", "q_proj", 0)]' in out
