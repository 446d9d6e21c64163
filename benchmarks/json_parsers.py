#!/usr/bin/env python3
"""Native JSON parsers against what ckptlint's reader does today, on the benchmark's headers (issue 17).

    .venv/bin/python benchmarks/json_parsers.py [--reps 5] [--only deepseek|million]

Reads every shard header of the benchmark checkpoints (``bench.py --generate-only`` makes them) into
memory once, then times, alternating, over all headers of a checkpoint (median of ``--reps``):

* ``json.loads``: the standard library (bytes decoded to ``str`` first, as the reader does);
* ``orjson.loads`` and ``msgspec.json.decode``: the native parsers, on the bytes;
* ``reader``: what ckptlint's reader does with a header now (``parse.parse_header``: for these
  clean headers ``canonical.scan_clean``, a typed ``msgspec`` decode into one struct per tensor
  followed by column checks and the ``TensorInfo`` map);
* ``json+validate`` / ``orjson+validate`` / ``msgspec+validate``: a parser, then the reader's one-pass
  check of a parsed clean header (``canonical.fast_validate``): what the reader would do if it
  parsed every header with that parser and dropped the scan;
* ``msgspec typed``: ``msgspec`` decoding straight into a struct per tensor (no intermediate dict),
  after cutting the leading ``__metadata__`` object out of the text (a struct-or-map union cannot
  be declared). No validation and no ``TensorInfo``: a lower bound for that route;
  ``msgspec typed+validate`` adds the checks as a Python loop per tensor (the reader does them on
  whole columns instead).

Ratios are against ``json.loads`` and against ``reader``, from the same run. ``orjson`` is optional
here (a line says when it is missing); ``msgspec`` is a dependency of ckptlint.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from ckptlint.checkpoint import ShardInfo  # noqa: E402
from ckptlint.reader import canonical, parse  # noqa: E402
from ckptlint.reader.header import ShardRead  # noqa: E402


def headers(root: Path) -> list[tuple[str, bytes, int]]:
    out = []
    for name in sorted(n for n in os.listdir(root) if n.endswith(".safetensors")):
        p = root / name
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            out.append((name, f.read(n), p.stat().st_size))
    return out


def parsers() -> dict[str, object]:
    fns: dict[str, object] = {"json.loads": lambda raw: json.loads(raw.decode("utf-8"))}
    try:
        import orjson

        fns["orjson.loads"] = orjson.loads
    except ImportError:
        print("orjson not installed: skipped", file=sys.stderr)
    try:
        import msgspec

        fns["msgspec.json.decode"] = msgspec.json.Decoder().decode
    except ImportError:
        print("msgspec not installed: skipped", file=sys.stderr)
    return fns


def variants(hs: list[tuple[str, bytes, int]]) -> dict[str, object]:
    out = {}
    for label, fn in parsers().items():
        out[label] = lambda fn=fn: [fn(raw) for _, raw, _ in hs]
        out[label.split(".")[0] + "+validate"] = lambda fn=fn: [canonical.fast_validate(fn(raw), name)
                                                               for name, raw, _ in hs]

    try:
        import msgspec
        import re

        class Entry(msgspec.Struct, gc=False):
            dtype: str
            shape: tuple[int, ...]
            data_offsets: tuple[int, int]

        typed = msgspec.json.Decoder(dict[str, Entry]).decode
        meta = re.compile(rb'^\{"__metadata__":\{[^}]*\},')
        out["msgspec typed"] = lambda: [typed(meta.sub(b"{", raw, count=1)) for _, raw, _ in hs]
        out["msgspec typed+validate"] = lambda: [_typed_validate(typed(meta.sub(b"{", raw, count=1)), name)
                                                 for name, raw, _ in hs]
    except ImportError:
        pass

    def reader():
        for name, raw, size in hs:
            res = ShardRead(info=ShardInfo(file=name, size=size))
            parse.parse_header(raw, len(raw), size, name, res)
            assert res.tensors and not res.issues

    out["reader"] = reader
    return out


def _typed_validate(entries, rel: str):
    """The checks of ``canonical.fast_validate`` on decoded structs (sizes per distinct dtype and
    shape computed once), building the reader's ``TensorInfo`` map: the least a typed route costs."""
    from ckptlint.checkpoint import DTYPE_BITS, TensorInfo

    sizes: dict = {}
    tensors = {}
    prev = 0
    for name, e in entries.items():
        key = (e.dtype, e.shape)
        nbytes = sizes.get(key)
        if nbytes is None:
            numel = 1
            for d in e.shape:
                numel *= d
            nbytes = sizes[key] = numel * DTYPE_BITS[e.dtype] // 8
        b, end = e.data_offsets
        if b != prev or end - b != nbytes:
            return None
        prev = end
        tensors[name] = TensorInfo(name, e.dtype, e.shape, rel)
    return tensors, prev


def measure(root: Path, reps: int) -> dict[str, object]:
    hs = headers(root)
    runs: dict[str, list[float]] = {}
    vs = variants(hs)
    for fn in vs.values():  # warm-up (and every variant must accept every header)
        fn()
    for _ in range(reps):
        for label, fn in vs.items():
            t = time.perf_counter()
            fn()
            runs.setdefault(label, []).append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {"shards": len(hs), "header_bytes": sum(len(r) for _, r, _ in hs), "median_s": med,
            "vs_json_loads": {k: v / med["json.loads"] for k, v in med.items()},
            "vs_reader": {k: v / med["reader"] for k, v in med.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", action="append", choices=("deepseek", "million"))
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    ap.add_argument("--scale", choices=("tiny", "full"), default="full")
    args = ap.parse_args(argv)
    results = {}
    for name in args.only or ("deepseek", "million"):
        root = args.workdir / f"{name}-{args.scale}"
        if not root.is_dir():
            print(f"{root} missing: run benchmarks/bench.py --generate-only --scale {args.scale} first", file=sys.stderr)
            return 2
        r = results[name] = measure(root, args.reps)
        print(f"\n{name}: {r['shards']} shards, {r['header_bytes'] / 2**20:.1f} MiB of headers")
        print(f"{'':24} {'median s':>9} {'/json.loads':>12} {'/reader':>8}")
        for k, v in r["median_s"].items():
            print(f"{k:24} {v:9.3f} {r['vs_json_loads'][k]:12.2f} {r['vs_reader'][k]:8.2f}")
    out = args.workdir / "json_parsers.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
