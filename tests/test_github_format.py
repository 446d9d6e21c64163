"""``check --format github``: workflow-command annotations (escaping, limits), then the plain report."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ckptlint.checkpoint import Checkpoint
from ckptlint.engine import Report
from ckptlint.findings import Consequence, Finding, Severity
from ckptlint.render import github
from ckptlint.render import text as text_render
from ckptlint.testing.models import MoeDims, glm5_quark_mxfp4

from helpers import build, run

ROOT = Path(__file__).resolve().parents[1]
BUGGY = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix"
ANNOTATION = re.compile(r"^::(error|warning|notice) ([^:]*)::(.*)$")


def ckptlint(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def parse(line: str) -> tuple[str, dict[str, str], str]:
    m = ANNOTATION.match(line)
    assert m, line
    props = dict(p.split("=", 1) for p in m.group(2).split(","))
    return m.group(1), props, m.group(3)


def unescape(s: str) -> str:
    return s.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def split_output(out: str) -> tuple[list[str], str, str]:
    """Annotations (and the summary line), the token, and the plain report between the stop-commands markers."""
    lines = out.split("\n")
    i = next(i for i, ln in enumerate(lines) if ln.startswith("::stop-commands::"))
    token = lines[i][len("::stop-commands::"):]
    rest = "\n".join(lines[i + 1:])
    assert rest.endswith(f"::{token}::\n")
    return lines[:i], token, rest[: -len(f"::{token}::\n")]


def test_escaping():
    assert github.escape_data("100%\r\nnext: a, b") == "100%25%0D%0Anext: a, b"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert github.escape_data("%0A") == "%250A"  # % first, so an escape in the data stays literal


def test_fixture_annotations_then_full_text_report():
    rel = os.path.relpath(BUGGY, ROOT)
    r = ckptlint("check", rel, "--target", "sglang==0.5.15", "--format", "github")
    assert r.returncode == 1, r.stderr
    head, token, body = split_output(r.stdout)
    assert re.fullmatch(r"ckptlint-[0-9a-f]{32}", token)
    annotations = [ln for ln in head if ln.startswith("::")]
    assert len(annotations) == 2
    assert head[-1].startswith("ckptlint: 2 finding(s); annotated 2 error(s), 0 warning(s), 0 notice(s)")
    config_lines = (BUGGY / "config.json").read_text().split("\n")
    for ln in annotations:
        kind, props, msg = parse(ln)
        assert kind == "error"
        assert props["file"] == rel.replace(os.sep, "/") + "/config.json"
        line = config_lines[int(props["line"]) - 1]
        tok = line[int(props["col"]) - 1:int(props["endColumn"]) - 1]
        assert json.loads(tok).startswith("model.layers.78.")
        assert unescape(props["title"]) == "ckptlint QD401 quantization-mismatch (sglang==0.5.15)"
        assert "\n" not in msg and "%0A" in msg
        text = unescape(msg)
        assert text.startswith("[load-error] `model.") and "\nThe framework prints: " in text and "\nFix: " in text
    plain = ckptlint("check", rel, "--target", "sglang==0.5.15")
    assert body == plain.stdout


def test_clean_checkpoint_prints_only_the_report(tmp_path):
    fixed = ROOT / "fixtures" / "glm5-quark-mxfp4-mtp-exclude-prefix-fixed"
    out = github.render(run(fixed, "sglang==0.5.15"))
    head, _, body = split_output(out)
    assert head == []
    assert "Found 0 finding(s)" in body and "sglang==0.5.15" in body


def _report(root: Path, findings: list[Finding]) -> Report:
    return Report(checkpoint=Checkpoint(root=str(root)), targets=[], findings=findings)


def test_limits_per_type_and_plain_report_lists_everything(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ck").mkdir()
    findings = []
    for sev, cons, n in ((Severity.ERROR, Consequence.LOAD_ERROR, 14), (Severity.WARNING, Consequence.DEGRADED, 12),
                         (Severity.INFO, Consequence.HYGIENE, 40)):
        findings += [Finding(code="SF113", name="shard-truncated", consequence=cons, severity=sev,
                             message=f"{sev.value} number {i}", file=f"model-{i:05d}.safetensors") for i in range(n)]
    out = github.render(_report(tmp_path / "ck", findings))
    head, _, body = split_output(out)
    kinds = [parse(ln)[0] for ln in head if ln.startswith("::")]
    assert kinds == ["error"] * 10 + ["warning"] * 10 + ["notice"] * 10
    assert len(kinds) <= github.PER_JOB
    assert head[-1].startswith("ckptlint: 66 finding(s); annotated 10 error(s), 10 warning(s), 10 notice(s) "
                               "(GitHub shows at most 10 per type and step)")
    for i in range(40):
        assert f"info number {i}" in body
    # A binary shard gets the file but no line.
    _, props, _ = parse(head[0])
    assert props["file"] == "ck/model-00000.safetensors" and "line" not in props


def test_untrusted_text_cannot_inject_commands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ck").mkdir()
    evil = "x\n::warning file=a,line=1::injected\r\n::add-mask::secret, 50% done: ok"
    f = Finding(code="IX207", name="tensor-not-in-index", consequence=Consequence.HYGIENE, message=evil,
                tensors=[evil], file="config.json", hint=evil)
    out = github.render(_report(tmp_path / "ck", [f]))
    head, token, body = split_output(out)
    annotations = [ln for ln in head if ln.startswith("::")]
    assert len(annotations) == 1
    kind, props, msg = parse(annotations[0])
    assert kind == "notice" and props["file"] == "ck/config.json"
    assert "\n" not in msg and "\r" not in msg
    # Control characters are written as escapes: the text is there, but cannot start a line.
    shown = evil.replace("\n", "\\n").replace("\r", "\\r")
    assert unescape(msg).count(shown) == 2
    assert shown in body and token not in body
    assert not any(line.lstrip().startswith("::") for line in body.splitlines())


def test_checkpoint_outside_working_directory_has_no_file(tmp_path, monkeypatch):
    ck = build(tmp_path, glm5_quark_mxfp4(MoeDims(num_hidden_layers=4, first_k_dense_replace=1), with_mtp=False))
    report = run(ck)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    head, _, body = split_output(github.render(report))
    annotations = [ln for ln in head if ln.startswith("::")]
    assert annotations and all("file" not in parse(ln)[1] for ln in annotations)
    assert body == text_render.render(report)
    monkeypatch.chdir(tmp_path)
    head, _, _ = split_output(github.render(report))
    mt = [parse(ln) for ln in head if "MT701" in ln]
    assert mt and all(p["file"] == "ckpt/config.json" and "line" in p for _, p, _ in mt)
