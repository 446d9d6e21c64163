#!/usr/bin/env python3
"""Benchmark ``ckptlint check hf://...`` against a local fake Hub with injected latency.

    .venv/bin/python benchmarks/remote_bench.py                        # DeepSeek-V3 scale, 50 ms, 3 reps
    .venv/bin/python benchmarks/remote_bench.py --scale tiny --reps 1  # seconds; what the smoke test runs

Serves the DeepSeek-V3-scale checkpoint of ``bench.py`` (generated once, sparse, cached in the
work dir) from the fake Hub of the test suite (``tests/fakehub.py``): the Hub answers the listing
API and the JSON files itself and redirects every ``.safetensors`` request to a second server (the
"CDN"), as huggingface.co does; both sleep ``--latency-ms`` before answering each request, as a
round trip to a far server costs. Each rep runs ``ckptlint check hf://org/repo --format json -q``
as its own process and measures its wall time (from start to exit), the requests each server
answered, the connections opened, and the bytes sent: shard bytes against the bytes of the shard
headers (8-byte length + JSON, all a tool must read), and everything (the JSON files as well).
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench import (  # noqa: E402
    compile_bytecode,
    ckptlint_cmd,
    describe_checkpoint,
    ensure_checkpoint,
    machine_info,
    run_measured,
)
from layouts import LAYOUTS  # noqa: E402

# issue 17's targets for the DeepSeek-V3-scale checkpoint with 50 ms per request
TARGET_WALL_S = 2.5
TARGET_BYTES_RATIO = 1.3


def one_run(hub: Any, path: Path, argv: list[str]) -> dict[str, Any]:
    hub.log.clear()
    hub.served.clear()
    env = {**os.environ, "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        env.pop(k, None)
    m = run_measured(argv, capture=True, env=env)
    shard_bytes = sum(v for k, v in hub.served.items() if k.endswith(".safetensors"))
    doc = json.loads(m["stdout"]) if m["stdout"].strip().startswith("{") else {}
    per_shard: dict[str, int] = {}
    for r in hub.requests(server="cdn"):
        per_shard[r["file"]] = per_shard.get(r["file"], 0) + 1
    return {
        "wall_s": m["wall_s"], "rc": m["rc"], "user_s": m["user_s"], "sys_s": m["sys_s"],
        "max_rss_kib": m["max_rss_kib"], "stderr": m["stderr"][-2000:],
        "requests": len(hub.log), "hub_requests": len(hub.requests(server="hub")),
        "cdn_requests": len(hub.requests(server="cdn")),
        "shards_with_2_ranges": sum(1 for n in per_shard.values() if n >= 2),
        "connections": hub.connections(),
        "shard_bytes": shard_bytes, "all_bytes": sum(hub.served.values()),
        "findings": len(doc.get("findings", [])) if doc else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=("tiny", "full"), default="full")
    ap.add_argument("--only", choices=sorted(LAYOUTS), default="deepseek", help="checkpoint layout (default deepseek)")
    ap.add_argument("--latency-ms", type=float, default=50.0, help="sleep before answering each request")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (page cache, .pyc)")
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    ap.add_argument("--json-out", type=Path, default=None, help="default: WORKDIR/remote-results.json")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)

    def log(msg: str) -> None:
        if not a.quiet:
            print(msg, file=sys.stderr, flush=True)

    from fakehub import FakeHub

    a.workdir.mkdir(parents=True, exist_ok=True)
    spec = LAYOUTS[a.only](a.scale)
    path, gen = ensure_checkpoint(spec, a.scale, a.workdir, log)
    desc = describe_checkpoint(path)
    compiled = compile_bytecode(log)
    index_bytes = desc["index_bytes"]
    json_bytes = sum(os.path.getsize(path / n) for n in os.listdir(path) if n.endswith(".json"))

    load_before = os.getloadavg()[0]
    hub = FakeHub(path).start()
    try:
        hub.latency = a.latency_ms / 1000
        cmd = ckptlint_cmd() + ["check", "hf://org/repo", "--endpoint", hub.endpoint, "--format", "json", "-q"]
        for _ in range(a.warmup):
            one_run(hub, path, cmd)
        runs = [one_run(hub, path, cmd) for _ in range(a.reps)]
    finally:
        hub.stop()
    local = run_measured(ckptlint_cmd() + ["check", str(path), "--format", "json", "-q"], capture=False)

    mid = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    hdr = desc["header_bytes"]
    res: dict[str, Any] = {
        "schema": 1, "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "scale": a.scale, "layout": a.only, "latency_ms": a.latency_ms, "reps": a.reps,
        "machine": machine_info(), "bytecode": compiled, "generation": gen,
        "checkpoint": {**desc, "json_bytes": json_bytes, "index_bytes": index_bytes},
        "runs": runs,
        "median_wall_s": statistics.median(r["wall_s"] for r in runs),
        "median_run": {k: v for k, v in mid.items() if k != "stderr"},
        "shard_bytes_ratio": mid["shard_bytes"] / hdr if hdr else None,
        "all_bytes_ratio": mid["all_bytes"] / hdr if hdr else None,
        "local_check_s": local["wall_s"], "local_rc": local["rc"],
        "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    res["acceptance"] = [
        {"name": f"remote {a.only}, {a.latency_ms:g} ms/request: wall <= {TARGET_WALL_S} s",
         "measured": round(res["median_wall_s"], 3), "ok": res["median_wall_s"] <= TARGET_WALL_S},
        {"name": f"shard bytes fetched <= {TARGET_BYTES_RATIO}x header bytes",
         "measured": round(res["shard_bytes_ratio"] or 0, 3),
         "ok": (res["shard_bytes_ratio"] or 99) <= TARGET_BYTES_RATIO},
        {"name": "same exit code as the local check", "measured": sorted({r["rc"] for r in runs}),
         "ok": all(r["rc"] == local["rc"] for r in runs)},
    ]
    out = a.json_out or a.workdir / "remote-results.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(fmt(res))
    return 0


def fmt(res: dict[str, Any]) -> str:
    c, m = res["checkpoint"], res["median_run"]
    mb = 1e6
    walls = ", ".join(f"{r['wall_s']:.2f}" for r in res["runs"])
    lines = [
        f"remote check of {res['layout']} ({res['scale']}): {c['shards']} shards, header bytes {c['header_bytes'] / mb:.2f} MB, "
        f"JSON files {c['json_bytes'] / mb:.2f} MB; {res['latency_ms']:g} ms per request; "
        f"load average {res['loadavg_1min'][0]:g} before, {res['loadavg_1min'][1]:g} after",
        "",
        "| wall s (median) | runs s | local check s | requests (hub+cdn) | shards with 2 ranges | connections "
        "| shard MB fetched | shard/header | all MB fetched | all/header |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {res['median_wall_s']:.2f} | {walls} "
        f"| {res['local_check_s']:.2f} | {m['requests']} ({m['hub_requests']}+{m['cdn_requests']}) "
        f"| {m['shards_with_2_ranges']} | {m['connections']} | {m['shard_bytes'] / mb:.2f} "
        f"| {res['shard_bytes_ratio']:.3f} | {m['all_bytes'] / mb:.2f} | {res['all_bytes_ratio']:.3f} |",
        "",
    ]
    for acc in res["acceptance"]:
        lines.append(f"{'PASS' if acc['ok'] else 'FAIL'}  {acc['name']}: {acc['measured']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
