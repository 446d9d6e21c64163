"""Target data files load strictly, cite their sources, and resolve versions as docs/decisions.md#target-resolution says."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from ckptlint.targets import (FRAMEWORKS, TargetError, _merged, known_versions, raw_files, resolve,
                              validate_target_data)
from ckptlint.targets.schema import TargetData
from helpers import same_text

ALL = [(fw, v) for fw in FRAMEWORKS for v in known_versions(fw)]


@pytest.mark.parametrize("fw,version", ALL, ids=[f"{fw}=={v}" for fw, v in ALL])
def test_every_file_loads_strictly_and_cites_sources(fw, version):
    raw = raw_files(fw)[version]
    assert raw["framework"] == fw and raw["version"] == version
    # Each file cites what it transcribes, itself (not inherited).
    assert raw.get("sources"), f"{fw} {version} cites no upstream source"
    for src in raw["sources"]:
        assert src["file"].startswith(("sglang/", "vllm/")) and src["what"].strip()
    data = validate_target_data(fw, version)  # strict pydantic validation of the merged file
    assert data.summary.strip()
    if raw.get("extends"):
        assert raw["extends"] in raw_files(fw)


def test_unknown_keys_in_target_data_fail_loudly():
    merged = dict(_merged("sglang", known_versions("sglang")[0]))
    merged["methods"] = {**merged["methods"], "quark": {**merged["methods"]["quark"], "matchh": "exact"}}
    with pytest.raises(ValidationError):
        TargetData.model_validate(merged)


def test_required_targets_exist():
    assert {"0.5.15", "0.5.23"} <= set(known_versions("sglang"))
    assert "0.33.0" in known_versions("vllm")


def test_exact_release():
    (t,) = resolve("sglang==0.5.15")
    assert t.id == t.resolved == "sglang==0.5.15" and t.note is None


def test_between_releases_resolves_to_older_with_info():
    (t,) = resolve("vllm==0.20.0")
    assert t.resolved == "vllm==0.11.0" and t.id == "vllm==0.20.0"
    assert t.note_level == "info" and "not verified" in t.note


def test_newer_than_newest_uses_newest_with_warning():
    (t,) = resolve("sglang==0.9.0")
    assert t.resolved == f"sglang=={known_versions('sglang')[-1]}" and t.note_level == "warning"


def test_older_than_oldest_is_usage_error_naming_oldest():
    with pytest.raises(TargetError, match=known_versions("sglang")[0].replace(".", r"\.")):
        resolve("sglang==0.4.0")


def test_post_release_resolves_like_base():
    (t,) = resolve("sglang==0.5.15.post1")
    assert t.resolved == "sglang==0.5.15"


def test_unknown_framework_is_usage_error():
    with pytest.raises(TargetError, match="unknown framework"):
        resolve("tensorrt-llm==1.0")


def test_framework_without_version_means_every_release():
    ts = resolve("sglang")
    assert [t.version for t in ts] == list(known_versions("sglang"))


def test_glm5_draft_class_changes_at_0_5_16():
    # PR #30265: GLM-5 drafts get GlmMoeDsaForCausalLMNextN from 0.5.16 (source checked, docs/upstream-checks.md A1/B7).
    (old,) = resolve("sglang==0.5.15")
    (new,) = resolve("sglang==0.5.16")
    assert old.architecture("GlmMoeDsaForCausalLM").draft.cls == "DeepseekV3ForCausalLMNextN"
    assert new.architecture("GlmMoeDsaForCausalLM").draft.cls == "GlmMoeDsaForCausalLMNextN"
    (rule,) = old.architecture("GlmMoeDsaForCausalLM").draft.skiplist_rename
    assert (rule.kind, rule.pattern, rule.to) == ("substring", "model.layers.61", "model.decoder")
    assert new.architecture("GlmMoeDsaForCausalLM").draft.skiplist_rename == []


def test_compiled_data_is_current():
    # `check` reads the compiled JSON (no pydantic on the hot path); it must equal a fresh build of the
    # validated TOML files. Regenerate with `python -m ckptlint.targets.compile`.
    from ckptlint import hardware
    from ckptlint.targets import COMPILED, DATA_DIR
    from ckptlint.targets.compile import render, render_hardware

    stale = "stale: python -m ckptlint.targets.compile"
    same_text(Path(DATA_DIR, COMPILED).read_text(encoding="utf-8"), render(), stale)
    same_text(Path(hardware.COMPILED).read_text(encoding="utf-8"), render_hardware(), stale)


def test_stale_compiled_data_fails_naming_the_first_difference():
    # the failure the extending tests provoke on purpose: a one-line megabyte file, compared without
    # pytest's diff (untruncated under CI, it ran for minutes)
    from ckptlint.targets.compile import render

    fresh = render()
    at = len(fresh) // 2
    stale = fresh[:at] + "X" + fresh[at:]
    with pytest.raises(AssertionError, match=rf"^stale: regenerate\nfirst difference at character {at} of "
                                             rf"{len(stale)} \(expected {len(fresh)}\)"):
        same_text(stale, fresh, "stale: regenerate")
    same_text(fresh, fresh, "never raised")


def test_check_path_does_not_import_pydantic_hashlib_or_tempfile():
    # pydantic (~65 ms) validates target data only when compiling it; hashlib (OpenSSL, ~10 ms) and
    # tempfile are for commands that write or fingerprint (baselines, SARIF, fix), not for a check.
    import subprocess
    import sys

    code = ("import sys; from ckptlint.engine import check; from ckptlint.targets import newest_targets; "
            "from ckptlint.render.json_out import render; "
            "render(check('fixtures/glm5-quark-mxfp4-mtp-exclude-prefix', newest_targets())); "
            "print(sorted(m for m in ('pydantic', 'hashlib', 'tempfile') if m in sys.modules))")
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_wrapped_data_reads_keys_as_attributes_without_shadowing_dict_methods():
    from ckptlint._ns import wrap

    plain = wrap({"match": "exact", "cls": 1, "inner": {"class": "X", "values": [1]}})
    assert plain.match == plain["match"] == "exact" and plain.inner.cls == "X"
    assert plain.__dict__ is plain  # attribute reads are instance-dict lookups
    odd = plain.inner  # a key named like a dict method: that dict keeps its methods
    assert odd.values() is not None and list(odd.keys()) == ["class", "values"] and odd["values"] == [1]
    with pytest.raises(AttributeError):
        plain.missing
