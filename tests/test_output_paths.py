"""Where ``--output`` and ``--write-baseline`` write: the path as ``open(path, "wb")`` reaches it.

A device or pipe the user names (``-o /dev/null``, ``-o /dev/stdout`` in CI, a FIFO) is written to and
never replaced by a regular file; a symbolic link stays a link and its target gets the report; a
path that cannot be written is a usage error (exit 2), not an internal error.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ckptlint.fsutil import write_output

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"


def ckptlint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_output_to_a_fifo_writes_into_it_and_keeps_it(tmp_path):
    fifo = tmp_path / "report.pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15", "-f", "json", "-q", "-o", str(fifo))
    reader.join(30)
    assert r.returncode == 1, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert json.loads(got[0])["findings"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.pipe"]  # no temp file left behind


def test_write_output_to_a_character_device_does_not_replace_it():
    st = os.stat(os.devnull)
    if not stat.S_ISCHR(st.st_mode):
        pytest.skip("no character device at os.devnull")
    write_output(os.devnull, b"{}\n")
    after = os.lstat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == st.st_rdev


def test_output_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "reports" / "latest.json"
    real.parent.mkdir()
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "report.json"
    link.symlink_to(real)
    r = ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15", "-f", "json", "-q", "-o", str(link))
    assert r.returncode == 1, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["findings"]
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640  # the target keeps its permissions


def test_output_to_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "report.json"
    link.symlink_to(tmp_path / "new.json")
    write_output(link, b"{}\n")
    assert link.is_symlink() and (tmp_path / "new.json").read_bytes() == b"{}\n"


@pytest.mark.parametrize("where", ["directory", "missing-parent"])
def test_unwritable_output_is_a_usage_error(tmp_path, where):
    out = tmp_path if where == "directory" else tmp_path / "no" / "such" / "report.json"
    r = ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15", "-f", "json", "-q", "-o", str(out))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"ckptlint: error: cannot write {out}:" in r.stderr and "internal error" not in r.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_baseline_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "baseline.real.json"
    real.write_text("{}")
    link = tmp_path / "ckptlint-baseline.json"
    link.symlink_to(real)
    r = ckptlint("check", str(BUGGY), "-t", "sglang==0.5.15", "-q", "--write-baseline", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink()
    assert json.loads(real.read_text())["findings"]
