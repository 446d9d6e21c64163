"""ckptlint's phases, measured in one fresh process: import, target resolution, read,
simulate, rules (``Report.timings``) and JSON render. Prints one JSON object on stdout.

    python phases.py CHECKPOINT_DIR [--profile FILE] [--top N]

With ``--profile FILE`` the work after the imports runs under cProfile: FILE gets the top
functions by cumulative and by self time, and the JSON gets the top N of each (no phase times:
profiling distorts them).
"""

from __future__ import annotations

import sys
import time

t_start = time.perf_counter()
import ckptlint.engine  # noqa: E402
import ckptlint.render.json_out  # noqa: E402
import ckptlint.targets  # noqa: E402

t_engine = time.perf_counter()
import ckptlint.cli  # noqa: E402,F401
import ckptlint.cli.argv  # noqa: E402,F401  (what `ckptlint check` imports to parse its command line:
import ckptlint.cli.check  # noqa: E402,F401  typer only for help and errors)

t_cli = time.perf_counter()


def work(path: str) -> dict:
    from ckptlint.deployment import Deployment

    t0 = time.perf_counter()
    targets = ckptlint.targets.newest_targets()
    t1 = time.perf_counter()
    report = ckptlint.engine.check(path, targets, Deployment())
    t2 = time.perf_counter()
    text = ckptlint.render.json_out.render(report)
    t3 = time.perf_counter()
    ck = report.checkpoint
    return {
        "targets": [t.id for t in targets],
        "targets_s": t1 - t0,
        "check_s": t2 - t1,
        "read_s": report.timings.get("read"),
        "simulate_s": report.timings.get("simulate"),
        "rules_s": report.timings.get("rules"),
        "render_s": t3 - t2,
        "tensors": len(ck.tensors),
        "shards": len(ck.shards),
        "bytes_read": ck.bytes_read,
        "findings": len(report.findings),
        "findings_by_code": _count(f.code for f in report.findings),
        "output_bytes": len(text.encode("utf-8")),
    }


def _count(items) -> dict:
    out: dict = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def _top(stats, key: str, n: int) -> list[dict]:
    import pstats

    st = pstats.Stats(stats)
    st.sort_stats(key)
    rows = []
    for func in st.fcn_list[:n]:  # type: ignore[attr-defined]
        cc, nc, tt, ct, _ = st.stats[func]  # type: ignore[attr-defined]
        filename, line, name = func
        short = filename.split("site-packages/")[-1].split("/src/")[-1]
        rows.append({"function": f"{short}:{line}({name})", "calls": nc, "self_s": round(tt, 4),
                     "cumulative_s": round(ct, 4)})
    return rows


def main(argv: list[str]) -> None:
    import json

    path = argv[0]
    profile_out = None
    top = 25
    if "--profile" in argv:
        profile_out = argv[argv.index("--profile") + 1]
    if "--top" in argv:
        top = int(argv[argv.index("--top") + 1])
    result: dict = {"import_engine_s": t_engine - t_start, "import_cli_s": t_cli - t_engine,
                    "import_s": t_cli - t_start}
    if profile_out is None:
        t0 = time.perf_counter()
        result.update(work(path))
        result["total_s"] = time.perf_counter() - t0
    else:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        r = work(path)
        prof.disable()
        result["profiled_total_s"] = time.perf_counter() - t0
        result.update({k: r[k] for k in ("tensors", "shards", "findings")})
        result["top_cumulative"] = _top(prof, "cumulative", top)
        result["top_self"] = _top(prof, "tottime", top)
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        buf.write(f"# ckptlint check {path} (newest targets), profiled wall {result['profiled_total_s']:.3f} s\n")
        buf.write("\n## by cumulative time\n")
        st.sort_stats("cumulative").print_stats(top)
        buf.write("\n## by self time\n")
        st.sort_stats("tottime").print_stats(top)
        with open(profile_out, "w", encoding="utf-8") as fh:
            fh.write(buf.getvalue())
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
