"""``hf://ORG/REPO`` checks against a fake Hub on 127.0.0.1: the same findings as on disk, header
bytes only, and one-line findings or usage errors (never tracebacks) for what servers get wrong."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ckptlint import cli
from ckptlint.engine import check
from ckptlint.progress import Progress, progress_for
from ckptlint.reader import NotACheckpoint, load_checkpoint, open_path
from ckptlint.reader import hubhttp, remote
from ckptlint.targets import list_targets, resolve
from ckptlint.testing.builder import shard_name, write_checkpoint
from ckptlint.testing.models import MoeDims, glm5_quark_mxfp4
from fakehub import COMMIT, FakeHub
from helpers import build

URL = "hf://org/repo"
S1, S2 = shard_name(1, 2), shard_name(2, 2)
FEW = ["sglang==0.5.15", "sglang==0.5.17", "vllm==0.33.0"]  # missing shards: silent up to 0.5.16, an error from 0.5.17
# GLM-5.2 dimensions (as in test_scale), fewer layers: shards of several GB as sparse files.
BIG = MoeDims(num_hidden_layers=5, hidden=6144, n_routed_experts=256, moe_intermediate=2048,
              intermediate=12288, first_k_dense_replace=3, q_lora_rank=2048, kv_lora_rank=512, heads=64,
              qk_nope=192, qk_rope=64, v_head=256, vocab=154880, index_heads=32, index_head_dim=128)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    # the Hub variables are removed for every test (conftest.AMBIENT); the fake Hub is reached directly
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(hubhttp, "BACKOFF", 0.001)


@pytest.fixture
def serve():
    hubs: list[FakeHub] = []

    def start(root: Path) -> FakeHub:
        hub = FakeHub(root).start()
        hubs.append(hub)
        return hub

    yield start
    for h in hubs:
        h.stop()


def _check(path, targets=None, **kw):
    ts = [t for s in targets for t in resolve(s)] if targets else list_targets()
    return check(path, ts)


def _remote(hub: FakeHub, url: str = URL, targets=None):
    ts = [t for s in targets for t in resolve(s)] if targets else list_targets()
    return check(open_path(url, endpoint=hub.endpoint), ts)  # type: ignore[arg-type]


def _norm(report, root: str) -> list[dict]:
    return [json.loads(json.dumps(f.to_json()).replace(root, "<ROOT>")) for f in report.findings]


def _same(local, local_root, rem, url=URL) -> None:
    a, b = _norm(local, str(local_root)), _norm(rem, url)
    assert [(f["code"], f["module"], f["consequence"], f["target"], f["file"]) for f in a] == \
           [(f["code"], f["module"], f["consequence"], f["target"], f["file"]) for f in b]
    assert a == b


def _codes(report, file: str | None = None) -> set[str]:
    return {f.code for f in report.checkpoint.issues if file is None or f.file == file}


# ------------------------------------------------------------------ parity


def test_glm5_fixture_same_findings_as_on_disk(tmp_path, serve):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    rem = _remote(hub)
    local = _check(str(path))
    assert rem.checkpoint.root == URL
    assert any(f.code == "QD401" and f.module == "model.eh_proj" for f in rem.findings)
    _same(local, path, rem)
    assert rem.checkpoint.tensors == load_checkpoint(path).tensors
    # shards came through the CDN redirect; nothing was sent twice; the JSON files directly
    cdn = {r["file"] for r in hub.requests(server="cdn")}
    assert cdn == {S1, S2}
    assert all(r["auth"] is None for r in hub.log)
    assert {r["path"].split("/resolve/")[1].split("/")[0] for r in hub.requests(server="hub") if r["file"]} == {COMMIT}
    for s in (S1, S2):
        assert rem.checkpoint.shards[s].bytes_read == hub.served[s]


def test_realistic_size_reads_under_one_percent(tmp_path, serve):
    path = build(tmp_path, glm5_quark_mxfp4(BIG), shards=6)
    hub = serve(path)
    total = hub.shard_bytes()
    assert total > 20 * 10**9
    rem = _remote(hub, targets=["sglang==0.5.15", "vllm==0.33.0"])
    served = sum(v for k, v in hub.served.items() if k.endswith(".safetensors"))
    assert served == rem.checkpoint.bytes_read
    assert served < total / 100, (served, total)
    for s in rem.checkpoint.shards.values():
        assert s.bytes_read <= max(s.header_len + 8, remote.FIRST_RANGE)
    local = _check(str(path), ["sglang==0.5.15", "vllm==0.33.0"])
    _same(local, path, rem)
    assert {f.module for f in rem.findings if f.target == "sglang==0.5.15" and f.severity.value == "error"} >= {
        "model.eh_proj", "model.decoder.mlp.experts"}


# ------------------------------------------------------------------ what servers and repos get wrong


@pytest.mark.parametrize("api", [True, False], ids=["listed", "probed"])
def test_missing_shard_is_ix204_like_on_disk(tmp_path, serve, api):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.api = api
    hub.missing.add(S2)
    rem = _remote(hub, targets=FEW)
    assert "IX204" in _codes(rem)
    (path / S2).unlink()
    _same(_check(str(path), FEW), path, rem)


def test_truncated_shard_is_sf113(tmp_path, serve):
    path = build(tmp_path, glm5_quark_mxfp4(BIG), shards=6)
    name = shard_name(3, 6)
    size = os.path.getsize(path / name)
    hub = serve(path)
    hub.truncate[name] = size - 10**6
    rem = _remote(hub, targets=["sglang==0.5.23"])
    assert _codes(rem, name) == {"SF113"}
    os.truncate(path / name, size - 10**6)
    _same(_check(str(path), ["sglang==0.5.23"]), path, rem)


def test_header_larger_than_first_range(tmp_path, serve):
    # the index says nothing of the 250 kB of metadata: the first range falls short, and the rest
    # of the header (exactly) comes in a second range, asked straight from the CDN
    path = write_checkpoint(tmp_path / "ck", tensors="a BF16 [4096, 4096]\nb F32 [4096]", shards=2,
                            metadata={"format": "pt", "note": "x" * 250_000})
    hub = serve(path)
    rem = _remote(hub, targets=["sglang==0.5.23"])
    assert rem.checkpoint.issues == [] and set(rem.checkpoint.tensors) == {"a", "b"}
    short = 0
    for s in (S1, S2):
        ranges = [r["range"] for r in hub.requests(s, "cdn")]
        n = rem.checkpoint.shards[s].header_len
        first = int(ranges[0].rsplit("-", 1)[1]) + 1
        assert ranges[0] == "bytes=0-" + str(first - 1)
        if first < n + 8:  # sized from the index alone: the rest of the header comes in a second range
            short += 1
            assert ranges == [f"bytes=0-{first - 1}", f"bytes={first}-{n + 7}"]
        else:  # sized from a shard already read (the two are read concurrently, so either can be first)
            assert len(ranges) == 1
        assert len(hub.requests(s, "hub")) == 1  # the second range did not go through the Hub's redirect
        assert rem.checkpoint.shards[s].bytes_read == hub.served[s] >= n + 8
    assert short >= 1  # at least the first shard read knew nothing of the metadata
    _same(_check(str(path), ["sglang==0.5.23"]), path, rem)


@pytest.mark.parametrize("big_header", [False, True])
def test_server_ignoring_range_is_read_only_as_far_as_needed(tmp_path, serve, big_header):
    meta = {"format": "pt", "note": "x" * 250_000} if big_header else {"format": "pt"}
    path = write_checkpoint(tmp_path / "ck", tensors="a BF16 [65536, 32768]\nb F32 [4096]", shards=2, metadata=meta)
    hub = serve(path)
    hub.ignore_range.update({S1, S2})
    rem = _remote(hub, targets=["sglang==0.5.23"])
    assert rem.checkpoint.issues == []
    _same(_check(str(path), ["sglang==0.5.23"]), path, rem)
    size = os.path.getsize(path / S1)
    assert size > 4 * 10**9
    for s in (S1, S2):
        assert rem.checkpoint.shards[s].bytes_read <= 2 * (rem.checkpoint.shards[s].header_len + 8 + remote.FIRST_RANGE)
    # the server could push into socket buffers before the connection was closed, no more
    assert sum(hub.served.values()) < size / 100


@pytest.mark.parametrize("content_range, why", [
    ("bytes 5-99999/123456789", "wrong range"),
    (None, "without a usable Content-Range"),
    ("bytes 0-99999/*", "without a usable Content-Range"),
    ("garbage", "without a usable Content-Range"),
])
def test_wrong_content_range_is_a_finding(tmp_path, serve, content_range, why):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.content_range[S2] = content_range
    rem = _remote(hub, targets=["sglang==0.5.23"])
    [f] = [f for f in rem.checkpoint.issues if f.file == S2]
    assert f.code == "SF117" and why in f.message and "\n" not in f.message


def test_5xx_and_429_are_retried(tmp_path, serve):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.fail = {S1: [500, 503, 429], "config.json": [502]}
    rem = _remote(hub, targets=FEW)
    _same(_check(str(path), FEW), path, rem)
    assert len(hub.requests(S1, "hub")) == 3 + 1  # 3 failures, then the one range (sized from the index)
    assert len(hub.requests(S1, "cdn")) == 1


def test_retries_are_bounded(tmp_path, serve):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.fail = {S1: [500] * 10}
    rem = _remote(hub, targets=["sglang==0.5.23"])
    [f] = [f for f in rem.checkpoint.issues if f.file == S1]
    assert f.code == "SF117" and "HTTP 500" in f.message and f"after {remote.ATTEMPTS} attempts" in f.message
    assert len(hub.requests(S1)) == remote.ATTEMPTS


def test_gated_repo_needs_hf_token(tmp_path, serve, monkeypatch, capsys):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.require_token = "hf_secret"
    with pytest.raises(SystemExit) as e:
        cli.main(["check", URL, "--endpoint", hub.endpoint, "-t", "sglang==0.5.15"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "HF_TOKEN" in err and "401" in err and "gated" in err
    assert "Traceback" not in err and err.count("\n") == 1
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    hub.log.clear()
    rem = _remote(hub, targets=FEW)
    _same(_check(str(path), FEW), path, rem)
    assert all(r["auth"] == "Bearer hf_secret" for r in hub.requests(server="hub"))
    assert hub.requests(server="cdn") and all(r["auth"] is None for r in hub.requests(server="cdn"))


def test_wrong_token_and_forbidden_shard(tmp_path, serve, monkeypatch):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.forbidden.add(S2)
    rem = _remote(hub, targets=["sglang==0.5.23"])
    [f] = [f for f in rem.checkpoint.issues if f.file == S2]
    assert f.code == "SF117" and "403" in f.message and "set HF_TOKEN" in f.message
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    hub.require_token = "hf_right"
    with pytest.raises(NotACheckpoint, match="token in HF_TOKEN does not give access"):
        _remote(hub)


def test_garbage_bodies(tmp_path, serve):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.garbage = {"config.json": b"<html>502 Bad Gateway</html>", S2: b"<html>502 Bad Gateway</html>"}
    rem = _remote(hub, targets=["sglang==0.5.23"])
    (path / "config.json").write_bytes(hub.garbage["config.json"])
    (path / S2).write_bytes(hub.garbage[S2])
    local = _check(str(path), ["sglang==0.5.23"])
    assert _codes(rem) == _codes(local) and "CF302" in _codes(rem) and _codes(rem, S2) <= {"SF102", "SF103"}
    _same(local, path, rem)


def test_empty_shard_416(tmp_path, serve):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    (path / S2).write_bytes(b"")
    hub = serve(path)
    rem = _remote(hub, targets=["sglang==0.5.23"])
    assert _codes(rem, S2) == {"SF101"}
    _same(_check(str(path), ["sglang==0.5.23"]), path, rem)


def test_single_file_repo_without_listing_api(tmp_path, serve):
    path = write_checkpoint(tmp_path / "ck", tensors="a BF16 [64, 64]\nb F32 [64]")
    hub = serve(path)
    hub.api = False
    rem = _remote(hub, targets=["sglang==0.5.23"])
    assert set(rem.checkpoint.shards) == {"model.safetensors"} and set(rem.checkpoint.tensors) == {"a", "b"}
    assert len(hub.requests("model.safetensors", "cdn")) == 1  # the probe's read is reused
    _same(_check(str(path), ["sglang==0.5.23"]), path, rem)


# ------------------------------------------------------------------ command line


def test_cli_check_and_plan(tmp_path, serve, capsys):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    with pytest.raises(SystemExit) as e:
        cli.main(["check", f"{URL}@{COMMIT}", "--endpoint", hub.endpoint, "-t", "sglang==0.5.15", "-f", "json", "-q"])
    out, err = capsys.readouterr()
    assert e.value.code == 1, err
    doc = json.loads(out)
    assert doc["checkpoint"] == f"{URL}@{COMMIT}"
    assert ("QD401", "model.eh_proj") in {(f["code"], f["module"]) for f in doc["findings"]}
    assert err == ""  # stderr is not a terminal: no progress line
    with pytest.raises(SystemExit) as e:
        cli.main(["plan", URL, "--endpoint", hub.endpoint, "-t", "sglang==0.5.15", "-m", "eh_proj"])
    out, err = capsys.readouterr()
    assert e.value.code in (0, None) and "model.eh_proj" in out and "quantized mxfp4" in out


@pytest.mark.parametrize("arg, needle", [
    ("hf://org/nope", "repository 'org/nope' not found"),
    ("hf://org/repo@v9", "revision 'v9' not found"),
    ("hf://org/../x", "not a Hugging Face model repository"),
    ("hf://", "not a Hugging Face model repository"),
])
def test_cli_unusable_remote_is_exit_2(tmp_path, serve, capsys, arg, needle):
    hub = serve(build(tmp_path, glm5_quark_mxfp4(), shards=2))
    with pytest.raises(SystemExit) as e:
        cli.main(["check", arg, "--endpoint", hub.endpoint])
    err = capsys.readouterr().err
    assert e.value.code == 2 and needle in err and "Traceback" not in err


def test_cli_unreachable_endpoint_is_exit_2(capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SystemExit) as e:
        cli.main(["check", URL, "--endpoint", f"http://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "cannot connect" in err and "Traceback" not in err


def test_offline_mode_is_a_usage_error(tmp_path, serve):
    hub = serve(build(tmp_path, glm5_quark_mxfp4(), shards=2))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": hub.endpoint}
    r = subprocess.run([sys.executable, "-m", "ckptlint", "check", URL], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "need the network" in r.stderr and "HF_HUB_OFFLINE" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout and r.stdout == ""
    assert hub.log == []


def test_hf_endpoint_env_is_used(tmp_path, serve, monkeypatch):
    hub = serve(build(tmp_path, glm5_quark_mxfp4(), shards=2))
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint + "/")
    ck = load_checkpoint(URL)
    assert ck.config is not None and len(hub.log) > 0


# ------------------------------------------------------------------ progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal():
    assert progress_for(True, 5, "x", io.StringIO()) is None
    assert progress_for(False, 5, "x", _Tty()) is None
    s = _Tty()
    p = progress_for(True, 3, "reading", s)
    assert isinstance(p, Progress)
    for _ in range(3):
        p.advance()
    p.close()
    text = s.getvalue()
    assert text.startswith("\rreading: ") and "3/3" in text and "\n" not in text and text.endswith("\r")


def test_progress_for_remote_and_many_local_shards(tmp_path, serve, monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    few = write_checkpoint(tmp_path / "few", tensors="\n".join(f"t{i} F32 [4]" for i in range(4)), shards=4)
    many = write_checkpoint(tmp_path / "many", tensors="\n".join(f"t{i} F32 [4]" for i in range(20)), shards=20)
    load_checkpoint(few, progress=True)
    assert tty.getvalue() == ""
    load_checkpoint(many, progress=True)
    assert "20/20" in tty.getvalue()
    tty.truncate(0)
    tty.seek(0)
    hub = serve(few)
    load_checkpoint(URL, endpoint=hub.endpoint, progress=True)
    assert "4/4" in tty.getvalue()
    tty.truncate(0)
    tty.seek(0)
    load_checkpoint(URL, endpoint=hub.endpoint, progress=False)
    assert tty.getvalue() == ""


# ------------------------------------------------------------------ concurrency, sizing, keep-alive


def _many(tmp_path, n: int) -> Path:
    return write_checkpoint(tmp_path / "many", tensors="\n".join(f"layer.{i}.weight BF16 [64, 64]" for i in range(n)),
                            shards=n)


def test_shards_are_read_concurrently_over_few_connections(tmp_path, serve):
    n = 32
    hub = serve(_many(tmp_path, n))
    hub.latency = 0.1  # per request: one shard costs 0.2 s (the Hub's redirect, then the CDN)
    t0 = time.monotonic()
    rem = _remote(hub, targets=["sglang==0.5.23"])
    took = time.monotonic() - t0
    assert rem.checkpoint.issues == [] and len(rem.checkpoint.shards) == n
    assert took < n * 0.2 / 2, took  # one after the other would take 6.4 s; 16 at a time, 2 rounds
    # one range per shard, sized from the index; kept-alive connections (at most one per worker and server)
    assert all(len(hub.requests(shard_name(i, n), "cdn")) == 1 for i in range(1, n + 1))
    assert hub.connections() <= 2 * remote.WORKERS + 2 < len(hub.log)


@pytest.mark.parametrize("workers", [1, 16], ids=["learned", "guessed"])  # one at a time: sizes learned from the first
def test_first_range_is_sized_from_the_index(tmp_path, serve, monkeypatch, workers):
    monkeypatch.setattr(remote, "WORKERS", workers)
    path = build(tmp_path, glm5_quark_mxfp4(BIG), shards=6)
    hub = serve(path)
    rem = _remote(hub, targets=["sglang==0.5.23"])
    header = sum(s.header_len + 8 for s in rem.checkpoint.shards.values())
    fetched = sum(v for k, v in hub.served.items() if k.endswith(".safetensors"))
    for name in rem.checkpoint.shards:
        assert len(hub.requests(name, "cdn")) == 1, name
    assert header <= fetched <= 1.1 * header


# ------------------------------------------------------------------ hardening: time, secrets, settings


def _run_cli(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    full = {**os.environ, "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost", **env}
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if k not in env:
            full.pop(k, None)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ckptlint", *args], capture_output=True, text=True, timeout=timeout,
                       env=full)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("what, phase", [(S2, "headers"), (S2, "body"), ("config.json", "headers")])
def test_slow_loris_cannot_hold_the_check(tmp_path, serve, what, phase):
    # one byte every 0.2 s: never idle as long as the 0.5 s timeout, and a 1 MB answer would take days
    hub = serve(build(tmp_path, glm5_quark_mxfp4(), shards=2))
    hub.slow[what] = (phase, 0.2)
    r, took = _run_cli(["check", URL, "--endpoint", hub.endpoint, "-t", "sglang==0.5.23", "-f", "json", "-q"],
                       {"HF_HUB_DOWNLOAD_TIMEOUT": "0.5"}, timeout=40)
    # each request ends within 6 x 0.5 s, retries included; the process starts in ~1 s
    assert took < 12, took
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    [f] = [f for f in json.loads(r.stdout)["findings"] if f["file"] == what]
    assert f["code"] in ("SF117", "CF302") and "no complete answer" in f["message"], f


def test_overall_time_limit(tmp_path, serve, monkeypatch):
    n = 4
    hub = serve(_many(tmp_path, n))
    for i in range(1, n + 1):
        hub.slow[shard_name(i, n)] = ("body", 0.1)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0.5")
    monkeypatch.setattr(hubhttp, "TOTAL_TIMEOUTS", 4)  # 2 s for everything
    monkeypatch.setattr(remote, "WORKERS", 1)
    t0 = time.monotonic()
    rem = _remote(hub, targets=["sglang==0.5.23"])
    took = time.monotonic() - t0
    assert took < 4, took
    msgs = [f.message for f in rem.checkpoint.issues if f.code == "SF117"]
    assert len(msgs) == n
    assert any("time limit for all requests" in m for m in msgs), msgs


def test_retry_after_is_honoured_and_bounded(tmp_path, serve, monkeypatch):
    hub = serve(build(tmp_path, glm5_quark_mxfp4(), shards=2))
    hub.fail = {S1: [429]}
    hub.retry_after = "1"
    t0 = time.monotonic()
    rem = _remote(hub, targets=["sglang==0.5.23"])
    assert time.monotonic() - t0 >= 1.0 and rem.checkpoint.issues == []
    monkeypatch.setattr(hubhttp, "MAX_BACKOFF", 0.3)
    hub.fail = {S1: [429, 429]}
    hub.retry_after = "3600"
    t0 = time.monotonic()
    rem = _remote(hub, targets=["sglang==0.5.23"])
    assert time.monotonic() - t0 < 3 and rem.checkpoint.issues == []


def test_token_with_a_newline_is_a_usage_error_and_never_printed(tmp_path, serve, monkeypatch, capsys):
    hub = serve(build(tmp_path, glm5_quark_mxfp4(), shards=2))
    monkeypatch.setenv("HF_TOKEN", "hf_SECRETpart1\nSECRETpart2")
    with pytest.raises(SystemExit) as e:
        cli.main(["check", URL, "--endpoint", hub.endpoint, "-q"])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and "HF_TOKEN is not a usable token" in err
    assert "SECRET" not in out + err and "Traceback" not in err and err.count("\n") == 1
    assert hub.log == []  # nothing was sent


def test_credentials_are_redacted_from_every_message(tmp_path, serve, monkeypatch, capsys):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    token = "hf_TOPSECRETtoken0123"
    monkeypatch.setenv("HF_TOKEN", token)
    hub.error_message = f"invalid credentials in header 'authorization': Bearer {token}"  # a server that echoes it
    hub.forbidden.add(S2)
    with pytest.raises(SystemExit) as e:
        cli.main(["check", URL, "--endpoint", hub.endpoint, "-t", "sglang==0.5.23", "-f", "json", "-q"])
    out, err = capsys.readouterr()
    assert e.value.code == 1
    [f] = [f for f in json.loads(out)["findings"] if f["file"] == S2]
    assert "403" in f["message"] and "Bearer ***" in f["message"]
    assert "TOPSECRET" not in out + err
    hub.require_token = "hf_other"  # now the whole repository says 401 with the echo
    with pytest.raises(SystemExit) as e:
        cli.main(["check", URL, "--endpoint", hub.endpoint, "-q"])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and "401" in err and "TOPSECRET" not in out + err


def _listener():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(5)
    s.setblocking(False)
    return s


@pytest.mark.parametrize("scheme", ["ftp", "file", "gopher"])
def test_redirects_only_to_http(tmp_path, serve, scheme):
    hub = serve(build(tmp_path, glm5_quark_mxfp4(), shards=2))
    trap = _listener()
    port = trap.getsockname()[1]
    hub.location[S2] = f"{scheme}://127.0.0.1:{port}/etc/passwd" if scheme != "file" else "file:///etc/passwd"
    try:
        rem = _remote(hub, targets=["sglang==0.5.23"])
        [f] = [f for f in rem.checkpoint.issues if f.file == S2]
        assert f.code == "SF117" and f"a {scheme}: URL" in f.message and "only http and https" in f.message
        with pytest.raises(BlockingIOError):
            trap.accept()  # nobody connected to the redirect's target
    finally:
        trap.close()


@pytest.mark.parametrize("env, needle", [
    ({"HF_HUB_DOWNLOAD_TIMEOUT": "nan"}, "HF_HUB_DOWNLOAD_TIMEOUT='nan' is not a usable timeout"),
    ({"HF_HUB_DOWNLOAD_TIMEOUT": "-1"}, "is not a usable timeout"),
    ({"HF_HUB_DOWNLOAD_TIMEOUT": "inf"}, "is not a usable timeout"),
    ({"HF_HUB_DOWNLOAD_TIMEOUT": "1e400"}, "is not a usable timeout"),
    ({"HF_HUB_DOWNLOAD_TIMEOUT": "ten"}, "is not a usable timeout"),
    ({"HF_ENDPOINT": "http://[::1"}, "not a URL"),
    ({"HF_ENDPOINT": "http://127.0.0.1:99999"}, "not a URL"),
    ({"HF_ENDPOINT": "http://exa mple.com"}, "no spaces or control characters"),
    ({"HF_ENDPOINT": "ftp://example.com"}, "expected http(s)://HOST"),
    ({"HF_ENDPOINT": "http://user:hunter2@example.com"}, "credentials in the URL are not sent"),
    ({"HF_ENDPOINT": "http://" + "a" * 300 + ".com"}, "the host name is not valid"),
    ({"HF_ENDPOINT": "https://example.com/?x=1"}, "without ?query"),
])
@pytest.mark.parametrize("command", ["check", "plan"])
def test_unusable_settings_are_exit_2(monkeypatch, capsys, env, needle, command):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if "HF_ENDPOINT" not in env:
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(SystemExit) as e:
        cli.main([command, URL, "-t", "sglang==0.5.23"])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and needle in err, err
    assert "Traceback" not in err and "internal error" not in err and err.count("\n") == 1
    assert "hunter2" not in err


@pytest.mark.parametrize("url, needle", [
    ("hf://org/" + "a" * 5000, "the repository id is 5,004 characters long"),
    ("hf://org/repo@" + "r" * 70000, "the revision is 70,000 characters long"),
    ("hf://org/repo@main\nx", "bad revision"),
])
@pytest.mark.parametrize("command", ["check", "plan"])
def test_over_long_or_bad_names_are_exit_2(capsys, url, needle, command):
    with pytest.raises(SystemExit) as e:
        cli.main([command, url, "--endpoint", "http://127.0.0.1:9", "-t", "sglang==0.5.23"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and needle in err and "internal error" not in err
    assert len(err) < 400  # the name is not echoed in full


# ------------------------------------------------------------------ proxies and TLS


@pytest.fixture
def proxy(monkeypatch):
    from fakehub import ForwardProxy

    for k in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(k, raising=False)
    p = ForwardProxy()
    yield p
    p.stop()


def test_http_proxy_from_the_environment(tmp_path, serve, proxy, monkeypatch):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    monkeypatch.setenv("http_proxy", proxy.url.replace("://", "://user:pr0xy-pw@"))
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    rem = _remote(hub, targets=FEW)
    _same(_check(str(path), FEW), path, rem)
    targets = [t for m, t, _ in proxy.log]
    assert any(t.startswith(hub.endpoint + "/api/models/") for t in targets)
    assert any(t.startswith(hub.cdn_origin + "/cdn/") for t in targets)
    assert all(a == "Basic dXNlcjpwcjB4eS1wdw==" for _, _, a in proxy.log)  # user:pr0xy-pw
    assert all(r["auth"] is None for r in hub.requests(server="cdn"))
    assert hub.requests(server="hub") and all(r["auth"] == "Bearer hf_secret" for r in hub.requests(server="hub"))


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate for the TLS test")
    d = tmp_path_factory.mktemp("tls")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {r.stderr[-300:]}")
    return d / "cert.pem", d / "key.pem"


@pytest.mark.parametrize("via_proxy", [False, True], ids=["direct", "connect-proxy"])
def test_https_hub_and_cdn(tmp_path, tls_files, monkeypatch, request, via_proxy):
    import ssl

    cert, key = tls_files
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = FakeHub(path, tls=ctx).start()
    request.addfinalizer(hub.stop)
    assert hub.endpoint.startswith("https://")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    with pytest.raises(NotACheckpoint, match="certificate verification failed"):
        _remote(hub, targets=FEW)  # not trusted yet
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    if via_proxy:
        p = request.getfixturevalue("proxy")
        monkeypatch.setenv("https_proxy", p.url)
    rem = _remote(hub, targets=FEW)
    _same(_check(str(path), FEW), path, rem)
    assert all(r["auth"] is None for r in hub.requests(server="cdn"))
    assert all(r["auth"] == "Bearer hf_secret" for r in hub.requests(server="hub"))
    if via_proxy:
        tunnels = {t for m, t, _ in p.log if m == "CONNECT"}
        assert tunnels == {hub.endpoint[len("https://"):], hub.cdn_origin[len("https://"):]}


@pytest.mark.parametrize("api", [True, False], ids=["listed", "probed"])
@pytest.mark.parametrize("moved", [False, True], ids=["same", "branch-moved"])
def test_cli_reads_in_the_background_pinned_to_one_commit(tmp_path, serve, capsys, api, moved):
    path = build(tmp_path, glm5_quark_mxfp4(), shards=2)
    hub = serve(path)
    hub.api = api
    if moved:
        hub.branch_commit = "f" * 40  # answers by branch name come from a newer commit than the listing
    args = ["check", "-t", "sglang==0.5.15", "-t", "vllm==0.33.0", "-f", "json", "-q"]
    with pytest.raises(SystemExit) as e:
        cli.main([*args, URL, "--endpoint", hub.endpoint])
    rem = json.loads(capsys.readouterr().out)
    with pytest.raises(SystemExit) as e2:
        cli.main([*args, str(path)])
    local = json.loads(capsys.readouterr().out)
    assert e.value.code == e2.value.code == 1
    assert json.dumps(rem["findings"]).replace(URL, "<R>") == json.dumps(local["findings"]).replace(str(path), "<R>")
    revs = {(r["file"], r["path"].split("/resolve/")[1].split("/")[0]) for r in hub.requests(server="hub") if r["file"]}
    shard_revs = {rev for f, rev in revs if f.endswith(".safetensors")}
    assert shard_revs == ({COMMIT} if api else {"f" * 40} if moved else {COMMIT})
    if api:  # the JSON files were asked for by branch at once; asked again by commit only when the branch moved
        assert ("config.json", "main") in revs and (("config.json", COMMIT) in revs) == moved


# ------------------------------------------------------------------ the remote benchmark runs


@pytest.mark.skipif(not (Path(__file__).resolve().parents[1] / "benchmarks" / "remote_bench.py").exists(),
                    reason="benchmarks/ not present")
def test_remote_benchmark_smoke(tmp_path):
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "remote_bench.py"
    out = tmp_path / "remote.json"
    r = subprocess.run([sys.executable, str(bench), "--scale", "tiny", "--reps", "1", "--warmup", "0", "--latency-ms", "5",
                        "--workdir", str(tmp_path), "--json-out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "shard/header" in r.stdout
    d = json.loads(out.read_text())
    run = d["median_run"]
    shards = d["checkpoint"]["shards"]
    assert run["rc"] == d["local_rc"] == 0 and run["findings"] == 0
    # every shard was redirected once by the Hub and answered once by the CDN; only headers came
    assert run["cdn_requests"] == shards and run["shards_with_2_ranges"] == 0
    assert d["checkpoint"]["header_bytes"] <= run["shard_bytes"] < 2 * d["checkpoint"]["header_bytes"]
    assert run["connections"] < run["requests"]
