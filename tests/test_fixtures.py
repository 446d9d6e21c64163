"""The shipped fixtures are what the generator writes (no hand edits drift from the layouts), and
they are valid safetensors checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptlint.reader import load_checkpoint
from ckptlint.testing.fixtures import FIXTURES, write_fixture

ROOT = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_committed_fixture_matches_generator(tmp_path, name):
    fresh = write_fixture(name, tmp_path / name)
    committed = ROOT / name
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in fresh.iterdir())
    for p in fresh.iterdir():
        if p.suffix == ".json":
            assert json.loads((committed / p.name).read_text()) == json.loads(p.read_text()), p.name
        elif p.suffix == ".safetensors":
            a, b = (committed / p.name).read_bytes(), p.read_bytes()
            assert a == b, p.name


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_is_a_clean_container(name):
    ck = load_checkpoint(ROOT / name)
    assert ck.config is not None and ck.tensors
    assert [f for f in ck.issues if f.consequence.value != "hygiene"] == []
