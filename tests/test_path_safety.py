"""Names from the index are never used as paths outside the checkpoint; HF cache symlinks work."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

from ckptlint.reader import load_checkpoint
from ckptlint.testing import shard_name, write_checkpoint, write_safetensors

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # cannot be removed; records only while _OPENED is a list


class Recorder:
    def __init__(self) -> None:
        self.opened: list[str] = []
        self.stated: list[str] = []
        self.active = False

    def start(self) -> "Recorder":
        global _OPENED
        self.opened.clear()
        self.stated.clear()
        _OPENED = self.opened
        self.active = True
        return self

    def stop(self) -> tuple[list[str], list[str]]:
        global _OPENED
        _OPENED = None
        self.active = False
        return list(self.opened), list(self.stated)


@pytest.fixture
def record(monkeypatch):
    """Collect every path opened (audit 'open' events) or stat'ed between start() and stop()."""
    rec = Recorder()
    real_stat, real_lstat = os.stat, os.lstat

    def stat(p, *a, **kw):
        if rec.active:
            rec.stated.append(os.fsdecode(p) if not isinstance(p, int) else f"fd:{p}")
        return real_stat(p, *a, **kw)

    def lstat(p, *a, **kw):
        if rec.active:
            rec.stated.append(os.fsdecode(p))
        return real_lstat(p, *a, **kw)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "lstat", lstat)
    try:
        yield rec
    finally:
        rec.stop()


def _inside(path: str, root: Path) -> bool:
    full = os.path.normpath(os.path.join(os.getcwd(), path))
    return full == str(root) or full.startswith(str(root) + os.sep)


def test_hostile_index_never_touches_paths_outside(tmp_path, record):
    outer = tmp_path / "outer"
    root = write_checkpoint(outer / "ck", tensors="a F32 [2]\nb F32 [2]\nc F32 [2]", shards=1, index=True)
    secret = write_safetensors(outer / "secret.safetensors", "b F32 [2]\nc F32 [2]").path
    index = json.loads((root / "model.safetensors.index.json").read_text())
    index["weight_map"] = {"a": shard_name(1, 1), "b": "../secret.safetensors", "c": str(secret),
                           "d": "..", "e": "sub/../../secret.safetensors"}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    record.start()
    ck = load_checkpoint(root)
    opened, stated = record.stop()
    assert opened and stated, "the hooks saw nothing"
    for p in opened + stated:
        assert _inside(p, root.resolve()) or _inside(p, root), p
    assert not any("secret" in p for p in opened + stated)
    bad = [f for f in ck.issues if f.code == "IX203"]
    assert {f.data["shard"] for f in bad} == {"../secret.safetensors", str(secret), "..", "sub/../../secret.safetensors"}
    assert all("secret" not in t.file for t in ck.tensors.values())


def _hf_cache(tmp_path: Path) -> tuple[Path, Path]:
    """Lay a checkpoint out like huggingface_hub's cache: snapshots/<rev>/* -> ../../blobs/<sha>."""
    staging = write_checkpoint(tmp_path / "staging", config={"model_type": "llama"},
                               tensors="a BF16 [64, 32]\nb F8_E4M3 [32, 32]\nc F32 []", shards=2)
    repo = tmp_path / "hub" / "models--org--name"
    rev = "0123456789abcdef0123456789abcdef01234567"
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    for f in sorted(staging.iterdir()):
        sha = hashlib.sha256(f.name.encode() + f.read_bytes()[:4096]).hexdigest()
        os.rename(f, repo / "blobs" / sha)  # rename keeps sparse files sparse
        os.symlink(f"../../blobs/{sha}", snap / f.name)
    return staging, snap


def test_hf_cache_snapshot_reads_through_symlinks(tmp_path, record):
    _, snap = _hf_cache(tmp_path)
    record.start()
    ck = load_checkpoint(snap)
    opened, _ = record.stop()
    assert ck.issues == []
    assert ck.config == {"model_type": "llama"}
    assert set(ck.shards) == {shard_name(1, 2), shard_name(2, 2)}
    assert {n: (t.dtype, t.shape, t.file) for n, t in ck.tensors.items()} == {
        "a": ("BF16", (64, 32), shard_name(1, 2)),
        "b": ("F8_E4M3", (32, 32), shard_name(1, 2)),
        "c": ("F32", (), shard_name(2, 2)),
    }
    assert all(not os.path.isabs(s.file) for s in ck.shards.values())
    # files were opened through their snapshot names
    assert any(p.endswith(shard_name(1, 2)) for p in opened)


def test_hf_cache_single_file_symlink(tmp_path):
    _, snap = _hf_cache(tmp_path)
    ck = load_checkpoint(snap / shard_name(1, 2))
    assert ck.is_single_file and ck.config == {"model_type": "llama"}
    assert list(ck.tensors) == ["a", "b"] and ck.issues == []


def test_symlinked_checkpoint_directory(tmp_path):
    staging, snap = _hf_cache(tmp_path)
    link = tmp_path / "link"
    os.symlink(snap, link)
    assert load_checkpoint(link).issues == []
