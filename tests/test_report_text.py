"""The text report read as a user reads it: one entry per finding with release ranges, names said once,
no placeholder labels, wrapped to the terminal, colour only on a terminal, honest verdicts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlint.findings import Consequence, Finding
from ckptlint.render.grouping import release_ranges
from ckptlint.targets import known_versions, resolve
from helpers import cli_run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "COLUMNS": "100", **(env or {})}
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True, timeout=180,
                          env=full)


def entries(text: str) -> list[list[str]]:
    """The finding entries of a text report: a head line ("error QD401 …") and its indented lines."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"^(error|warning|info) [A-Z]{2}\d{3} ", line):
            out.append([line])
        elif out and line.startswith("  ") and out[-1] is not None:
            out[-1].append(line)
        elif out and not line.startswith("  "):
            out.append(None)  # type: ignore[arg-type]
    return [e for e in out if e]


@pytest.fixture(scope="module")
def every_release():
    return run_cli("check", str(BUGGY), "--isolated", "-t", "sglang", "-t", "vllm")


def test_release_ranges_follow_the_checked_order():
    ts = [t for spec in ("sglang", "vllm") for t in resolve(spec)]
    ids = [t.id for t in ts]
    sg, vl = known_versions("sglang"), known_versions("vllm")  # (derived: releases get added)
    assert len(sg) >= 4 and vl
    assert release_ranges(ids[1:4], ts) == f"sglang {sg[1]}\u2013{sg[3]}"
    assert release_ranges([ids[0], ids[2], ids[3], ids[len(sg)]], ts) == f"sglang {sg[0]}, {sg[2]}\u2013{sg[3]}, vllm {vl[0]}"
    assert release_ranges(ids, ts) == f"sglang {sg[0]}\u2013{sg[-1]}, vllm {vl[0]}\u2013{vl[-1]}"
    # a range means every verified release in it: two releases far apart are not a range
    two = [ts[0], ts[len(sg) - 1]]
    assert release_ranges([t.id for t in two], two) == f"sglang {sg[0]}, {sg[-1]}"
    # nor is a requested release that resolves to another one
    odd = resolve("sglang==0.5.19") + resolve("sglang==0.5.20")
    assert release_ranges([t.id for t in odd], odd) == "sglang 0.5.19, 0.5.20"


def test_one_entry_per_finding_with_its_releases(every_release):
    r = every_release
    assert r.returncode == 1, r.stderr
    heads = [e[0] for e in entries(r.stdout)]
    # model.eh_proj fails on 0.5.12 and 0.5.15 with the same text: one entry, not two
    lines = r.stdout.splitlines()
    eh = [i for i, ln in enumerate(lines) if "`model.eh_proj` (draft ReplicatedLinear)" in ln]
    assert len(eh) == 1 and re.fullmatch(r"  sglang 0\.5\.12\u20130\.5\.15 \[\d\]:", lines[eh[0] - 1])
    # the rule's findings that share their explanation are one entry whose head names every release
    (qd,) = [e for e in entries(r.stdout) if e[0].startswith("error QD401")]
    assert qd[0] == "error QD401 quantization-mismatch [load-error] sglang 0.5.9\u20130.5.15, vllm 0.24.0 \u2014 13 findings"
    # the same JSON has one finding per release: the text groups them, the JSON does not
    doc = json.loads(run_cli("check", str(BUGGY), "--isolated", "-t", "sglang", "-t", "vllm", "-f", "json").stdout)
    assert len([f for f in doc["findings"] if f["module"] == "model.eh_proj"]) == 2
    assert len(heads) < len(doc["findings"])
    # every entry says where it applies, once; no line repeats a release list
    assert all(re.search(r"\] (sglang|vllm|checkpoint)", h) for h in heads)


def test_a_release_without_the_architecture_is_one_entry_quoting_each_refusal(every_release):
    # one entry for the refusal, then what each framework prints (read from the release's wheel)
    out = every_release.stdout
    (tg,) = [e for e in entries(out) if e[0].startswith("error TG601")]
    assert tg[0] == "error TG601 target-unsupported [load-error] sglang 0.5.5, vllm 0.11.0 \u2014 2 findings"
    assert tg[1] == "  config.json: this release has no model class for architecture GlmMoeDsaForCausalLM"
    assert tg[2] == "  fix: pick a target that supports it (`ckptlint targets`)"
    sg, vl = tg.index("  sglang 0.5.5:"), tg.index("  vllm 0.11.0:")
    assert tg[sg + 1].startswith("  \u2192 ValueError: Cannot find model module.")
    assert tg[vl + 1].startswith("  \u2192 ValueError: Model architectures ['GlmMoeDsaForCausalLM'] are not")
    assert "\n\u2192 what the framework prints\n" in out
    rows = [ln for ln in out.splitlines() if ln.startswith(("sglang==0.5.5 ", "vllm==0.11.0 "))]
    assert len(rows) == 2 and all(ln.endswith("not supported by this release") for ln in rows)


def test_names_once_and_no_placeholder_labels(every_release):
    out = every_release.stdout
    assert not re.search(r"(\S+): `\1`", out)  # "model.eh_proj: `model.eh_proj`"
    assert " : " not in out and "[hygiene] :" not in out


def test_lfs_finding_is_about_its_file_not_a_tensor(tmp_path):
    ck = tmp_path / "ck"
    shutil.copytree(BUGGY, ck)
    for shard in ck.glob("*.safetensors"):
        shard.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 123\n")
    r = run_cli("check", str(ck), "--isolated", "-t", "sglang==0.5.23")
    (lfs,) = [e for e in entries(r.stdout) if " SF116 " in e[0]]
    assert lfs[0] == "error SF116 git-lfs-pointer [load-error] checkpoint"
    assert lfs[1].startswith("  model-0000") and "lm_head" not in lfs[1]


def test_unverified_release_note_has_no_empty_subject():
    r = run_cli("check", str(BUGGY), "--isolated", "-t", "sglang==9.9")
    (note,) = [e for e in entries(r.stdout) if " TG602 " in e[0]]
    assert note[0] == "warning TG602 target-not-verified [hygiene] sglang 9.9"
    assert note[1].startswith("  sglang==9.9 is newer than the newest verified sglang release")


@pytest.mark.parametrize("columns", ["60", "100", "160"])
def test_wrapped_to_the_width(columns):
    r = run_cli("check", str(BUGGY), "--isolated", "-t", "sglang==0.5.15", env={"COLUMNS": columns})
    lines = r.stdout.splitlines()
    table = lines.index(next(ln for ln in lines if ln.startswith("release ")))
    # words are not broken: a line is longer only when one word (a module name) is (the matrix is a table)
    too_long = [ln for ln in lines[:table] if len(ln) > int(columns)]
    assert all(len(ln.split()) <= 2 for ln in too_long), too_long
    assert max(len(ln) for ln in lines) > int(columns) * 0.8
    # wrapping changes lines, not text
    joined = " ".join(" ".join(lines).split())
    assert "no `exclude` entry matches the runtime name under exact_or_regex matching" in joined
    assert "`model.eh_proj` (draft ReplicatedLinear): BF16 [64, 128] stored, U8 [64, 64] allocated" in joined


def _pty_run(args: list[str], env: dict) -> str:
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    full = {**os.environ, "COLUMNS": "100", **env}
    p = subprocess.Popen([sys.executable, "-m", "ckptlint", *args], stdout=slave, stderr=subprocess.DEVNULL,
                         env=full)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=180)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_on_a_terminal_unless_no_color():
    args = ["check", str(BUGGY), "--isolated", "-t", "sglang==0.5.15", "-t", "sglang==0.5.23"]
    tty = _pty_run(args, {"TERM": "xterm"})
    assert "\x1b[1;31merror\x1b[0m \x1b[1mQD401\x1b[0m" in tty  # severity in colour, the code in bold
    assert "\x1b[31mwill not load\x1b[0m" in tty and "\x1b[32mloads\x1b[0m" in tty
    plain = _pty_run(args, {"TERM": "xterm", "NO_COLOR": "1"})
    assert "\x1b[" not in plain and "error QD401" in plain
    assert ANSI.sub("", tty).replace("\r\n", "\n") == plain.replace("\r\n", "\n")
    piped = run_cli(*args)
    assert "\x1b[" not in piped.stdout
    forced = run_cli(*args, "--color", "always")
    assert "\x1b[1;31merror" in forced.stdout


def test_baselined_load_error_keeps_the_verdict(tmp_path, capsys, monkeypatch):
    ck = tmp_path / "ck"
    shutil.copytree(BUGGY, ck)
    monkeypatch.chdir(tmp_path)
    base = tmp_path / "b.json"
    cli_run(capsys, "check", str(ck), "--isolated", "-t", "sglang==0.5.15", "--write-baseline", str(base))
    code, out, err = cli_run(capsys, "check", str(ck), "--isolated", "-t", "sglang==0.5.15", "-t", "sglang==0.5.23",
                             "--baseline", str(base))
    assert code == 0, err  # accepted findings do not fail the run
    row = [ln for ln in out.splitlines() if ln.startswith("sglang==0.5.15 ")][0]
    assert row.endswith("will not load (accepted in baseline)")
    assert [ln for ln in out.splitlines() if ln.startswith("sglang==0.5.23 ")][0].endswith("  loads")
    assert "Left out of the findings above (0 by configuration, 2 by baseline" in out
    assert out.count(": accepted in the baseline\n") == 2
    code, out, _ = cli_run(capsys, "check", str(ck), "--isolated", "-t", "sglang==0.5.15", "--baseline", str(base),
                           "-f", "json")
    v = json.loads(out)["verdicts"]["sglang==0.5.15"]
    assert v["verdict"] == "will-not-load" and v["accepted_by"] == ["baseline"]
    assert v["label"] == "will not load (accepted in baseline)" and v["counts"]["load-error"] == 0


def test_ignored_rule_keeps_the_verdict_and_is_summarised(capsys):
    code, out, _ = cli_run(capsys, "check", str(BUGGY), "--isolated", "-t", "sglang==0.5.15", "--ignore", "QD401")
    assert code == 0
    row = [ln for ln in out.splitlines() if ln.startswith("sglang==0.5.15 ")][0]
    assert row.endswith("will not load (ignored by configuration)")
    assert "rules not selected: QD401 (2)" in out


def test_grouping_keeps_distinct_texts_apart():
    """Findings group only when everything but the release's own name is the same."""
    from ckptlint.findings import mention
    from ckptlint.render.grouping import group_findings

    def f(target: str, msg: str) -> Finding:
        return Finding(code="TG601", consequence=Consequence.LOAD_ERROR, target=target, message=msg)

    gs = group_findings([f("sglang==0.5.5", mention("sglang==0.5.5") + " has no model class for X"),
                         f("vllm==0.11.0", mention("vllm==0.11.0") + " has no model class for X"),
                         f("vllm==0.24.0", mention("vllm==0.24.0") + " has no model class for Y")])
    assert [g.targets for g in gs] == [["sglang==0.5.5", "vllm==0.11.0"], ["vllm==0.24.0"]]
    assert gs[0].text(gs[0].message) == "this release has no model class for X"
    assert gs[1].text(gs[1].message) == "vllm==0.24.0 has no model class for Y"
    # a release name inside a longer one is not taken for it
    (g,) = group_findings([f("sglang==0.5.1", mention("sglang==0.5.15") + " and " + mention("sglang==0.5.1"))])
    assert g.text(g.message) == "sglang==0.5.15 and sglang==0.5.1"


def test_sarif_keeps_accepted_findings_as_suppressed(tmp_path, capsys, monkeypatch):
    """Code scanning must not call a baselined defect fixed: it stays a result, suppressed, with the reason."""
    ck = tmp_path / "ck"
    shutil.copytree(BUGGY, ck)
    monkeypatch.chdir(tmp_path)
    base = tmp_path / "b.json"
    cli_run(capsys, "check", str(ck), "--isolated", "-t", "sglang==0.5.15", "--write-baseline", str(base))
    code, out, _ = cli_run(capsys, "check", str(ck), "--isolated", "-t", "sglang==0.5.15", "--baseline", str(base),
                           "-f", "sarif")
    assert code == 0
    doc = json.loads(out)
    pytest.importorskip("jsonschema").validate(
        doc, json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text()))
    results = doc["runs"][0]["results"]
    assert len(results) == 2 and all(r["suppressions"] == [{"kind": "external", "status": "accepted",
                                                            "justification": "accepted in the baseline"}]
                                     for r in results)
    # rules that were not selected are not results at all
    code, out, _ = cli_run(capsys, "check", str(ck), "--isolated", "-t", "sglang==0.5.15", "--ignore", "QD401",
                           "-f", "sarif")
    assert json.loads(out)["runs"][0]["results"] == []


def test_markdown_matrix_then_findings_then_left_out(tmp_path, capsys):
    cfg = tmp_path / "ckptlint.toml"
    cfg.write_text('per-module-ignores = [{ pattern = "model.eh_proj", codes = ["QD401"], reason = "draft | not <served>" }]\n')
    code, out, _ = cli_run(capsys, "check", str(BUGGY), "--config", str(cfg), "-t", "sglang==0.5.12",
                           "-t", "sglang==0.5.15", "-t", "sglang==0.5.16", "-f", "markdown")
    assert code == 1
    assert out.startswith(f"## ckptlint: `{BUGGY}`\n")
    matrix, findings, left = out.index("| release |"), out.index("### Findings"), out.index("### Left out")
    assert matrix < findings < left
    assert "| `sglang==0.5.12` | 1 | 0 | 0 | 0 | ❌ will not load |" in out
    assert "| `sglang==0.5.16` | 0 | 0 | 0 | 0 | ✅ loads |" in out
    assert "- **error `QD401` quantization-mismatch** · load-error · sglang 0.5.12–0.5.15  \n" in out
    # the ignore's reason, escaped: no table cell break, no HTML
    assert "Left out: per-module-ignores `model.eh_proj`: draft \\| not \\<served\\>" in out


def test_short_and_nothing_lost(every_release):
    """The report of the GLM-5 fixture on every release is short (its shared sentences once, one
    bullet per module), and it still says everything the JSON says of each finding: the module and
    what it holds, the checkpoint entries that failed, the names to add, what the framework prints."""
    out = every_release.stdout
    assert len(out.splitlines()) <= 110
    doc = json.loads(run_cli("check", str(BUGGY), "--isolated", "-t", "sglang", "-t", "vllm", "-f", "json").stdout)
    joined = " ".join(out.split())
    for f in doc["findings"]:
        assert f["module"] is None or f"`{f['module']}`" in joined, f["module"]
        msg = " ".join(f["message"].split())
        assert f["code"] == "QD401" or msg in joined or msg.replace(f["target"], "this release") in joined, msg
        if f.get("error_text"):
            assert " ".join(f["error_text"].split()) in joined, f["error_text"]
        for name in f.get("data", {}).get("suggested_entries", [])[:1]:
            assert f"`{name}`" in joined, name
        if f.get("data", {}).get("failed_entries"):
            assert f"`{f['data']['failed_entries'][0]}`" in joined
        if f.get("data", {}).get("module_count"):
            assert f"and {f['data']['module_count'] - 1} more module(s)" in joined
    assert out.count("assumes speculative decoding") == 1
    assert out.count("Keep the checkpoint-named entries") == 1
