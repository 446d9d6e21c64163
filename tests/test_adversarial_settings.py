"""Adversarial settings files and selections (issue 18, items 1 and 7): every case ends within a time
budget with exit 1 or 2, a one-line message and no traceback, in bounded memory; a checkpoint cannot
switch off the check of itself.

The command-line cases run ckptlint in a child process (tests/bounded.py measures time and peak RSS).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptlint.config import (ConfigError, TOML_CAP, UnusableFile, discover, load, load_json, load_toml, parse,
                             read_capped)
from bounded import run_cli
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
T = "sglang==0.5.15"  # the fixture has two QD401 load errors there
IGNORE_ALL = f'target = ["{T}"]\nignore = ["ALL"]\n'


@pytest.fixture
def work(tmp_path) -> Path:
    """A working directory (the user's repository) holding a copy of the buggy fixture."""
    w = tmp_path / "work"
    shutil.copytree(BUGGY, w / "ckpt")
    return w


def one_line_error(err: str, *needles: str) -> None:
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("ckptlint: not using ")]
    assert len(lines) == 1 and lines[0].startswith("ckptlint: error: "), err
    for n in needles:
        assert n in lines[0], err


# --- hostile settings files: exit 2, fast, small ---------------------------------------------------

def _utf16(p: Path) -> None:
    p.write_bytes(f'target = ["{T}"]\n'.encode("utf-16"))


def _utf16_no_bom(p: Path) -> None:
    p.write_bytes(f'target = ["{T}"]\n'.encode("utf-16-le"))


def _latin1(p: Path) -> None:
    p.write_bytes('# réglages\ntp = 1\n'.encode("latin-1"))


def _deep_arrays(p: Path) -> None:
    p.write_text("tp = " + "[" * 100_000 + "]" * 100_000 + "\n")


def _deep_tables(p: Path) -> None:
    p.write_text("tp = " + "{a = " * 50_000 + "1" + "}" * 50_000 + "\n")


def _sparse_3gb(p: Path) -> None:
    with open(p, "wb") as fh:
        fh.write(b'tp = 1\n# ')
        fh.truncate(3 << 30)


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _dev_zero(p: Path) -> None:
    p.symlink_to("/dev/zero")


def _directory(p: Path) -> None:
    p.mkdir()


def _surrogate_escape(p: Path) -> None:
    p.write_text('target = ["\\ud800"]\n')


HOSTILE_TOML = {
    "utf16-bom": (_utf16, "UTF-16 text"),
    "utf16-no-bom": (_utf16_no_bom, "NUL bytes"),
    "latin1": (_latin1, "not UTF-8 text (byte 0xe9"),
    "deep-arrays": (_deep_arrays, "nested too deeply"),
    "deep-tables": (_deep_tables, "nested too deeply"),
    "sparse-3gb": (_sparse_3gb, f"more than the {TOML_CAP:,} that ckptlint reads"),
    "fifo": (_fifo, "a FIFO, not a regular file"),
    "dev-zero": (_dev_zero, "a character device, not a regular file"),
    "directory": (_directory, "a directory, not a regular file"),
    "surrogate-escape": (_surrogate_escape, "not a Unicode scalar value"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_TOML))
def test_hostile_settings_file_named_with_config(work, case):
    make, needle = HOSTILE_TOML[case]
    cfg = work / "team.toml"
    make(cfg)
    r = run_cli(["check", "ckpt", "--config", str(cfg), "-t", T], cwd=work)
    r.assert_clean(codes=(2,), budget_s=15, mem_mib=200)
    one_line_error(r.err, str(cfg), needle)


@pytest.mark.parametrize("case", ["utf16-bom", "latin1", "deep-arrays", "sparse-3gb"])
def test_hostile_settings_file_found_next_to_the_checkpoint(work, case):
    make, needle = HOSTILE_TOML[case]
    make(work / "ckpt" / "ckptlint.toml")
    r = run_cli(["check", "ckpt", "-t", T], cwd=work)
    r.assert_clean(codes=(2,), budget_s=15, mem_mib=200)
    one_line_error(r.err, "ckptlint.toml", needle)


@pytest.mark.parametrize("case", ["fifo", "dev-zero", "directory"])
def test_special_files_are_never_discovered(work, case):
    # Discovery only considers regular files: a FIFO named ckptlint.toml is not opened at all.
    HOSTILE_TOML[case][0](work / "ckpt" / "ckptlint.toml")
    r = run_cli(["check", "ckpt", "-t", T], cwd=work)
    r.assert_clean(codes=(1,), budget_s=15, mem_mib=200)


def test_utf8_byte_order_mark_is_accepted(work):
    (work / "ckpt" / "ckptlint.toml").write_bytes(b"\xef\xbb\xbf" + IGNORE_ALL.encode())
    assert load(work / "ckpt", cwd=work).config.ignore == ["ALL"]


# --- the shared loaders (settings here, baselines in baseline.py) ------------------------------------

def test_read_capped_refuses_special_and_large_files(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnusableFile, match="a FIFO"):
        read_capped(tmp_path / "fifo", 100)
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(UnusableFile, match="101 bytes, more than the 100"):
        read_capped(tmp_path / "big", 100)
    (tmp_path / "ok").write_bytes(b"x" * 100)
    assert read_capped(tmp_path / "ok", 100) == b"x" * 100
    with pytest.raises(UnusableFile, match="not found"):
        read_capped(tmp_path / "missing", 100)


@pytest.mark.parametrize("raw, needle", [
    (b'{"a": "\\ud800"}', "lone surrogate (not text) at a"),
    (b'{"a": [{"\\udfff": 1}]}', "lone surrogate (not text) at a[0] (a key)"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ('{"a": 1}'.encode("utf-16"), "UTF-16 text"),
    ('{"a": 1}'.encode("utf-32"), "UTF-32 text"),
    (b'{"a": 1' + b"9" * 5000 + b"}", "invalid JSON: an integer of 5,001 digits (more than 4,300"),
    (b'{"a": }', "invalid JSON: Expecting value at line 1 column 7"),
])
def test_load_json_turns_every_bad_file_into_one_message(tmp_path, raw, needle):
    p = tmp_path / "baseline.json"
    p.write_bytes(raw)
    with pytest.raises(UnusableFile) as exc:
        load_json(p, 1 << 20, "baseline")
    assert needle in str(exc.value) and str(exc.value).startswith(str(p))


def test_load_json_accepts_text_and_a_utf8_bom(tmp_path):
    p = tmp_path / "b.json"
    p.write_bytes(b'\xef\xbb\xbf{"a": ["\\u00e9", "\\ud83d\\ude00"]}')
    assert load_json(p, 1000) == {"a": ["é", "😀"]}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.text(alphabet='[]{}="\\ \n#.,=abctp0123456789-', max_size=300).map(str.encode))
def test_fuzz_settings_bytes_give_a_config_or_a_config_error(tmp_path, raw):
    p = tmp_path / "ckptlint.toml"
    p.write_bytes(raw)
    try:
        doc = load_toml(p)
    except UnusableFile as exc:
        assert str(exc).startswith(str(p)) and "\n" not in str(exc)
        return
    try:
        parse(doc, str(p))
    except ConfigError:
        pass


# --- selection that would switch every rule off -------------------------------------------------------

def test_empty_select_is_a_usage_error(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    code, out, err = cli_run(capsys, "check", "ckpt", "-t", T, "--select", "")
    assert code == 2 and out == ""
    one_line_error(err, "--select names no rule")
    code, out, err = cli_run(capsys, "check", "ckpt", "-t", T, "--select", " , ")
    assert code == 2
    # An empty --select that extends a rule selects exactly that rule.
    code, out, _ = cli_run(capsys, "check", "ckpt", "-t", T, "--select", "", "--extend-select", "QD401",
                           "-f", "json")
    assert code == 1 and {f["code"] for f in json.loads(out)["findings"]} == {"QD401"}


def test_empty_select_in_settings_is_a_usage_error(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    (work / "ckptlint.toml").write_text("select = []\n")
    code, _, err = cli_run(capsys, "check", "ckpt", "-t", T)
    assert code == 2
    one_line_error(err, "ckptlint.toml: select: an empty list selects no rule")


# --- a checkpoint cannot disarm the gate that checks it ----------------------------------------------

def test_settings_of_a_checkpoint_outside_the_working_directory_are_skipped(tmp_path, capsys, monkeypatch):
    ckpt = tmp_path / "downloads" / "ckpt"
    shutil.copytree(BUGGY, ckpt)
    (ckpt / "ckptlint.toml").write_text(IGNORE_ALL)
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    code, out, err = cli_run(capsys, "check", str(ckpt), "-t", T, "-f", "json")
    doc = json.loads(out)
    assert code == 1 and len(doc["findings"]) == 2 and doc["config_file"] is None
    assert f"ckptlint: not using {ckpt / 'ckptlint.toml'}: settings in a checkpoint's own directory" in err
    assert "--config" in err
    # Named with --config, the same file applies.
    code, out, err = cli_run(capsys, "check", str(ckpt), "--config", str(ckpt / "ckptlint.toml"), "-f", "json")
    assert code == 0 and json.loads(out)["config_file"] == str(ckpt / "ckptlint.toml")
    assert f"ckptlint: settings from {ckpt / 'ckptlint.toml'}" in err and "not using" not in err


def test_pyproject_table_of_an_outside_checkpoint_is_skipped(tmp_path, capsys, monkeypatch):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(BUGGY, ckpt)
    (ckpt / "pyproject.toml").write_text("[tool.ckptlint]\n" + IGNORE_ALL)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    code, _, err = cli_run(capsys, "check", str(ckpt), "-t", T)
    assert code == 1 and f"not using {ckpt / 'pyproject.toml'}" in err
    # A pyproject.toml without the table (or unreadable) is no settings file: nothing to mention.
    (ckpt / "pyproject.toml").write_text("[project\n")
    code, _, err = cli_run(capsys, "check", str(ckpt), "-t", T)
    assert code == 1 and "not using" not in err


def test_symlink_inside_the_repository_to_an_outside_checkpoint_is_outside(tmp_path, capsys, monkeypatch):
    ckpt = tmp_path / "cache" / "ckpt"
    shutil.copytree(BUGGY, ckpt)
    (ckpt / "ckptlint.toml").write_text(IGNORE_ALL)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "model").symlink_to(ckpt)
    monkeypatch.chdir(repo)
    code, _, err = cli_run(capsys, "check", "model", "-t", T)
    assert code == 1 and "not using model/ckptlint.toml" in err


def test_settings_inside_the_working_directory_apply_and_are_named(work, capsys, monkeypatch):
    monkeypatch.chdir(work)
    (work / "ckpt" / "ckptlint.toml").write_text(IGNORE_ALL)
    code, out, err = cli_run(capsys, "check", "ckpt", "-f", "json")
    assert code == 0 and json.loads(out)["config_file"] == "ckpt/ckptlint.toml"
    assert "ckptlint: settings from ckpt/ckptlint.toml" in err
    # The working directory itself is inside itself.
    monkeypatch.chdir(work / "ckpt")
    code, _, err = cli_run(capsys, "check", ".")
    assert code == 0 and "settings from ckptlint.toml" in err


def test_hub_checkpoints_never_bring_settings(tmp_path):
    # Even where a local directory happens to have the Hub path's name.
    odd = tmp_path / "hf:" / "org" / "repo"
    odd.mkdir(parents=True)
    (odd / "ckptlint.toml").write_text(IGNORE_ALL)
    assert discover("hf://org/repo", cwd=tmp_path) == (None, None)
    (tmp_path / "ckptlint.toml").write_text("tp = 2\n")  # the user's own settings still apply
    assert discover("hf://org/repo", cwd=tmp_path) == (tmp_path / "ckptlint.toml", None)


def test_outside_checkpoint_falls_back_to_the_working_directory_settings(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "ckptlint.toml").write_text(IGNORE_ALL)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "ckptlint.toml").write_text("tp = 2\n")
    loaded = load(ckpt, cwd=repo)
    assert loaded.path == repo / "ckptlint.toml" and loaded.config.tp == 2
    assert loaded.skipped == ckpt / "ckptlint.toml"
    assert loaded.notes[0] == f"settings from {repo / 'ckptlint.toml'}"
