"""Shard headers read by a forked child (``ckptlint.forkread``) give exactly what a serial read
gives, including for broken shards (which the parent reads again itself), and a failing or unwanted
child never changes the result or outlives the read."""

from __future__ import annotations

import os
import struct

import pytest

from ckptlint import forkread as parallel
from ckptlint.reader import load_checkpoint
from ckptlint.reader.source import LocalDir
from ckptlint.testing.builder import write_checkpoint

pytestmark = pytest.mark.skipif(not parallel._can_fork(), reason="needs fork on Linux and no other thread")


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("CKPTLINT_JOBS", "2")
    monkeypatch.setattr(parallel, "MIN_SHARDS", 2)
    unpacked: list[str] = []
    real = parallel._unpack

    def counting(p, name):
        unpacked.append(name)
        return real(p, name)

    monkeypatch.setattr(parallel, "_unpack", counting)
    return unpacked


def _snapshot(ck):
    return (ck.tensors, {k: (v.size, v.header_len, v.n_tensors, v.bytes_read, v.data_bytes) for k, v in ck.shards.items()},
            [(f.code, f.consequence, f.message, f.file, f.tensors) for f in ck.issues], ck.bytes_read, ck.index)


def _checkpoint(tmp_path, broken: bool):
    tensors = [(f"model.layers.{i}.mlp.experts.{e}.{p}.weight", "BF16", (8, 16))
               for i in range(4) for e in range(4) for p in ("gate_proj", "up_proj", "down_proj")]
    out = tmp_path / "ckpt"
    out.mkdir()
    write_checkpoint(out, config={"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 4},
                     tensors=tensors, shards=8)
    shards = sorted(p for p in out.iterdir() if p.suffix == ".safetensors")
    if broken:
        shards[-1].write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 12\n")
        raw = shards[-2].read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        shards[-2].write_bytes(raw[:8] + raw[8:8 + n].replace(b'"BF16"', b'"XX16"', 1) + raw[8 + n:])
        shards[-3].write_bytes(raw[:8 + n // 2])  # truncated inside the header
    return out


@pytest.mark.parametrize("broken", [False, True])
def test_parallel_read_equals_serial(tmp_path, monkeypatch, forced, broken):
    path = _checkpoint(tmp_path, broken)
    parallel_ck = load_checkpoint(path)
    assert forced, "the child's results were not used"
    monkeypatch.setenv("CKPTLINT_JOBS", "1")
    serial_ck = load_checkpoint(path)
    assert _snapshot(parallel_ck) == _snapshot(serial_ck)
    if broken:
        # truncated header, unknown dtype, LFS pointer; and the index names tensors no shard holds
        assert sorted((f.code, f.file) for f in serial_ck.issues) == [
            ("IX205", "model.safetensors.index.json"), ("SF103", "model-00006-of-00008.safetensors"),
            ("SF106", "model-00007-of-00008.safetensors"), ("SF116", "model-00008-of-00008.safetensors")]
    else:
        assert serial_ck.issues == [] and len(serial_ck.tensors) == 48


def test_failing_child_falls_back_to_a_serial_read(tmp_path, monkeypatch, forced):
    path = _checkpoint(tmp_path, broken=False)
    monkeypatch.setenv("CKPTLINT_JOBS", "1")
    serial_ck = load_checkpoint(path)
    monkeypatch.setenv("CKPTLINT_JOBS", "2")

    def boom(res):
        raise RuntimeError("child failure")

    monkeypatch.setattr(parallel, "_pack", boom)  # the forked child inherits it and exits 1
    ck = load_checkpoint(path)
    assert forced == []  # nothing came from the child
    assert _snapshot(ck) == _snapshot(serial_ck)


def test_children_are_reaped(tmp_path, forced):
    path = _checkpoint(tmp_path, broken=False)
    load_checkpoint(path)
    assert forced
    parallel._reap(block=True)
    assert parallel._UNREAPED == []


def test_unwanted_child_is_reaped(tmp_path, forced):
    path = _checkpoint(tmp_path, broken=False)
    src = LocalDir(str(path))
    names = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    src.prefetch(names)
    pre = src._prefetch
    assert pre is not None
    pid = pre.pid
    src.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped by close()


@pytest.mark.parametrize("cpus,load,expected", [
    (1, 0.0, False), (2, 0.0, True), (2, 1.2, True), (2, 1.5, False), (2, 4.0, False), (16, 8.0, True),
    (16, 15.6, False),
])
def test_helper_only_with_an_idle_core(cpus, load, expected):
    assert parallel.helps(cpus, load) is expected


def test_jobs_setting(monkeypatch):
    monkeypatch.setenv("CKPTLINT_JOBS", "1")
    assert parallel.jobs() == 1
    monkeypatch.setenv("CKPTLINT_JOBS", "not a number")
    assert parallel.jobs() == 1


def test_child_reads_columns_and_the_parent_rebuilds_the_same_shard(tmp_path):
    """The reading child takes a clean header as columns (no tensor map to build and take apart
    again); what the parent rebuilds from them is the serial read of the same file."""
    from ckptlint.reader.header import read_shard

    path = _checkpoint(tmp_path, broken=False)
    for shard in sorted(p for p in path.iterdir() if p.suffix == ".safetensors"):
        cols = read_shard(str(shard), shard.name, columns=True)
        assert cols.columns is not None and cols.tensors == {}
        serial = read_shard(str(shard), shard.name)
        assert serial.columns is None
        rebuilt = parallel._unpack(parallel._pack(cols), shard.name)
        assert rebuilt.tensors == serial.tensors and list(rebuilt.tensors) == list(serial.tensors)
        assert rebuilt.info == serial.info and rebuilt.metadata == serial.metadata


def test_results_travel_through_shared_memory_or_the_pipe(tmp_path, monkeypatch, forced):
    """The child's results come back through the shared mapping when it fits them, else through the
    pipe (results larger than the mapping, or no mapping at all): the same checkpoint either way."""
    path = _checkpoint(tmp_path, broken=False)
    monkeypatch.setenv("CKPTLINT_JOBS", "1")
    serial = _snapshot(load_checkpoint(path))
    monkeypatch.setenv("CKPTLINT_JOBS", "2")
    messages: list[bytes] = []
    real = parallel._received

    def seen(msg, area):
        messages.append(msg[:1])
        return real(msg, area)

    monkeypatch.setattr(parallel, "_received", seen)
    assert _snapshot(load_checkpoint(path)) == serial
    monkeypatch.setattr(parallel, "SHARED_CAP", 64)  # smaller than the results: the pipe
    assert _snapshot(load_checkpoint(path)) == serial
    monkeypatch.setattr(parallel, "_shared_area", lambda: None)  # no mapping: the pipe
    assert _snapshot(load_checkpoint(path)) == serial
    assert messages == [parallel._IN_AREA, parallel._INLINE, parallel._INLINE]
    assert len(forced) == 3 * int(8 * parallel.CHILD_SHARE)  # every run used all the child read


def test_a_garbled_result_message_falls_back_to_a_serial_read(tmp_path, monkeypatch, forced):
    path = _checkpoint(tmp_path, broken=False)
    monkeypatch.setenv("CKPTLINT_JOBS", "1")
    serial = _snapshot(load_checkpoint(path))
    monkeypatch.setenv("CKPTLINT_JOBS", "2")
    real = parallel._sent
    # a length beyond the mapping, then a message of neither kind
    for garble in (lambda data, area: (real(data, area), parallel._IN_AREA + (1 << 40).to_bytes(8, "little"))[1],
                   lambda data, area: b"?" + data):
        monkeypatch.setattr(parallel, "_sent", garble)
        assert _snapshot(load_checkpoint(path)) == serial
    assert forced == []
