"""`ckptlint fix`: the added entries are the runtime names an operator adds by hand, the fixed
checkpoint lints clean for that target, other targets get no new load error, writes are atomic."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ckptlint.fix import plan_fix, write_fix
from ckptlint.targets import list_targets, resolve
from ckptlint.testing.models import MoeDims, deepseek_dims, glm5_quark_mxfp4
from helpers import build, errors, run

ROOT = Path(__file__).resolve().parents[1] / "fixtures"


def copy_fixture(tmp_path, name="glm5-quark-mxfp4-mtp-exclude-prefix"):
    dst = tmp_path / name
    shutil.copytree(ROOT / name, dst)  # shipped fixtures are small and not sparse
    return dst


def test_fix_adds_exactly_the_runtime_names(tmp_path):
    path = copy_fixture(tmp_path)
    (t,) = resolve("sglang==0.5.15")
    fp = plan_fix(str(path), t)
    assert fp.file == "config.json" and fp.key_path == ["quantization_config", "exclude"]
    assert fp.added == ["model.decoder.mlp.experts", "model.eh_proj"]
    assert '+      "model.eh_proj"' in fp.diff and fp.remaining == [] and fp.regressions == []


@pytest.mark.parametrize("dims", [MoeDims(num_hidden_layers=40), deepseek_dims()], ids=["glm5-40", "deepseek-61"])
@pytest.mark.parametrize("target", ["sglang==0.5.15", "sglang==0.5.23", "vllm==0.24.0"])
def test_fixed_checkpoint_lints_clean_for_that_target(tmp_path, dims, target):
    path = build(tmp_path, glm5_quark_mxfp4(dims), sparse=True)
    (t,) = resolve(target)
    before = [f.module for f in errors(run(path, target), target)]
    fp = plan_fix(str(path), t, others=list_targets())
    if not before:
        assert fp.diff == ""
        return
    write_fix(str(path), fp)
    assert errors(run(path, target), target) == []
    assert fp.regressions == []  # no other verified release gets a new load error from the entries
    assert (path / "config.json.orig").exists()


def test_write_keeps_older_orig_and_formatting(tmp_path):
    path = copy_fixture(tmp_path)
    (path / "config.json.orig").write_text("older original\n")
    before = (path / "config.json").read_text()
    (t,) = resolve("sglang==0.5.15")
    notes = write_fix(str(path), plan_fix(str(path), t))
    assert any("kept the existing config.json.orig" in n for n in notes)
    assert (path / "config.json.orig").read_text() == "older original\n"
    after = (path / "config.json").read_text()
    assert list(json.loads(after)) == list(json.loads(before))  # key order kept
    assert after.splitlines()[1].startswith('  "')  # indentation kept (2 spaces)


def test_interrupted_write_leaves_original_intact(tmp_path, monkeypatch):
    path = copy_fixture(tmp_path)
    original = (path / "config.json").read_bytes()
    (t,) = resolve("sglang==0.5.15")
    fp = plan_fix(str(path), t)
    real_replace = os.replace

    def crash(src, dst):
        if str(dst).endswith("config.json"):
            raise KeyboardInterrupt("power cut before the rename")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_fix(str(path), fp, backup=False)
    assert (path / "config.json").read_bytes() == original
    assert not [p for p in path.iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_keeps_the_file_mode(tmp_path):
    from ckptlint.fsutil import atomic_write

    p = tmp_path / "config.json"
    p.write_text("{}")
    os.chmod(p, 0o644)
    atomic_write(p, b'{"a": 1}')
    assert (p.stat().st_mode & 0o777) == 0o644 and p.read_bytes() == b'{"a": 1}'
    new = tmp_path / "report.json"
    atomic_write(new, b"x")
    assert new.stat().st_mode & 0o044  # readable by others as a plain open() would make it (umask 022)


def _fixture_targets():
    from ckptlint.testing.upstream import CASES

    out = [("glm5-quark-mxfp4-mtp-exclude-prefix", t, {}) for t in ("sglang==0.5.15", "sglang==0.5.12")]
    out += [(f"upstream/{c.name}", t, c.deployment) for c in CASES for t in c.reported]
    return out


def test_fix_write_then_check_is_clean_on_every_fixable_fixture(tmp_path):
    # Property: wherever `fix` claims it can fix everything (entries to add, nothing unfixable), the
    # written checkpoint lints without load-error or silent-corruption for that target.
    from ckptlint.deployment import Deployment

    fixed = 0
    for name, target, dep in _fixture_targets():
        (t,) = resolve(target)
        fp = plan_fix(str(ROOT / name), t, Deployment(**dep), others=[])
        if not fp.added or fp.not_fixable:
            continue
        work = tmp_path / name.replace("/", "_") / target
        shutil.copytree(ROOT / name, work)  # shipped fixtures are small and not sparse
        write_fix(str(work), fp)
        rep = run(work, target, **dep)
        assert [(f.code, f.module) for f in rep.findings if f.target == target
                and f.consequence.value in ("load-error", "silent-corruption")] == [], (name, target)
        fixed += 1
    assert fixed >= 5  # the property is exercised, not vacuous


def test_fix_refuses_an_entry_that_would_also_exclude_the_main_model(tmp_path):
    """SGLang's Qwen3-Next draft loads mtp.* under model.*: its BF16 experts and the main model's NVFP4
    layer-0 experts are both `model.layers.0.mlp.experts`, so no exclude entry fixes the draft without
    breaking the main model. fix says so instead of proposing the entry."""
    from ckptlint.testing.models import qwen_mtp_spec

    path = build(tmp_path, qwen_mtp_spec())
    (t,) = resolve("sglang==0.5.23")
    fp = plan_fix(str(path), t)
    assert not fp.added and not fp.diff
    reasons = [why for f, why in fp.not_fixable if f.module == "model.layers.0.mlp.experts"]
    assert reasons and "also excludes the main model's quantized `model.layers.0.mlp.experts`" in reasons[0]


def _modelopt_config_json(tmp_path, key: str, name: str = "ckpt"):
    """A ModelOpt NVFP4 checkpoint in its config.json form (no hf_quant_config.json), attention BF16
    but missing from the skip list, which is written under ``key``."""
    import dataclasses

    from ckptlint.testing.models import modelopt_nvfp4

    spec = modelopt_nvfp4(deepseek_dims(num_hidden_layers=3, first_k_dense_replace=1, num_nextn_predict_layers=0),
                          config_json=True, with_mtp=False)
    spec = dataclasses.replace(spec, hf_quant_config=None)
    q = spec.config["quantization_config"]
    q[key] = [e for e in q.pop("ignore") if e != "*self_attn*"]
    return build(tmp_path, spec, name=name)


def _qd401_modules(path, target):
    return {m for f in errors(run(path, target), target) if f.code == "QD401"
            for m in (f.data.get("modules") or [f.module])}


def test_fix_over_releases_that_read_another_skip_list_key(tmp_path, capsys):
    # vLLM 0.11.0 reads ModelOpt's config.json skip list from `exclude_modules`, 0.24.0 from `ignore`
    # (target data): the checkpoint has `ignore`, so no one edit serves both.
    from helpers import cli_run

    old, new = "vllm==0.11.0", "vllm==0.24.0"
    path = _modelopt_config_json(tmp_path, "ignore")
    (a,), (b,) = resolve(old), resolve(new)
    assert plan_fix(str(path), a).key_path == ["quantization_config", "exclude_modules"]
    assert plan_fix(str(path), b).key_path == ["quantization_config", "ignore"]
    stuck = _qd401_modules(path, new)
    assert stuck and _qd401_modules(path, old)
    before = (path / "config.json").read_bytes()

    code, out, err = cli_run(capsys, "fix", str(path), "-t", old, "-t", new, "--isolated")
    assert code == 1
    assert '+    "exclude_modules": [' in out and '"ignore"' not in "".join(
        line for line in out.splitlines() if line.startswith("+"))
    assert (path / "config.json").read_bytes() == before  # (--diff is the default: nothing written)
    lines = [line for line in err.splitlines() if line.startswith("not fixable")]
    assert lines and all(line.startswith(f"not fixable by config ({new}): QD401 ") for line in lines)
    assert all(line.endswith(f"{new} reads `ignore` in config.json, {old} reads `exclude_modules` in config.json: "
                             f"one edit cannot serve both; run `ckptlint fix -t {new}` on its own") for line in lines)
    assert {line.split(": QD401 ")[1].split(":")[0] for line in lines} <= stuck
    assert "loads: vllm 0.11.0; will not load: vllm 0.24.0" in err

    # As advised: the edit for one release, then `fix` for the other on its own; both then load.
    write_fix(str(path), plan_fix(str(path), a))
    assert errors(run(path, old), old) == [] and _qd401_modules(path, new) == stuck
    fp = plan_fix(str(path), b)
    assert fp.key_path == ["quantization_config", "ignore"] and fp.not_fixable == []
    write_fix(str(path), fp)
    assert errors(run(path, old), old) == [] and errors(run(path, new), new) == []


def test_fix_edit_that_changes_which_key_another_release_reads(tmp_path):
    # SGLang 0.5.22 reads only `ignore`; 0.5.23 falls back to `exclude_modules` only while `ignore` is
    # absent. With `exclude_modules` in the file, adding `ignore` (for 0.5.22) makes 0.5.23 read it too:
    # one edit serves both, so 0.5.23's findings are not "not fixable". The other way round it does not.
    old, new = "sglang==0.5.22", "sglang==0.5.23"
    path = _modelopt_config_json(tmp_path, "exclude_modules")
    (a,), (b,) = resolve(old), resolve(new)
    assert plan_fix(str(path), b).key_path == ["quantization_config", "exclude_modules"]
    assert _qd401_modules(path, old) and _qd401_modules(path, new)

    reverse = plan_fix(str(path), [b, a])  # the `exclude_modules` edit: 0.5.22 still reads no skip list
    assert reverse.key_path == ["quantization_config", "exclude_modules"]
    assert reverse.not_fixable and {f.target for f, _ in reverse.not_fixable} == {old}
    assert all("one edit cannot serve both" in why for _, why in reverse.not_fixable)

    fp = plan_fix(str(path), [a, b])
    assert fp.key_path == ["quantization_config", "ignore"]
    assert fp.not_fixable == [] and fp.remaining == [] and fp.regressions == []
    write_fix(str(path), fp)
    assert errors(run(path, old), old) == [] and errors(run(path, new), new) == []
