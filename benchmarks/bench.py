#!/usr/bin/env python3
"""Benchmark ``ckptlint check`` against the cost of merely reading the safetensors headers.

    .venv/bin/python benchmarks/bench.py                       # full scale, 5 reps
    .venv/bin/python benchmarks/bench.py --scale tiny --reps 1 # seconds; what the smoke test runs

Generates (once; cached by parameters) full-scale sparse checkpoints with ckptlint's own builder
into the work dir, then times, alternating, per checkpoint: the floor (read + json.loads every
header), safetensors.safe_open listing every key/dtype/shape, the module pass (the floor plus
grouping names into modules and one expert-rule match per module: a reference for the least
per-module Python work), ``ckptlint check --format json`` end to end, and ckptlint's phases in-process; plus ``ckptlint --version`` against
``python -c pass``. Every measured command is its own process; wall time, peak RSS and
/proc/<pid>/io are taken from the parent. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from layouts import LAYOUTS, BenchSpec  # noqa: E402

PY = sys.executable
GIB = 1 << 30
MIB = 1 << 20


# --------------------------------------------------------------------------- generation


def is_cached(spec: BenchSpec, scale: str, workdir: Path) -> bool:
    """Whether ``workdir`` holds ``spec`` generated with the same parameters."""
    dest = workdir / f"{spec.name}-{scale}"
    stamp = workdir / f"{spec.name}-{scale}.stamp.json"
    if dest.is_dir() and stamp.is_file():
        try:
            return json.loads(stamp.read_text()).get("key") == spec.key()
        except ValueError:
            return False
    return False


def ensure_checkpoint(spec: BenchSpec, scale: str, workdir: Path, log) -> tuple[Path, dict[str, Any]]:
    """Generate ``spec`` under ``workdir`` unless a copy with the same parameters is there."""
    from ckptlint.testing.builder import write_checkpoint

    dest = workdir / f"{spec.name}-{scale}"
    stamp = workdir / f"{spec.name}-{scale}.stamp.json"
    key = spec.key()
    if is_cached(spec, scale, workdir):
        return dest, {"cached": True, "seconds": 0.0}
    log(f"generating {spec.name} ({scale}) into {dest} ...")
    t0 = time.perf_counter()
    tmp = workdir / f".{spec.name}-{scale}.tmp"
    for d in (tmp, dest):
        if d.exists():
            shutil.rmtree(d)
    stamp.unlink(missing_ok=True)
    config, tensors, hf_quant = spec.build()
    write_checkpoint(tmp, config=config, tensors=tensors, shards=spec.shards, hf_quant_config=hf_quant,
                     sparse=True)
    tmp.rename(dest)
    secs = time.perf_counter() - t0
    stamp.write_text(json.dumps({"key": key, "name": spec.name, "scale": scale, "params": spec.params,
                                 "shards": spec.shards, "tensors": len(tensors),
                                 "generation_s": round(secs, 3)}, indent=2) + "\n")
    log(f"  {len(tensors):,} tensors in {spec.shards} shards, {secs:.1f} s")
    return dest, {"cached": False, "seconds": secs}


def describe_checkpoint(path: Path) -> dict[str, Any]:
    apparent = disk = 0
    shards = 0
    header_bytes = 0
    for e in os.scandir(path):
        st = e.stat()
        apparent += st.st_size
        disk += st.st_blocks * 512
        if e.name.endswith(".safetensors"):
            shards += 1
            with open(e.path, "rb") as f:
                header_bytes += 8 + int.from_bytes(f.read(8), "little")
    idx = path / "model.safetensors.index.json"
    return {"apparent_bytes": apparent, "disk_bytes": disk, "shards": shards, "header_bytes": header_bytes,
            "index_bytes": idx.stat().st_size if idx.exists() else 0}


# --------------------------------------------------------------------------- measuring


def _tree_rss_kib(pid: int) -> int:
    """Resident set of ``pid`` and its descendants now (KiB; pages shared after a fork are counted
    in each process, so this overstates what the tree uses: an upper bound)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def run_measured(cmd: list[str], *, capture: bool = False, env: dict[str, str] | None = None,
                 tree: bool = False) -> dict[str, Any]:
    """Run ``cmd`` as a process; wall time, exit code, peak RSS (wait4) and /proc/<pid>/io
    (read after exit, before the zombie is reaped). ``tree``: also sample, every 2 ms, the summed
    RSS of the process and its children (ckptlint forks a helper that reads shard headers)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    peak = [0]
    sampler = None
    if tree and sys.platform.startswith("linux"):
        import threading

        stop = threading.Event()

        def sample() -> None:
            # (never p.poll(): that would reap the process before wait4 below reads its usage)
            while not stop.is_set():
                peak[0] = max(peak[0], _tree_rss_kib(p.pid))
                time.sleep(0.002)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
    out = p.stdout.read() if capture else b""  # type: ignore[union-attr]
    err = p.stderr.read()  # type: ignore[union-attr]
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    wall = time.perf_counter() - t0
    if sampler is not None:
        stop.set()
        sampler.join()
    io: dict[str, int] = {}
    try:
        with open(f"/proc/{p.pid}/io") as fh:
            for line in fh:
                k, _, v = line.partition(":")
                io[k.strip()] = int(v)
    except OSError:
        pass
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    for s in (p.stdout, p.stderr):
        if s is not None:
            s.close()
    return {"wall_s": wall, "rc": p.returncode, "max_rss_kib": ru.ru_maxrss, "tree_max_rss_kib": peak[0] or None,
            "rchar": io.get("rchar"),
            "read_bytes": io.get("read_bytes"), "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
            "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


def compile_bytecode(log) -> dict[str, Any]:
    """Byte-compile ckptlint like an installed wheel is (pip compiles at install time).

    An editable install only gets ``.pyc`` files when Python may write them on first import; with
    ``PYTHONDONTWRITEBYTECODE`` set (common in containers and CI) every run would recompile the
    package from source, and the benchmark would measure the compiler instead of ckptlint."""
    import ckptlint

    pkg = Path(ckptlint.__file__).parent
    r = subprocess.run([PY, "-m", "compileall", "-q", str(pkg)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        log(f"warning: could not byte-compile {pkg}: {r.stderr.strip()[:200]}")
    return {"package": pkg.name, "compiled": r.returncode == 0,
            "env_PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE")}


def ckptlint_cmd() -> list[str]:
    exe = Path(PY).with_name("ckptlint")
    return [str(exe)] if exe.exists() else [PY, "-m", "ckptlint"]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_s"] for r in runs]
    rchars = [r["rchar"] for r in runs if r["rchar"] is not None]
    return {
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "runs_s": [round(w, 4) for w in walls],
        "user_s": statistics.median(r["user_s"] for r in runs),
        "sys_s": statistics.median(r["sys_s"] for r in runs),
        "max_rss_kib": max(r["max_rss_kib"] for r in runs),
        "tree_max_rss_kib": max((r.get("tree_max_rss_kib") or 0) for r in runs) or None,
        "rchar": int(statistics.median(rchars)) if rchars else None,
        "read_bytes": max((r["read_bytes"] or 0) for r in runs) if rchars else None,
        "exit_codes": sorted({r["rc"] for r in runs}),
    }


def measure_checkpoint(path: Path, reps: int, warmup: int, log, paired: Path | None = None) -> dict[str, Any]:
    """Every command on ``path``, alternating, ``reps`` times. ``paired``: another checkpoint whose
    ``ckptlint check`` runs in the same loop (``ckptlint_paired``), for a ratio of the two check
    times that a machine whose speed drifts between the two checkpoints' measurements cannot skew."""
    cmds = {
        "floor": [PY, str(HERE / "floor.py"), str(path)],
        "safe_open": [PY, str(HERE / "safeopen_list.py"), str(path)],
        "module_pass": [PY, str(HERE / "module_pass.py"), str(path)],
        "ckptlint": ckptlint_cmd() + ["check", str(path), "--format", "json"],
        "ckptlint_1proc": ckptlint_cmd() + ["check", str(path), "--format", "json"],
        "phases": [PY, str(HERE / "phases.py"), str(path)],
    }
    if paired is not None:
        cmds["ckptlint_paired"] = ckptlint_cmd() + ["check", str(paired), "--format", "json"]
    one_proc_env = {**os.environ, "CKPTLINT_JOBS": "1"}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in cmds}
    phase_runs: list[dict[str, Any]] = []
    for rep in range(warmup + reps):
        for kind, cmd in cmds.items():
            r = run_measured(cmd, capture=not kind.startswith("ckptlint"), tree=kind == "ckptlint",
                             env=one_proc_env if kind == "ckptlint_1proc" else None)
            if kind.startswith("ckptlint") and r["rc"] not in (0, 1):
                raise SystemExit(f"ckptlint check failed (exit {r['rc']}): {r['stderr'][-2000:]}")
            if not kind.startswith("ckptlint") and r["rc"] != 0:
                raise SystemExit(f"{kind} failed (exit {r['rc']}): {r['stderr'][-2000:]}")
            if rep >= warmup:
                runs[kind].append(r)
                if kind == "phases":
                    phase_runs.append(json.loads(r["stdout"]))
        if rep >= warmup:
            log(f"  rep {rep - warmup + 1}/{reps}: " + ", ".join(
                f"{k} {runs[k][-1]['wall_s']:.3f}s" for k in cmds))
    out: dict[str, Any] = {k: summarize(v) for k, v in runs.items()}
    floor_out = runs["floor"][0]["stdout"].split()
    out["floor"]["tensors"] = int(floor_out[1])
    out["floor"]["header_bytes"] = int(floor_out[2])
    out["safe_open"]["tensors"] = int(runs["safe_open"][0]["stdout"].split()[1])
    out["module_pass"]["modules"] = int(runs["module_pass"][0]["stdout"].split()[1])
    keys = ["import_engine_s", "import_cli_s", "import_s", "targets_s", "read_s", "simulate_s", "rules_s",
            "render_s", "check_s", "total_s"]
    last = phase_runs[-1]
    out["phases"].update({k: statistics.median(p[k] for p in phase_runs) for k in keys})
    for k in ("targets", "tensors", "shards", "bytes_read", "findings", "findings_by_code", "output_bytes"):
        out["phases"][k] = last[k]
    return out


def measure_startup(reps: int, warmup: int) -> dict[str, Any]:
    # Besides the two compared, for the record: what the console script's wrapper adds (the script
    # pip before 25.2 generates runs `import re` before importing ckptlint; pip 25.2+ and uv's do
    # not: the README's install commands upgrade pip first), and ckptlint's own entry point without
    # any wrapper.
    cmds = {"python_pass": [PY, "-c", "pass"], "ckptlint_version": ckptlint_cmd() + ["--version"],
            "python_import_re": [PY, "-c", "import re"],
            "entry_version": [PY, "-c", "from ckptlint._entry import main; main()", "--version"]}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in cmds}
    for rep in range(warmup + reps):
        for kind, cmd in cmds.items():
            r = run_measured(cmd, capture=True)
            if r["rc"] != 0:
                raise SystemExit(f"{kind} failed: {r['stderr'][-2000:]}")
            if rep >= warmup:
                runs[kind].append(r)
    out = {k: summarize(v) for k, v in runs.items()}
    base = out["python_pass"]["median_s"]
    out["ratio"] = out["ckptlint_version"]["median_s"] / base
    out["import_re_ratio"] = out["python_import_re"]["median_s"] / base
    out["entry_ratio"] = out["entry_version"]["median_s"] / base
    script = ckptlint_cmd()[0]
    try:
        with open(script, encoding="utf-8", errors="replace") as f:
            out["wrapper_imports_re"] = "import re" in f.read(4096)
    except OSError:
        out["wrapper_imports_re"] = None
    return out


def import_profile(top: int = 12) -> dict[str, Any]:
    """``python -X importtime`` of what ``ckptlint check`` imports (one run, so noisy): the total,
    the top modules by cumulative time (nesting depth <= 2) and by self time."""
    code = ("import ckptlint.cli, ckptlint.cli.check, ckptlint.cli.argv, ckptlint.engine, ckptlint.render.json_out, "
            "ckptlint.targets")
    r = subprocess.run([PY, "-X", "importtime", "-c", code], capture_output=True, text=True)
    rows = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3:
            continue
        try:
            self_us, cum_us, name = int(parts[0]), int(parts[1]), parts[2].rstrip()
        except ValueError:
            continue
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append({"module": name.strip(), "self_ms": self_us / 1000, "cumulative_ms": cum_us / 1000,
                     "depth": depth})
    return {"total_ms": sum(x["self_ms"] for x in rows),
            "top_cumulative": sorted((x for x in rows if x["depth"] <= 2), key=lambda x: -x["cumulative_ms"])[:top],
            "top_self": sorted(rows, key=lambda x: -x["self_ms"])[:top]}


def machine_info() -> dict[str, Any]:
    cpu = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        from ckptlint import __version__ as ckv
    except Exception:  # pragma: no cover
        ckv = None
    try:
        import safetensors

        stv = safetensors.__version__
    except Exception:  # pragma: no cover
        stv = None
    return {"cpu_model": cpu or platform.processor() or None, "cores": os.cpu_count(),
            "mem_total_bytes": mem, "python": platform.python_version(),
            "python_implementation": platform.python_implementation(), "platform": platform.platform(),
            "ckptlint_version": ckv, "safetensors_version": stv}


# --------------------------------------------------------------------------- targets & report


def _peak_kib(m: dict[str, Any]) -> int:
    """Peak memory of a ckptlint run: the larger of its own peak RSS and the sampled peak of its
    process tree (main process + the shard-reading helper, shared pages counted twice)."""
    return max(m["max_rss_kib"], m.get("tree_max_rss_kib") or 0)


def acceptance(results: dict[str, Any]) -> list[dict[str, Any]]:
    cks = results["checkpoints"]
    out = []

    def add(name: str, measured: Any, limit: Any, ok: bool, **also: Any) -> None:
        out.append({"target": name, "measured": measured, "limit": limit, "pass": bool(ok), **also})

    ds = cks.get("deepseek")
    if ds:
        c, f = ds["ckptlint"]["median_s"], ds["floor"]["median_s"]
        # On a machine whose speed drifts the ratio of medians moves with it; two readings that
        # drift less, for the record (the verdict stays the ratio of medians): the median of the
        # ratios of each round's runs (the two commands run one after the other), and the ratio of
        # the quickest runs.
        per_rep = [a / b for a, b in zip(ds["ckptlint"]["runs_s"], ds["floor"]["runs_s"])]
        add("deepseek: ckptlint <= 2.5x floor", round(c / f, 2), 2.5, c <= 2.5 * f,
            per_round_median=round(statistics.median(per_rep), 2),
            quickest=round(ds["ckptlint"]["min_s"] / ds["floor"]["min_s"], 2))
        add("deepseek: ckptlint wall < 1 s", round(c, 3), 1.0, c < 1.0)
        rss = _peak_kib(ds["ckptlint"]) * 1024
        add("deepseek: ckptlint peak RSS <= 150 MiB", round(rss / MIB, 1), 150, rss <= 150 * MIB)
    mi = cks.get("million")
    if mi:
        if "ckptlint_paired" in mi:
            # the DeepSeek-V3 check run in the same loop as the million-tensor one (measure_checkpoint)
            c = mi["ckptlint"]["median_s"] / mi["ckptlint_paired"]["median_s"]
            add("million: ckptlint <= 10x deepseek time (same loop)", round(c, 2), 10, c <= 10)
        elif ds:
            c = mi["ckptlint"]["median_s"] / ds["ckptlint"]["median_s"]
            add("million: ckptlint <= 10x deepseek time", round(c, 2), 10, c <= 10)
        rss = _peak_kib(mi["ckptlint"]) * 1024
        add("million: ckptlint peak RSS <= 1 GiB", round(rss / MIB, 1), 1024, rss <= GIB)
    st = results.get("startup")
    if st:
        add("ckptlint --version <= 1.5x python -c pass", round(st["ratio"], 2), 1.5, st["ratio"] <= 1.5)
    return out


def fmt_table(results: dict[str, Any]) -> str:
    lines = []
    hdr = (f"{'checkpoint':<10} {'tensors':>9} {'shards':>6} {'app.GB':>7} {'floor s':>8} {'safe_open s':>11} "
           f"{'mod-pass s':>10} {'ckptlint s':>10} {'ck/floor':>8} {'ck/mod-pass':>11} {'1 proc s':>8} {'RSS floor':>9} {'RSS s_o':>8} {'RSS ck':>8} "
           f"{'RSS tree':>8} "
           f"{'hdr MB':>7} {'ck read MB':>10} {'ck rchar MB':>11}")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for name, r in results["checkpoints"].items():
        mb = lambda kib: f"{kib / 1024:.0f}M"  # noqa: E731
        lines.append(
            f"{name:<10} {r['tensors']:>9,} {r['shards']:>6} {r['apparent_bytes'] / 1e9:>7.1f} "
            f"{r['floor']['median_s']:>8.3f} {r['safe_open']['median_s']:>11.3f} {r['module_pass']['median_s']:>10.3f} "
            f"{r['ckptlint']['median_s']:>10.3f} {r['ratio_ckptlint_floor']:>8.2f} "
            f"{r['ckptlint']['median_s'] / r['module_pass']['median_s']:>11.2f} {r['ckptlint_1proc']['median_s']:>8.3f} "
            f"{mb(r['floor']['max_rss_kib']):>9} "
            f"{mb(r['safe_open']['max_rss_kib']):>8} {mb(r['ckptlint']['max_rss_kib']):>8} "
            f"{mb(r['ckptlint'].get('tree_max_rss_kib') or 0):>8} "
            f"{r['header_bytes'] / 1e6:>7.1f} {r['phases']['bytes_read'] / 1e6:>10.1f} "
            f"{(r['ckptlint']['rchar'] or 0) / 1e6:>11.1f}")
    lines.append("")
    hdr2 = (f"{'phases (s)':<10} {'import':>7} {'(cli)':>11} {'targets':>8} {'read':>7} {'simulate':>8} "
            f"{'rules':>7} {'render':>7} {'findings':>8}")
    lines.append(hdr2)
    lines.append("-" * len(hdr2))
    for name, r in results["checkpoints"].items():
        p = r["phases"]
        lines.append(f"{name:<10} {p['import_s']:>7.3f} {p['import_cli_s']:>11.3f} {p['targets_s']:>8.3f} "
                     f"{p['read_s']:>7.3f} {p['simulate_s']:>8.3f} {p['rules_s']:>7.3f} {p['render_s']:>7.3f} "
                     f"{p['findings']:>8}")
    for name, r in results["checkpoints"].items():
        pr = r.get("ckptlint_paired")
        if pr:
            own = results["checkpoints"][pr["checkpoint"]]["ckptlint"]["median_s"]  # measured in its own loop
            lines.append("")
            lines.append(f"{name} / {pr['checkpoint']} in the same loop: ckptlint {r['ckptlint']['median_s']:.3f} s / "
                         f"{pr['median_s']:.3f} s = {r['ckptlint']['median_s'] / pr['median_s']:.2f} "
                         f"({pr['checkpoint']} measured in its own loop: {own:.3f} s)")
    st = results.get("startup")
    if st:
        lines.append("")
        lines.append(f"startup: python -c pass {st['python_pass']['median_s'] * 1000:.1f} ms, "
                     f"ckptlint --version {st['ckptlint_version']['median_s'] * 1000:.1f} ms "
                     f"(ratio {st['ratio']:.2f}; the console script "
                     f"{'imports re (pip < 25.2)' if st.get('wrapper_imports_re') else 'does not import re'}); "
                     f"python -c 'import re' (what pip < 25.2's console-script wrapper adds) "
                     f"{st['import_re_ratio']:.2f}, ckptlint's entry point without a wrapper {st['entry_ratio']:.2f}")
    if results.get("acceptance"):
        lines.append("")
        lines.append(f"acceptance targets (scale {results['scale']}"
                     + ("; only meaningful at full scale" if results["scale"] != "full" else "") + "):")
        for a in results["acceptance"]:
            extra = ""
            if "per_round_median" in a:
                extra = (f"; per round: median {a['per_round_median']}, quickest runs: {a['quickest']}")
            lines.append(f"  [{'PASS' if a['pass'] else 'FAIL'}] {a['target']}: measured {a['measured']} "
                         f"(limit {a['limit']}{extra})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=("tiny", "full"), default="full")
    ap.add_argument("--only", action="append", choices=sorted(LAYOUTS),
                    help="only this checkpoint (repeatable); default: all")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions of each measurement (median reported)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (page cache, .pyc)")
    ap.add_argument("--workdir", type=Path, default=HERE / "out", help="where checkpoints are generated (cached)")
    ap.add_argument("--json-out", type=Path, default=None, help="results JSON (default: WORKDIR/results.json)")
    ap.add_argument("--profile", action="store_true",
                    help="also cProfile `ckptlint check` in-process on each checkpoint (WORKDIR/profile-NAME.txt)")
    ap.add_argument("--generate-only", action="store_true", help="generate the checkpoints and stop")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be >= 1")
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    json_out = args.json_out or workdir / "results.json"
    names = args.only or list(LAYOUTS)

    results: dict[str, Any] = {
        "schema": 1,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "scale": args.scale, "reps": args.reps, "warmup": args.warmup,
        "machine": machine_info(),
        "commands": {"ckptlint": " ".join(Path(c).name if i == 0 else c for i, c in enumerate(ckptlint_cmd()))
                     + " check PATH --format json > /dev/null"},
        "checkpoints": {},
    }
    paths: dict[str, tuple[Path, dict[str, Any], BenchSpec]] = {}
    for name in names:
        spec = LAYOUTS[name](args.scale)
        fresh = not args.generate_only and not is_cached(spec, args.scale, workdir)
        if fresh:
            # Generated by a child process: on Linux a process this one starts later reports in wait4's
            # ru_maxrss at least this process's own peak (the peak of the image exec replaced is kept),
            # so generating the million-tensor checkpoint here (~800 MB) would become every measured
            # command's "peak RSS".
            subprocess.run([PY, str(Path(__file__).resolve()), "--generate-only", "--only", name, "--scale", args.scale,
                            "--workdir", str(workdir)], check=True)
        path, gen = ensure_checkpoint(spec, args.scale, workdir, log)
        if fresh:
            gen = {"cached": False, "seconds": json.loads((workdir / f"{name}-{args.scale}.stamp.json").read_text())
                   .get("generation_s")}
        paths[name] = (path, gen, spec)
    if args.generate_only:
        return 0

    results["bytecode"] = compile_bytecode(log)
    # (startup takes ~15 ms a run and varies by a few ms: at full scale the medians come from 30 runs)
    startup_reps = max(30 if args.scale == "full" else 5, args.reps)
    log(f"startup: python -c pass vs ckptlint --version ({startup_reps} reps)")
    results["startup"] = measure_startup(startup_reps, args.warmup)
    results["import_profile"] = import_profile()
    for name, (path, gen, spec) in paths.items():
        log(f"measuring {name} ({args.scale}): {args.reps} reps + {args.warmup} warm-up")
        desc = describe_checkpoint(path)
        # the million-tensor check is compared with the DeepSeek-V3 one: both run in its loop
        paired = paths["deepseek"][0] if name == "million" and "deepseek" in paths else None
        m = measure_checkpoint(path, args.reps, args.warmup, log, paired)
        if paired is not None:
            m["ckptlint_paired"]["checkpoint"] = "deepseek"
        entry: dict[str, Any] = {"description": spec.description, "dir": path.name, "generation": gen,
                                 "tensors": m["floor"]["tensors"], **desc, **m}
        entry["ratio_ckptlint_floor"] = m["ckptlint"]["median_s"] / m["floor"]["median_s"]
        entry["ratio_safe_open_floor"] = m["safe_open"]["median_s"] / m["floor"]["median_s"]
        entry["ratio_module_pass_floor"] = m["module_pass"]["median_s"] / m["floor"]["median_s"]
        entry["ratio_ckptlint_module_pass"] = m["ckptlint"]["median_s"] / m["module_pass"]["median_s"]
        if args.profile:
            prof_file = workdir / f"profile-{name}.txt"
            r = run_measured([PY, str(HERE / "phases.py"), str(path), "--profile", str(prof_file), "--top", "25"],
                             capture=True)
            if r["rc"] == 0:
                entry["profile"] = json.loads(r["stdout"])
                entry["profile"]["file"] = prof_file.name
            else:
                entry["profile"] = {"error": r["stderr"][-2000:]}
        results["checkpoints"][name] = entry
    results["acceptance"] = acceptance(results)
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(results, indent=2) + "\n")
    print(fmt_table(results))
    log(f"results written to {json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
