"""Read-only safety: no command except `fix --write` (and the files the user names: --output,
--write-baseline) writes anything. Every command runs on a read-only copy of a checkpoint, with
the working directory inside it, and the tree must be byte-for-byte unchanged afterwards.

Tests run as root in CI, where permission bits do not stop writes, so the check is a snapshot
(names, sizes, modes, mtimes and bytes of every entry) taken before and compared after.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from ckptlint import cli
from ckptlint.rules import ALL_RULES
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
T = "sglang==0.5.15"


def snapshot(root: Path) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
            key = str(p.relative_to(root))
            # directory sizes vary by filesystem; their mtime changes when an entry is added or removed
            out[key] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                        st.st_size if stat.S_ISREG(st.st_mode) else None, st.st_mtime_ns, digest)
    st = root.stat()
    out["."] = (stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return out


def make_readonly(root: Path) -> None:
    for p in root.rglob("*"):
        p.chmod(0o444 if p.is_file() else 0o555)
    root.chmod(0o555)


def make_writable(root: Path) -> None:
    root.chmod(0o755)
    for p in root.rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)


ckptlint = cli_run  # (exit code, stdout, stderr) of an in-process CLI call


def commands(ck: str) -> list[tuple[str, ...]]:
    cmds: list[tuple[str, ...]] = []
    for fmt in getattr(cli, "CheckFormat", cli.Format):  # every output format of check, however many
        cmds.append(("check", ck, "-t", T, "--format", fmt.value))
    cmds += [
        ("check", ck),  # default targets
        ("check", ck, "-t", "sglang", "-t", "vllm"),
        ("check", ck, "-t", T, "--baseline", str(Path(ck) / "baseline.json")),
        ("check", ck, "-t", T, "--config", str(Path(ck) / "ckptlint.toml"), "-f", "json"),
        ("check", str(Path(ck) / "model-00001-of-00002.safetensors")),
        ("plan", ck, "-t", T),
        ("plan", ck, "-t", T, "--format", "json", "--module", "eh_proj"),
        ("fix", ck, "-t", T),
        ("fix", ck),  # target from ckptlint.toml
    ]
    for fmt in ("text", "json"):
        cmds.append(("targets", "--format", fmt))
    for fmt in cli.RulesFormat:
        cmds.append(("rules", "--format", fmt.value))
    cmds += [("rule", r.code) for r in ALL_RULES[:3]] + [("rule", "quantization-mismatch")]
    return cmds


@pytest.fixture
def ro_ckpt(tmp_path, monkeypatch, capsys):
    """A read-only copy of the GLM-5 fixture with a config file and a baseline inside it."""
    ck = tmp_path / "ckpt"
    shutil.copytree(BUGGY, ck)  # the shipped fixtures are small, not sparse
    (ck / "ckptlint.toml").write_text(f'target = ["{T}"]\n'
                                      'per-module-ignores = [{ pattern = "model.eh_proj", codes = ["QD401"], '
                                      'reason = "tested elsewhere" }]\n')
    code, _, err = ckptlint(capsys, "check", str(ck), "-t", T, "--isolated",
                            "--write-baseline", str(tmp_path / "baseline.json"))
    assert code == 0, err
    shutil.move(str(tmp_path / "baseline.json"), ck / "baseline.json")
    make_readonly(ck)
    monkeypatch.chdir(ck)  # stray writes to the working directory would land in the snapshot too
    yield ck
    make_writable(ck)


def test_every_command_leaves_a_readonly_checkpoint_untouched(ro_ckpt, capsys):
    before = snapshot(ro_ckpt)
    ran = []
    for args in commands(str(ro_ckpt)):
        code, out, err = ckptlint(capsys, *args)
        assert code in (0, 1), (args, err)
        assert "Traceback" not in err and "internal error" not in err, (args, err)
        assert out, args
        ran.append(args[0])
        assert snapshot(ro_ckpt) == before, f"{args} changed the checkpoint directory"
    assert {"check", "plan", "fix", "targets", "rules", "rule"} <= set(ran)
    assert sorted(p.name for p in ro_ckpt.parent.iterdir()) == ["ckpt"]  # nothing written beside it either


def test_relative_path_from_inside(ro_ckpt, capsys):
    before = snapshot(ro_ckpt)
    for args in (("check", ".", "-t", T), ("plan", ".", "-t", T), ("fix", ".", "-t", T)):
        code, _, err = ckptlint(capsys, *args)
        assert code in (0, 1) and "Traceback" not in err
    assert snapshot(ro_ckpt) == before


def test_fix_write_on_readonly_checkpoint_fails_cleanly(ro_ckpt, capsys):
    # ckptlint checks the mode bits itself, so this holds for root too (whom they do not stop).
    before = snapshot(ro_ckpt)
    for extra in ((), ("--no-backup",)):
        code, _, err = ckptlint(capsys, "fix", str(ro_ckpt), "-t", T, "--write", *extra)
        assert code == 2, err
        assert "cannot write config.json" in err and "was not changed" in err
        assert "read-only (mode 0444); pass --force" in err
        assert "Traceback" not in err and "internal error" not in err
        assert snapshot(ro_ckpt) == before


def test_fix_write_permission_error_is_a_clean_usage_error(ro_ckpt, capsys, monkeypatch):
    """Forced past the read-only check, the write fails with EACCES (as it does for a user)."""
    import errno

    import ckptlint.fix as fixmod

    def denied(directory, name, data, st):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(directory / name))

    monkeypatch.setattr(fixmod, "_write_temp", denied)
    before = snapshot(ro_ckpt)
    code, out, err = ckptlint(capsys, "fix", str(ro_ckpt), "-t", T, "--write", "--force")
    assert code == 2, err
    assert "cannot write config.json" in err and "Permission denied" in err and "was not changed" in err
    assert "Traceback" not in err and "internal error" not in err
    assert "+      \"model.eh_proj\"" in out  # the diff it could not apply is still shown
    assert snapshot(ro_ckpt) == before
