"""Offline: target data must not change without the conformance suite being rerun
(``scripts/conformance.py run`` rewrites conformance/lock.json when every release agrees)."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance import ckptside, lock  # noqa: E402


@pytest.mark.parametrize("target", ckptside.targets())
def test_target_data_matches_lock(target):
    locked = lock.read().get("targets", {}).get(target)
    if locked is None:
        pytest.xfail(f"{target} has never passed the conformance suite (not in conformance/lock.json)")
    assert locked["data"] == lock.data_digest(target), (
        f"{target}: target data changed since the conformance run that wrote conformance/lock.json; "
        "run `scripts/conformance.py run --target " + target + "` (docs/conformance.md)")


def test_data_digest_sees_a_change(monkeypatch):
    import ckptlint.targets as targets

    target = ckptside.targets("sglang")[-1]
    before = lock.data_digest(target)
    fw, _, v = target.partition("==")
    real = targets._merged(fw, v)
    monkeypatch.setattr(targets, "_merged", lambda f, ver: {**real, "release_notes": "changed"})
    assert lock.data_digest(target) != before
