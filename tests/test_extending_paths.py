"""A new architecture with an MTP draft, and a new quantization method, added as docs/extending.md says.

Each is done on a copy of the package (like tests/test_adding_a_release.py), with an invented name no
release has: the architecture `ExampleMoeMtpForCausalLM` (a DeepSeek-V3-style MoE whose NextN draft loads its
layer under `model.mtp_block.*`, counted by the config key `example_mtp_layers`) and the quant method
`example_fp8` (per-tensor FP8, skip list `skip_modules`). What comes from framework wheels is stood in for:
a release's extracted registry lists every class and method its wheel registers, and the invented names are
in none, so the test adds them to the copy's registries (re-stamped as the extractor stamps them), as a
wheel that registers them would have them; the conformance lock cannot be re-run offline, so the test shows
which releases' lock entries the edit makes stale. Synthetic checkpoints (headers only) come from
ckptlint.testing.

Skipped steps fail loudly: the test runs the project's own staleness and agreement tests against the copy
(a subprocess of pytest with the copy first on the path) and sees them fail before the step and pass after
it; a new quant method also needs a config parser (code): without one the method's checkpoints are
predicted wrongly, and `methods_without_parser` (checked on the real package below) names it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ckptlint.targets import known_versions, raw_files, resolve
from ckptlint.targets.coverage import release_coverage
from ckptlint.testing.builder import write_checkpoint
from ckptlint.testing.models import DenseDims, Layout, MoeDims, Spec, dense_spec, glm5_quark_mxfp4
from helpers import run_python

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conformance import ckptside, lock  # noqa: E402
from conformance.knowledge.common import content_digest  # noqa: E402

ARCH, DRAFT, COUNT_KEY = "ExampleMoeMtpForCausalLM", "ExampleMoeMtpForCausalLMNextN", "example_mtp_layers"
# the draft's renames (first match wins): its projection and norms to `model.*`, the rest of the layer to
# `model.mtp_block.*`; written into the TOML below and used to derive the fixed checkpoint's runtime names
DRAFT_RENAMES = [(r"^model\.layers\.{mtp}\.(?=(eh_proj|enorm|hnorm|shared_head\.norm)\b)", "model."),
                 (r"^model\.layers\.{mtp}\.", "model.mtp_block.")]
DRAFT_DROPS = ("shared_head.head", "embed_tokens")
MISSING_ERROR = "RuntimeError: ExampleMoeMtp draft layer weights missing from the checkpoint."
METHOD = "example_fp8"


# --- helpers -----------------------------------------------------------------------------------------
def _copy_package(tmp_path: Path) -> Path:
    pkg = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "ckptlint", pkg / "ckptlint", ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def _run(pkg: Path, *args: str) -> subprocess.CompletedProcess:
    return run_python(*args, pythonpath=os.pathsep.join((str(pkg), str(ROOT))), cwd=ROOT)


def _check(pkg: Path, ckpt: Path, *targets: str) -> dict:
    r = _run(pkg, "-m", "ckptlint", "check", str(ckpt), "--isolated", "-q", "-f", "json",
             *(a for t in targets for a in ("-t", t)))
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def _codes(doc: dict, target: str) -> set[str]:
    return {f["code"] for f in doc["findings"] if f.get("target") == target}


def _compile(pkg: Path) -> None:
    r = _run(pkg, "-m", "ckptlint.targets.compile")
    assert r.returncode == 0, r.stderr


def _suite(pkg: Path, *tests: str) -> tuple[dict[str, str], str]:
    """The project's own tests run against the copy: node id -> PASSED / FAILED, and the output."""
    r = _run(pkg, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *tests)
    got = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(PASSED|FAILED|ERROR) (\S+)", line)
        if m:
            got[m.group(2)] = m.group(1)
    assert set(got) == set(tests), r.stdout[-3000:]
    return got, r.stdout


def _data_file(pkg: Path, fw: str, version: str) -> Path:
    return pkg / "ckptlint" / "targets" / "data" / fw / f"{version}.toml"


def _release_and_later(fw: str) -> tuple[str, list[str]]:
    """A release some later release extends (the second newest), and every release that inherits its data."""
    versions = known_versions(fw)
    rel = versions[-2]

    def chain(v: str) -> list[str]:
        out = []
        while v is not None:
            out.append(v)
            v = raw_files(fw)[v].get("extends")
        return out

    later = [v for v in versions if v != rel and rel in chain(v)]
    assert later, f"no {fw} release extends {rel}"
    return rel, later


def _register(pkg: Path, fw: str, versions: list[str], *, archs: dict[str, bool] | None = None,
              methods: tuple[str, ...] = ()) -> None:
    """The extracted registries as `scripts/conformance.py extract FW VER` writes them from wheels that
    register the new names: listed, re-stamped with the content digest."""
    for v in versions:
        path = pkg / "ckptlint" / "targets" / "extracted" / fw / v / "registry.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        for name, is_draft in (archs or {}).items():
            mod = f"{fw}.srt.models.example_moe_mtp" if fw == "sglang" else f"{fw}.model_executor.models.example"
            doc["architectures"][name] = {"class": name, "draft": is_draft, "entry_module": mod, "module": mod,
                                          "table": "entry_class"}
        doc["methods"]["names"] = sorted(set(doc["methods"]["names"]) | set(methods))
        doc["digest"] = content_digest(doc)
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _write(spec: Spec, out: Path, config: dict | None = None) -> Path:
    write_checkpoint(out, config=config or spec.config, tensors=spec.tensors, shards=2,
                     hf_quant_config=spec.hf_quant_config)
    return out


# --- a new architecture with its MTP draft ---------------------------------------------------------------
def _arch_toml(fw: str) -> str:
    renames = ",\n".join(f"  {{ pattern = '{p}', to = \"{t}\" }}" for p, t in DRAFT_RENAMES)
    return f'''
# --- {ARCH}: synthetic (tests/test_extending_paths.py) ---
[[sources]]
file = "{fw}/srt/models/example_moe_mtp.py"
what = """{ARCH}: the DeepSeek-V3 loader; its draft {DRAFT} loads layer num_hidden_layers \
(counted by {COUNT_KEY}) as model.mtp_block.*, eh_proj/enorm/hnorm/shared_head.norm as model.*"""

[architectures.{ARCH}]
like = "DeepseekV3ForCausalLM"

[architectures.{ARCH}.draft]
class = "{DRAFT}"
count_keys = ["{COUNT_KEY}"]
keep_prefix = "model.layers.{{mtp}}."
drop = {json.dumps(list(DRAFT_DROPS))}
rename = [
{renames},
]
kinds = [{{ pattern = '^model\\.eh_proj$', kind = "linear", loader = "ReplicatedLinear" }}]
skiplist_rename = []
whole_draft_check = {{ methods = [], probe = "model.layers.{{mtp}}" }}
quant_none_for = []
missing_weights = {{ consequence = "load-error", error = "{MISSING_ERROR}" }}
'''


def _mtp_checkpoints(tmp_path: Path) -> tuple[Path, Path, Path, int]:
    """A Quark MXFP4 export of the architecture, its MTP layer BF16: excluded under checkpoint names only
    (as Quark writes it), plus the draft's runtime names (the fix), and one without the MTP layer."""
    dims = MoeDims(arch=ARCH, model_type="example_moe_mtp", num_hidden_layers=4, first_k_dense_replace=1)
    mtp = dims.num_hidden_layers

    def config(spec: Spec) -> dict:
        cfg = dict(spec.config)
        cfg[COUNT_KEY] = cfg.pop("num_nextn_predict_layers")
        return cfg

    spec = glm5_quark_mxfp4(dims, mtp_exclude="per-module")
    broken = _write(spec, tmp_path / "broken", config(spec))
    exclude = list(spec.config["quantization_config"]["exclude"])
    runtime = ["model.mtp_block.mlp.experts"]  # the draft's FusedMoE, by its prefix
    for entry in exclude:
        if not entry.startswith(f"model.layers.{mtp}.") or ".mlp.experts." in entry \
                or any(d in entry for d in DRAFT_DROPS):
            continue
        for pattern, to in DRAFT_RENAMES:
            rx = pattern.replace("{mtp}", str(mtp))
            if re.search(rx, entry):
                runtime.append(re.sub(rx, to, entry, count=1))
                break
    fixed_cfg = config(spec)
    fixed_cfg["quantization_config"] = {**fixed_cfg["quantization_config"], "exclude": exclude + runtime}
    fixed = _write(spec, tmp_path / "fixed", fixed_cfg)
    spec = glm5_quark_mxfp4(dims, mtp_exclude="per-module", with_mtp=False)
    missing = _write(spec, tmp_path / "missing", config(spec))
    return broken, fixed, missing, mtp


def test_new_architecture_with_an_mtp_draft(tmp_path):
    fw = "sglang"
    rel, later = _release_and_later(fw)
    targets = [f"{fw}=={v}" for v in [rel, *later]]
    pkg = _copy_package(tmp_path)
    broken, fixed, missing, mtp = _mtp_checkpoints(tmp_path)

    # no release registers the name, and the data has no entry: refused at start-up
    doc = _check(pkg, broken, targets[0])
    assert "TG601" in _codes(doc, targets[0]) and doc["verdicts"][targets[0]]["verdict"] == "not-supported"

    # 1. the entry, in the data file of the oldest release that has the class (later ones inherit it) ...
    data = _data_file(pkg, fw, rel)
    data.write_text(data.read_text(encoding="utf-8") + _arch_toml(fw), encoding="utf-8")
    # ... not compiled: `check` ignores the stale compiled.json (it validates the TOML files instead, slower)
    # and the suite fails
    compiled = "tests/test_targets.py::test_compiled_data_is_current"
    agrees = [f"tests/test_extracted_data.py::test_hand_data_agrees_with_the_registries[{t}]" for t in targets]
    coverage = "tests/test_extracted_classes.py::test_coverage_doc_is_current"
    got, out = _suite(pkg, compiled)
    assert got == {compiled: "FAILED"}, out[-3000:]
    # 2. compiled.json. The hand data now names an architecture the releases' registries do not register:
    # the suite fails until they are extracted from wheels that have the class
    _compile(pkg)
    got, out = _suite(pkg, compiled, *agrees)
    assert got == {compiled: "PASSED", **{a: "FAILED" for a in agrees}}, out[-3000:]
    assert f"hand data simulates {ARCH}, which the release does not register" in out
    # 3. the registries of releases whose wheels have the class and its draft class list both (stood in for:
    # the names are invented)
    _register(pkg, fw, [rel, *later], archs={ARCH: False, DRAFT: True})
    got, out = _suite(pkg, *agrees, coverage)
    assert got == {**{a: "PASSED" for a in agrees}, coverage: "FAILED"}, out[-3000:]
    # 4. docs/coverage.md counts one more hand-modelled architecture with a draft there: stale until
    # `scripts/update_coverage.py` rewrites it
    assert "python scripts/update_coverage.py" in out
    # 5. the conformance lock entries of exactly this release and those inheriting its data are stale
    # (`scripts/conformance.py run --target ...` re-runs them; it needs the wheels)
    probe = ("import json; from conformance import ckptside, lock; from ckptlint.targets import resolve; "
             "from ckptlint.targets.coverage import release_coverage; "
             f"print(json.dumps([{{t: lock.data_digest(t) for t in ckptside.targets()}}, "
             f"release_coverage(resolve({targets[0]!r})[0])['counts']]))")
    r = _run(pkg, "-c", probe)
    assert r.returncode == 0, r.stderr
    digests, counts = json.loads(r.stdout)
    assert set(digests) == set(ckptside.targets())
    assert {t for t, d in digests.items() if d != lock.data_digest(t)} == set(targets)
    before = release_coverage(resolve(targets[0])[0])["counts"]
    assert {k: counts[k] - before[k] for k in counts} == {
        "registered": 1, "hand": 1, "extracted": 0, "generic": 0, "with_draft": 1}

    # simulated from the hand data (not refused, not the generic rules, not extracted facts), the draft
    # from its own table: the MTP layer, counted by its own config key, loads under the draft's names,
    # where the checkpoint-named Quark entries do not match
    doc = _check(pkg, broken, *targets)
    for t in targets:
        assert not _codes(doc, t) & {"TG601", "TG603", "TG604", "TG605"}, (t, _codes(doc, t))
        qd = {f["module"]: f for f in doc["findings"] if f["target"] == t and f["code"] == "QD401"}
        assert {"model.eh_proj", "model.mtp_block.mlp.experts"} <= set(qd), (t, sorted(qd))
        assert all(m == "model.eh_proj" or m.startswith("model.mtp_block.") for m in qd), sorted(qd)
        assert all(f["consequence"] == "load-error" for f in qd.values())
        assert f"model.layers.{mtp}.mlp.experts.0." in qd["model.mtp_block.mlp.experts"]["message"]
        assert "`model.mtp_block.mlp.experts`" in qd["model.mtp_block.mlp.experts"]["hint"]
        assert doc["verdicts"][t]["verdict"] == "will-not-load"
    r = _run(pkg, "-m", "ckptlint", "plan", str(broken), "--isolated", "-t", targets[0], "-f", "json")
    plan = json.loads(r.stdout)
    assert plan["draft_class"] == DRAFT and plan["mtp_layers"] == [mtp] and plan["architecture"] == ARCH
    assert plan["model_data"] == "hand data"
    # the fix (the draft's runtime names added) loads
    doc = _check(pkg, fixed, *targets)
    for t in targets:
        assert doc["verdicts"][t]["verdict"] == "loads", (t, [(f["code"], f.get("module")) for f in doc["findings"]])
    # the draft's missing weights: what its table says the loader does
    doc = _check(pkg, missing, targets[0])
    (mt,) = [f for f in doc["findings"] if f["code"] == "MT701"]
    assert mt["consequence"] == "load-error" and mt["error_text"] == MISSING_ERROR
    assert f"{COUNT_KEY}=1" in mt["message"] and mt["module"] == f"model.layers.{mtp}"


# --- a new quantization method ---------------------------------------------------------------------------
PARSER_HOOK = f'''

# --- {METHOD}: synthetic (tests/test_extending_paths.py): the config format's parser, its scheme ---
def _parse_example_fp8(qc: dict[str, Any], method: str, regexes: RegexScope) -> QuantConfig:
    return QuantConfig("{METHOD}", "{METHOD}", "config.json", qc, scheme_fp8(None))


_PARSERS["{METHOD}"] = _parse_example_fp8
'''


def _method_toml(fw: str, match: str) -> str:
    return f'''
# --- {METHOD}: synthetic (tests/test_extending_paths.py) ---
[[sources]]
file = "{fw}/model_executor/layers/quantization/example_fp8.py"
what = """ExampleFp8Config: per-tensor FP8 Linear layers; skip list `skip_modules`, compared with the \
layer prefix ({match}); FusedMoE never skipped"""

[methods.{METHOD}]
exclude_keys = ["skip_modules"]
match = "{match}"
moe = "never"
quantizes = ["linear"]
'''


def methods_without_parser() -> list[str]:
    """Methods the target data simulates that ckptlint.quant cannot parse (a config naming one is read
    as an unknown method, with no scheme): the data alone cannot say what such a checkpoint stores."""
    from ckptlint.quant import parse_quant_config
    from ckptlint.targets import list_targets

    out = set()
    for t in list_targets():
        for name, m in t.data["methods"].items():
            if not m.get("supported", True) or not m.get("simulated", True):
                continue
            q, _ = parse_quant_config({"quantization_config": {"quant_method": name}}, None)
            if q is None or not q.known or q.method_key != name:
                out.add(name)
    return sorted(out)


def test_every_simulated_method_has_a_parser():
    missing = methods_without_parser()
    assert missing == [], (f"the target data simulates {missing}, which no parser in src/ckptlint/quant/__init__.py "
                           "(_PARSERS) reads: docs/extending.md, a new quantization method")


def _method_checkpoints(tmp_path: Path) -> tuple[Path, Path, str]:
    """A Llama-style export, every Linear FP8 but one kept BF16 and listed in `skip_modules`: by its module
    name, and by a wrong name (without `model.`)."""
    kept = "model.layers.0.mlp.down_proj"
    layout = Layout(lambda m: None if m.category in ("lm_head", "embed") or m.path == kept else "fp8_tensor")
    out = []
    for name, entry in (("listed", kept), ("wrong-name", kept.removeprefix("model."))):
        cfg = {"quant_method": METHOD, "activation_scheme": "dynamic", "skip_modules": ["lm_head", entry]}
        out.append(_write(dense_spec(DenseDims(), layout, cfg), tmp_path / name))
    return out[0], out[1], kept


def test_new_quant_method(tmp_path):
    fw = "vllm"
    rel = known_versions(fw)[-1]
    t = f"{fw}=={rel}"
    pkg = _copy_package(tmp_path)
    listed, wrong, kept = _method_checkpoints(tmp_path)

    # not in the release's extracted method registry: refused at start-up (TG601), with the release's text
    doc = _check(pkg, listed, t)
    (f,) = [f for f in doc["findings"] if f["code"] == "TG601"]
    assert "not in its quantization-method registry" in f["message"]
    assert f["error_text"].startswith(f"ValueError: Unknown quantization method: {METHOD}.")
    # 1. the registry lists it (as one extracted from a wheel that registers it): accepted, but no data, so
    # not simulated (TG603)
    _register(pkg, fw, [rel], methods=(METHOD,))
    doc = _check(pkg, listed, t)
    assert "TG603" in _codes(doc, t) and doc["verdicts"][t]["verdict"] == "no-verdict"
    assert "the release registers it" in next(f["message"] for f in doc["findings"] if f["code"] == "TG603")

    # 2. the method's rules: `[methods.<key>]` in the release's data, then compile. Data alone is not
    # enough: without a parser ckptlint reads the config as an unknown method (no scheme) and predicts
    # every FP8 module a mismatch; the guard names the method
    data = _data_file(pkg, fw, rel)
    base = data.read_text(encoding="utf-8")
    data.write_text(base + _method_toml(fw, "exact"), encoding="utf-8")
    _compile(pkg)
    doc = _check(pkg, listed, t)
    assert doc["verdicts"][t]["verdict"] == "will-not-load"
    assert any("assigns it no scheme" in f["message"] for f in doc["findings"] if f["code"] == "QD401")
    guard = ("import json, sys; sys.path.insert(0, 'tests'); import test_extending_paths as m; "
             "print(json.dumps(m.methods_without_parser()))")
    r = _run(pkg, "-c", guard)
    assert r.returncode == 0 and json.loads(r.stdout) == [METHOD], (r.stdout, r.stderr)

    # 3. the code hook: a parser for the config format, giving its scheme (ckptlint/quant/__init__.py)
    quant = pkg / "ckptlint" / "quant" / "__init__.py"
    quant.write_text(quant.read_text(encoding="utf-8") + PARSER_HOOK, encoding="utf-8")
    r = _run(pkg, "-c", guard)
    assert r.returncode == 0 and json.loads(r.stdout) == [], (r.stdout, r.stderr)
    doc = _check(pkg, listed, t)
    assert doc["verdicts"][t]["verdict"] == "loads", doc["findings"]
    assert not _codes(doc, t) & {"TG601", "TG603"}
    # which modules are quantized is decided by the method's skip list, as its data says
    r = _run(pkg, "-m", "ckptlint", "plan", str(listed), "--isolated", "-t", t, "-f", "json")
    plan = json.loads(r.stdout)
    assert plan["quant_method"] == METHOD and plan["skip_list_key"] == "skip_modules"
    linear = {m["module"]: m for m in plan["modules"] if m["kind"] == "linear"}
    assert linear[kept]["decision"] == "unquantized" and f"entry `{kept}`" in linear[kept]["reason"]
    assert {m["decision"] for k, m in linear.items() if k != kept} == {"quantized fp8"}
    assert len(linear) > 1
    # an entry under the wrong name (exact matching): the BF16 module is built FP8
    doc = _check(pkg, wrong, t)
    (f,) = [f for f in doc["findings"] if f["code"] == "QD401"]
    assert f["module"] == kept and "no `skip_modules` entry matches" in f["message"]
    assert doc["verdicts"][t]["verdict"] != "loads"
    # matching is data: the same entry under `suffix` matching (a dotted suffix of the name) loads
    data.write_text(base + _method_toml(fw, "suffix"), encoding="utf-8")
    _compile(pkg)
    doc = _check(pkg, wrong, t)
    assert doc["verdicts"][t]["verdict"] == "loads", doc["findings"]
