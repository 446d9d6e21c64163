"""Issue 18 item 5: text a checkpoint or a server supplies can neither crash a renderer (a lone
surrogate) nor act on the reader (ESC sequences, forged lines, workflow commands), in every format."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ckptlint.render.safe import clean, defuse_commands, dumps

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "upstream" / "ct-fp8-channel-scale-1d"
EVIL = "\x1b[2J\x1b[31mRED\r\n::error file=x,line=1::pwned\n##[warning]legacy"
T = "vllm==0.33.0"


@pytest.fixture(scope="module")
def evil(tmp_path_factory) -> Path:
    """A checkpoint whose config strings and index keys hold a lone surrogate, ESC sequences and
    workflow-command lines (written with JSON escapes, as a hostile exporter can)."""
    ck = tmp_path_factory.mktemp("evil") / "ck"
    shutil.copytree(FIXTURE, ck)
    cfg = json.loads((ck / "config.json").read_text())
    cfg["architectures"] = ["Llama\ud800ForCausalLM"]
    cfg["quantization_config"]["ignore"] = ["lm_head", "lm_\ud800head", EVIL]
    (ck / "config.json").write_text(json.dumps(cfg, indent=2))  # ASCII: \ud800 and \u001b escapes
    idx = json.loads((ck / "model.safetensors.index.json").read_text())
    shard = next(iter(idx["weight_map"].values()))
    idx["weight_map"][f"model.layers.9\ud800.{EVIL}.weight"] = shard
    (ck / "model.safetensors.index.json").write_text(json.dumps(idx, indent=2))
    return ck


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, timeout=180, env=env)


def _strings(doc):
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield k
            yield from _strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _strings(v)


def _no_injection(text: str, own_commands: bool = False) -> None:
    assert "\x1b" not in text and "\r" not in text
    for line in text.split("\n"):
        if own_commands and re.match(r"^::(error|warning|notice) |^::stop-commands::ckptlint-[0-9a-f]{32}$", line):
            continue  # the github format's own annotations (their messages are %-escaped)
        if own_commands and re.match(r"^::ckptlint-[0-9a-f]{32}::$", line):
            continue
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "markdown", "sarif", "github"])
def test_every_check_format(evil, fmt):
    r = run("check", str(evil), "--isolated", "-t", T, "-f", fmt)
    assert r.returncode == 1, r.stderr.decode("utf-8", "replace")  # findings, not an internal error (3)
    out = r.stdout.decode("utf-8")  # valid UTF-8: no raw surrogate
    if fmt in ("json", "jsonl", "sarif"):
        doc = json.loads(out.splitlines()[0] if fmt == "jsonl" else out)
        strings = list(_strings(doc))
        # the exact strings survive a round trip: the index key whole, the architecture's surrogate
        assert any(EVIL in x and "\ud800" in x for x in strings)
        assert any("Llama\ud800ForCausalLM" in x for x in strings)
    elif fmt == "markdown":  # shown as escapes, whose backslashes are themselves escaped in Markdown
        assert "\\\\ud800" in out and "\\\\x1b\\[31mRED\\\\r\\\\n" in out
        _no_injection(out)
    else:
        assert "\\ud800" in out and "\\x1b[31mRED\\r\\n" in out  # shown as escapes
        _no_injection(out, own_commands=fmt == "github")


def test_plan_inspect_and_fix_outputs(evil):
    for args in (["plan", str(evil), "-t", T], ["plan", str(evil), "-t", T, "-f", "json"], ["inspect", str(evil)],
                 ["inspect", str(evil), "-f", "json"], ["fix", str(evil), "-t", T]):
        r = run(*args)
        assert r.returncode in (0, 1), (args, r.stderr)
        out = r.stdout.decode("utf-8")
        if "json" not in args:
            _no_injection(out)
    plan = run("plan", str(evil), "-t", T).stdout.decode()
    assert "architecture: Llama\\ud800ForCausalLM" in plan


def test_baseline_round_trip(evil, tmp_path):
    base = tmp_path / "b.json"
    r = run("check", str(evil), "--isolated", "-t", T, "--write-baseline", str(base))
    assert r.returncode == 0 and base.read_bytes().decode("utf-8")
    r = run("check", str(evil), "--isolated", "-t", T, "--baseline", str(base), "-f", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["findings"] == []


def test_usage_error_messages_are_printable(tmp_path):
    name = tmp_path / "no\x1b[31mpe\n::error::x"
    r = run("check", str(name))
    assert r.returncode == 2
    err = r.stderr.decode()
    assert "\x1b" not in err and "\\x1b[31mpe\\n::error::x" in err


def test_server_supplied_text_is_defused():
    """A server's reason phrase (ESC sequence, workflow command) ends up in messages: escaped."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 500 \x1b[2J::error::pwned ##[warning]x\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")
                except OSError:
                    pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        env = {**os.environ, "HF_HUB_DOWNLOAD_TIMEOUT": "5"}
        r = subprocess.run([sys.executable, "-m", "ckptlint", "check", "hf://org/repo", "--endpoint",
                            f"http://127.0.0.1:{port}", "-q"], capture_output=True, timeout=180, env=env)
    finally:
        stop.set()
        t.join(5)
        srv.close()
    assert r.returncode in (1, 2), r.stderr
    for stream in (r.stdout.decode("utf-8"), r.stderr.decode("utf-8")):
        _no_injection(stream)


def test_helpers():
    assert clean("a\x1bb\u0085c\u2028\ud800\n\t") == "a\\x1bb\\x85c\\u2028\\ud800\\n\\t"
    assert clean("plain ascii and ünïcödé") == "plain ascii and ünïcödé"
    assert defuse_commands("ok\n  ::error::x\nmid ::error:: stays\n##[group]y") == \
        "ok\n  \\::error::x\nmid ::error:: stays\n#\\#[group]y"
    assert json.loads(dumps({"k\ud800": "v\udfff"})) == {"k\ud800": "v\udfff"}
    assert dumps({"k": "é"}) == '{"k": "é"}'
