"""The pre-commit hook manifest: valid for pre-commit, matching the files ckptlint reads, runnable."""

from __future__ import annotations

import re
import shlex
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"


def _hooks() -> list[dict]:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the test extra)")
    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


def test_manifest_validates_with_pre_commit():
    pytest.importorskip("pre_commit", reason="pre-commit is in the test extra; not installed here")
    r = subprocess.run([sys.executable, "-m", "pre_commit", "validate-manifest", str(MANIFEST)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hook_fields():
    named, changed = _hooks()
    assert (named["id"], changed["id"]) == ("ckptlint", "ckptlint-changed")
    for hook in (named, changed):
        assert hook["language"] == "python"  # `system` is migrated to `unsupported` in pre-commit 4
        assert shlex.split(hook["entry"]) == ["ckptlint", "check"]
        assert hook.get("always_run", False) is False  # only when a file ckptlint reads changes
        assert hook["require_serial"] is True  # one run sees every file: each checkpoint checked once
    assert named["pass_filenames"] is False  # the checkpoints are named in args
    assert changed["pass_filenames"] is True  # the staged files stand for their checkpoints


@pytest.mark.parametrize("path, matches", [
    ("config.json", True),
    ("models/glm5/config.json", True),
    ("models/glm5/hf_quant_config.json", True),
    ("models/glm5/model.safetensors.index.json", True),
    ("models/glm5/model-00001-of-00002.safetensors", True),
    ("model.safetensors", True),
    ("models/glm5/tokenizer_config.json", False),
    ("models/glm5/generation_config.json", False),
    ("models/glm5/README.md", False),
    ("models/glm5/model.safetensors.bak", False),
    ("src/config.json.py", False),
])
def test_files_pattern(path, matches):
    for hook in _hooks():
        assert bool(re.search(hook["files"], path)) is matches  # pre-commit uses re.search


def test_hook_command_runs_ckptlint_check():
    """What pre-commit runs: entry + args (no file names); findings fail the hook (exit 1)."""
    hook = _hooks()[0]
    args = [str(BUGGY), "--target", "sglang==0.5.15"]
    cmd = shlex.split(hook["entry"])
    assert cmd[0] == "ckptlint"
    r = subprocess.run([sys.executable, "-m", "ckptlint", *cmd[1:], *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr
    assert "QD401" in r.stdout


def test_changed_hook_checks_each_checkpoint_with_staged_files_once():
    """What pre-commit runs for ckptlint-changed: entry + args + the staged file names."""
    hook = _hooks()[1]
    staged = [str(p) for p in sorted(BUGGY.iterdir()) if re.search(hook["files"], str(p))]
    assert len(staged) == 4  # config, index, two shards
    cmd = shlex.split(hook["entry"])
    # a wide report, so that a long clone path does not wrap the checkpoint's header line
    r = subprocess.run([sys.executable, "-m", "ckptlint", *cmd[1:], "--target", "sglang==0.5.15", *staged],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "1000"})
    assert r.returncode == 1, r.stderr
    assert r.stdout.count(f"{BUGGY}: 3,237 tensors") == 1  # one check of the checkpoint, not four
