"""The console entry point's early start: ``ckptlint check DIR`` starts reading DIR's shard headers
before the command line is parsed; the guess at DIR must follow the command's real options, and
the result must be the same as without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer

from ckptlint import _entry
from ckptlint.cli import _build_app
from ckptlint import forkread as parallel
from ckptlint.forkread import _EARLY, close_early
from ckptlint.reader import open_path
from ckptlint.testing.builder import write_checkpoint


def test_value_options_follow_the_check_command():
    command = typer.main.get_command(_build_app()).commands["check"]
    taking = set()
    for p in command.params:
        if p.param_type_name == "option" and not p.is_flag and not p.count:
            taking.update(p.opts)
            taking.update(p.secondary_opts)
    assert taking == set(_entry.CHECK_VALUE_OPTIONS)


@pytest.mark.parametrize("args,path", [
    (["ckpt"], "ckpt"),
    (["--target", "sglang", "ckpt"], "ckpt"),
    (["-t", "vllm==0.33.0", "-f", "json", "ckpt", "--tp", "8"], "ckpt"),
    (["--format=json", "--no-speculative", "ckpt"], "ckpt"),
    (["--quiet", "--", "-odd-name"], "-odd-name"),
    (["--select", "QD", "--ignore", "SC5", "--output", "out.json"], None),
    ([], None),
])
def test_check_path(args, path):
    assert _entry.check_path(args) == path


def _big(tmp_path):
    tensors = [(f"model.layers.{i}.mlp.experts.{e}.down_proj.weight", "BF16", (8, 16)) for i in range(4) for e in range(8)]
    out = tmp_path / "ckpt"
    out.mkdir()
    write_checkpoint(out, config={"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 4},
                     tensors=tensors, shards=20)
    return out


@pytest.mark.skipif(not parallel._can_fork(), reason="needs fork on Linux and no other thread")
def test_early_reading_is_taken_by_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPTLINT_JOBS", "2")
    path = str(_big(tmp_path))
    try:
        assert _entry._early_reading(["check", "--format", "json", path])
        src = open_path(path, progress=True)
        assert src is not None and src._prefetch is not None and src.progress is True
        assert path not in _EARLY
    finally:
        src.close()
        close_early()


def test_unclaimed_early_reading_is_released(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPTLINT_JOBS", "2")
    path = str(_big(tmp_path))
    _entry._early_reading(["check", path])
    close_early()
    assert _EARLY == {}


def test_early_reading_imports_no_reader_before_the_fork(tmp_path):
    """The child is forked before the reader (and msgspec) is imported: both processes then
    import it at once. Run in a fresh interpreter, which is what the console script is."""
    path = str(_big(tmp_path))
    code = ("import sys; from ckptlint import _entry, forkread;"
            f"_entry._early_reading(['check', {path!r}]); seen = set(sys.modules);"
            "print(sorted(m for m in seen if m.startswith(('ckptlint.reader', 'msgspec'))));"
            "print(forkread._EARLY[" + repr(path) + "] is not None); forkread.close_early()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "CKPTLINT_JOBS": "2"}).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == ("True" if parallel._can_fork() else "False")


def test_same_report_with_and_without_a_helper(tmp_path):
    path = str(_big(tmp_path))
    outs = []
    for jobs in ("2", "1"):
        env = {**os.environ, "CKPTLINT_JOBS": jobs}
        r = subprocess.run([sys.executable, "-c", "from ckptlint._entry import main; main()", "check", path,
                            "--format", "json"], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode in (0, 1), r.stderr
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1]
    assert outs[0]["checkpoint"] == path
