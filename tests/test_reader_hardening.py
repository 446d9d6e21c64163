"""The reader against inputs built to hang it, exhaust its memory or blow up its output (issue 18).

Each case runs ``ckptlint check`` in a process of its own, under an address-space limit (a blow-up
fails fast instead of taking the machine) and a wall-clock budget, and asserts the exit code (1: a
finding), no traceback, the peak RSS and the output size. Budgets are several times what the case
takes now on a loaded 2-core machine, and far below what it took before (noted per case).
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptlint.targets import list_targets
from ckptlint.testing import shard_name, write_checkpoint, write_safetensors

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="wait4 peak RSS, RLIMIT_AS, /dev/zero")

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "upstream" / "fp8-fused-name-in-skip-list"
EVERY = ["--target", "sglang", "--target", "vllm"]  # every release: the amplification cases multiply by them


def bounded(args: list[str], tmp_path: Path, *, seconds: float = 20, rss_mib: int = 250,
            address_gib: int = 3) -> tuple[int, bytes, str]:
    """Run ``ckptlint ARGS``: (exit code, stdout, stderr), asserting it ended within ``seconds``
    with at most ``rss_mib`` of peak RSS and no traceback."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_gib << 30, address_gib << 30))

    with open(out, "wb") as fo, open(err, "wb") as fe:
        start = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "ckptlint", *args], stdout=fo, stderr=fe,
                             stdin=subprocess.DEVNULL, preexec_fn=limit, cwd=tmp_path)
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > seconds:
                p.kill()
                os.wait4(p.pid, 0)
                raise AssertionError(f"ckptlint {' '.join(args)}: still running after {seconds} s")
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
    stderr = err.read_text(errors="replace")
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr[-2000:]
    # ru_maxrss also counts the forked copy of this test process before exec: the bound holds for the
    # child when that copy was smaller, and otherwise says the child stayed below it.
    peak = usage.ru_maxrss // 1024
    assert peak <= max(rss_mib, _own_rss_mib() + 16), f"peak RSS {peak} MiB > {rss_mib} MiB"
    return p.returncode, out.read_bytes(), stderr


def _own_rss_mib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) // 1024


def findings(stdout: bytes) -> list[dict]:
    return json.loads(stdout)["findings"]


def small_checkpoint(tmp_path: Path, **kw) -> Path:
    return write_checkpoint(tmp_path / "ck", tensors="a F32 [2]\nb F32 [2]", **kw)


# --- item 1: every local file is read with a cap; special files are never read ----------------------------


def _replace(path: Path, how: str) -> None:
    path.unlink(missing_ok=True)
    if how == "fifo":
        os.mkfifo(path)
    elif how == "dev-zero":
        os.symlink("/dev/zero", path)
    elif how == "sparse-3g":
        with open(path, "wb") as f:
            f.write(b'{"architectures": ["')
            f.truncate(3 << 30)


SPECIAL = ["fifo", "dev-zero", "sparse-3g"]  # before: hang forever; MemoryError (16 GB without a limit); 6 GB


@pytest.mark.parametrize("how", SPECIAL)
@pytest.mark.parametrize("name,code", [("config.json", "CF302"), ("hf_quant_config.json", "CF302"),
                                       ("model.safetensors.index.json", "IX201")])
def test_side_file_that_is_not_a_small_regular_file(tmp_path, how, name, code):
    root = small_checkpoint(tmp_path, shards=2)
    _replace(root / name, how)
    rc, out, _ = bounded(["check", str(root), "-f", "json", "-q"], tmp_path)
    assert rc == 1
    hit = [f for f in findings(out) if f["code"] == code and f["file"] == name]
    assert len(hit) == 1, findings(out)
    expected = {"fifo": "is a FIFO, not a regular file", "dev-zero": "is a character device, not a regular file",
                "sparse-3g": "is 3,221,225,472 bytes, more than the"}[how]
    assert expected in hit[0]["message"]
    assert ("not read" in hit[0]["message"]) == (how == "sparse-3g")  # (else frameworks fail on it too)


@pytest.mark.parametrize("how", ["fifo", "dev-zero"])
def test_config_beside_a_single_file(tmp_path, how):
    write_safetensors(tmp_path / "model.safetensors", "a F32 [2]")
    _replace(tmp_path / "config.json", how)
    rc, out, _ = bounded(["check", str(tmp_path / "model.safetensors"), "-f", "json", "-q"], tmp_path)
    assert rc == 1 and [f["code"] for f in findings(out)] == ["CF302"]


@pytest.mark.parametrize("how", ["fifo", "dev-zero"])
def test_shard_that_is_not_a_regular_file(tmp_path, how):
    root = small_checkpoint(tmp_path, shards=2)
    _replace(root / shard_name(2, 2), how)
    rc, out, _ = bounded(["check", str(root), "-f", "json", "-q"], tmp_path)
    hit = [f for f in findings(out) if f["code"] == "SF117"]
    assert rc == 1 and len(hit) == 1 and "is not a regular file" in hit[0]["message"]


def test_config_that_grows_past_the_cap_is_refused(tmp_path, monkeypatch):
    from ckptlint.fsutil import FileRefused, read_capped

    p = tmp_path / "grows.json"
    p.write_bytes(b"x" * 100)
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 10, *real_fstat(fd)[7:])))
    with pytest.raises(FileRefused, match="grew to more than the 50 bytes"):
        read_capped(p, 50)  # the size said 10 bytes; 51 were read, no more


# --- item 2: findings stay linear in the size of the input ------------------------------------------------


def _index_naming(root: Path, n: int, shard: callable) -> None:
    wm = {"a": shard_name(1, 1)}
    wm.update({f"model.layers.{i}.mlp.down_proj.weight": shard(i) for i in range(n)})
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_index_naming_20000_missing_shards(tmp_path, fmt):
    # before: 2,000 missing shards made 895 MB of JSON in 75 s and SARIF ran out of memory
    # (one IX204 per shard per release, each quoting the whole list)
    root = write_checkpoint(tmp_path / "ck", tensors="a F32 [2]", shards={"a": shard_name(1, 1)}, index=False)
    _index_naming(root, 20_000, lambda i: f"model-{i + 2:05d}-of-20001.safetensors")
    rc, out, _ = bounded(["check", str(root), "-f", fmt, "-q", *EVERY], tmp_path, seconds=60, rss_mib=400)
    assert rc == 1 and len(out) < 2_000_000, len(out)
    if fmt == "json":
        ix = [f for f in findings(out) if f["code"] == "IX204"]
        assert len(ix) == len(list_targets())  # one per release, each naming a few shards and the count
        assert all(f["data"]["shard_count"] == 20_000 and len(f["data"]["shards"]) == 50 for f in ix)
        assert all(len(f.get("error_text") or "") < 1000 for f in ix)
        assert any("20000 shard file(s) missing" in (f.get("error_text") or "") for f in ix)


def test_index_naming_20000_paths(tmp_path):
    root = write_checkpoint(tmp_path / "ck", tensors="a F32 [2]", shards={"a": shard_name(1, 1)}, index=False)
    _index_naming(root, 20_000, lambda i: f"../elsewhere/{i}.safetensors")
    rc, out, _ = bounded(["check", str(root), "-f", "json", "-q", *EVERY], tmp_path, seconds=60, rss_mib=400)
    ix = [f for f in findings(out) if f["code"] == "IX203"]
    assert rc == 1 and len(ix) == 1 and ix[0]["data"]["shard_count"] == 20_000 and len(out) < 500_000


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_long_tensor_name_is_not_repeated_in_full(tmp_path, fmt):
    # before: a 1 MB name came back ~114 times (19 releases then x module, tensors, message twice, hint,
    # data): 114 MB of JSON, more for SARIF
    import shutil

    root = tmp_path / "ck"
    shutil.copytree(FIXTURE, root)
    name = f"model.layers.0.mlp.{'x' * 1_000_000}.weight"
    write_safetensors(root / "extra.safetensors", f"{name} BF16 [4, 4]")
    index = json.loads((root / "model.safetensors.index.json").read_text())
    index["weight_map"][name] = "extra.safetensors"
    index["metadata"].pop("total_size", None)
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    rc, out, _ = bounded(["check", str(root), "-f", fmt, "-q", *EVERY], tmp_path, seconds=90, rss_mib=400)
    assert rc == 1 and len(out) < 2_000_000, len(out)
    assert b"more characters]" in out  # the name is there, shortened


def _raw_shard(path: Path, header: dict, data: int = 0) -> None:
    text = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * data)


def test_shapes_of_400000_dimensions(tmp_path):
    # before: 8 such shapes (6.4 MB of header) were multiplied out as big integers three times
    # (quadratic): 23 s for 4 shapes of 200,000 dimensions, minutes for these
    header = {f"t{i}": {"dtype": "U8", "shape": [2] * 400_000, "data_offsets": [0, 0]} for i in range(8)}
    _raw_shard(tmp_path / "model.safetensors", header)
    rc, out, _ = bounded(["check", str(tmp_path / "model.safetensors"), "-f", "json", "-q"], tmp_path, seconds=30)
    codes = {f["code"] for f in findings(out)}
    assert rc == 1 and "SF111" in codes, codes


def _has_holes(tmp_path: Path) -> bool:
    p = tmp_path / "probe"
    with open(p, "wb") as f:
        f.truncate(4 << 20)
    try:
        with open(p, "rb") as f:
            return os.lseek(f.fileno(), 0, getattr(os, "SEEK_HOLE", 4)) < 4 << 20
    except OSError:
        return False
    finally:
        p.unlink()


def test_sparse_shards_claiming_99_mb_headers(tmp_path):
    # before: 37 s and 214 MiB for 50 shards (99 MB of zeros read and decoded from each)
    if not _has_holes(tmp_path):
        pytest.skip("this file system does not report holes")
    root = small_checkpoint(tmp_path, index=False)
    for i in range(50):
        with open(root / f"z{i:02d}.safetensors", "wb") as f:
            f.write(struct.pack("<Q", 99_000_000))
            f.truncate(100_000_000)
    rc, out, _ = bounded(["check", str(root), "-f", "json", "-q"], tmp_path, seconds=15, rss_mib=150)
    hits = [f for f in findings(out) if f["code"] == "SF105"]
    assert rc == 1 and len(hits) == 50
    assert all("Expecting value at line 1 column 1" in f["message"] for f in hits)
    from ckptlint.reader import load_checkpoint

    assert load_checkpoint(root).bytes_read < 50 * 8192  # up to the first hole (a block), not 99 MB each


# --- item 7: SF102 does not print the first bytes of someone else's file ----------------------------------


def test_header_length_of_a_symlinked_private_file_is_not_printed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"hunter2!-my-password-and-more-text\n")
    root = small_checkpoint(tmp_path, index=False)
    os.symlink(secret, root / "evil.safetensors")
    rc, out, _ = bounded(["check", str(root), "-f", "json", "-q"], tmp_path)
    hit = [f for f in findings(out) if f["code"] == "SF102"]
    assert rc == 1 and len(hit) == 1 and "header_len" not in hit[0]["data"]
    n = int.from_bytes(b"hunter2!", "little")
    assert str(n) not in out.decode() and f"{n:,}" not in out.decode()


def test_plausible_header_length_is_still_quoted(tmp_path):
    p = tmp_path / "big.safetensors"
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 100_000_001))
        f.truncate(8 + 100_000_001)
    rc, out, _ = bounded(["check", str(p), "-f", "json", "-q"], tmp_path)
    hit = [f for f in findings(out) if f["code"] == "SF102"]
    assert rc == 1 and "100,000,001 bytes" in hit[0]["message"] and hit[0]["data"]["header_len"] == 100_000_001
