"""The shipped fixtures are what the generator writes (no hand edits drift from the layouts), and
they are valid safetensors checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptlint.reader import load_checkpoint
from ckptlint.testing.fixtures import all_fixtures, write_fixture

FIXTURES = all_fixtures()

ROOT = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_committed_fixture_matches_generator(tmp_path, name):
    fresh = write_fixture(name, tmp_path / name, sparse=True)
    committed = ROOT / name
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in fresh.iterdir())
    for p in fresh.iterdir():
        if p.suffix == ".json":
            assert json.loads((committed / p.name).read_text()) == json.loads(p.read_text()), p.name
        elif p.suffix == ".safetensors":
            # header and size (the data section is zeros in both; never compared byte by byte)
            with open(committed / p.name, "rb") as a, open(p, "rb") as b:
                ha, hb = a.read(8), b.read(8)
                n = int.from_bytes(ha, "little")
                assert ha == hb and a.read(n) == b.read(n), p.name
            assert (committed / p.name).stat().st_size == p.stat().st_size, p.name


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_is_a_clean_container(name):
    ck = load_checkpoint(ROOT / name)
    assert ck.config is not None and ck.tensors
    assert [f for f in ck.issues if f.consequence.value != "hygiene"] == []
