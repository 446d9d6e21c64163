"""Offline: every target ``ckptlint targets`` lists has a conformance run recorded in
conformance/lock.json, and its target data has not changed since that run
(``scripts/conformance.py run`` records each target's last run, agreeing or not; docs/conformance.md)."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance import ckptside, lock  # noqa: E402


@pytest.mark.parametrize("target", ckptside.targets())
def test_target_data_matches_lock(target):
    locked = lock.read().get("targets", {}).get(target)
    assert locked is not None, (
        f"{target} has no conformance run in conformance/lock.json: run `{lock.rerun_command(target)}` "
        "(docs/conformance.md)")
    assert locked["data"] == lock.data_digest(target), (
        f"{target}: target data changed since the conformance run recorded in conformance/lock.json; "
        f"run `{lock.rerun_command(target)}` (docs/conformance.md)")


def test_docs_lock_status_is_generated_from_the_lock():
    assert lock.docs_current(ckptside.targets()), (
        "docs/conformance.md's lock-status table is not the lock's: run "
        "`python scripts/conformance.py lock-status --write-docs`")


def test_data_digest_sees_a_change(monkeypatch):
    import ckptlint.targets as targets

    target = ckptside.targets("sglang")[-1]
    before = lock.data_digest(target)
    fw, _, v = target.partition("==")
    real = targets._merged(fw, v)
    monkeypatch.setattr(targets, "_merged", lambda f, ver: {**real, "release_notes": "changed"})
    assert lock.data_digest(target) != before


def test_lock_entry_and_status_text():
    from conformance.core import Disagreement

    target = ckptside.targets("sglang")[-1]
    d = Disagreement("sglang", "0.5.23", "config", "fp8", "probe:x", "model.layers.0.mlp.gate_up_proj", (),
                     "quantized", "unquantized")
    e = lock.entry(target, fingerprints={"m:f": "1"}, checked=10, disagreements=[d, d], allowed=1, stale=[])
    assert e["disagreements"] == 2 and e["disagreement_ids"] == ["[config] fp8 probe:x :: model.layers.0.mlp.gate_up_proj"]
    assert lock.result_text(e) == "2 disagreements"
    clean = lock.entry(target, fingerprints={"m:f": "1"}, checked=10, disagreements=[], allowed=0, stale=[])
    assert lock.result_text(clean) == "agree" and clean["disagreements_digest"] != e["disagreements_digest"]
    assert lock.result_text({**clean, "stale_allow": ["x"]}) == "1 stale allow entry"
