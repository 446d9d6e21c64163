"""Write ckptlint's outputs on every shipped fixture to a directory, for before/after comparisons.

    python scripts/snapshot_outputs.py OUT_DIR

For each checkpoint under ``fixtures/``: ``check`` in every format on every verified release, under a
few deployments; ``plan`` (text and JSON) and ``fix`` (the diff) per release; ``inspect``. Each
command's exit code, stdout and stderr go to one file. A behaviour-preserving change leaves
``diff -r before after`` empty.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DEPLOYMENTS = {
    "default": [],
    "no-spec": ["--no-speculative"],
    "h100-tp8": ["--gpu", "h100", "--tp", "8"],
    "b200": ["--gpu", "b200"],
    "rocm-ep8": ["--platform", "rocm", "--tp", "8", "--ep", "8"],
    "no-fusion-dpa": ["--disable-shared-experts-fusion", "--tp", "4", "--dp-attention"],
}


def run(args: list[str]) -> str:
    from ckptlint import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    text = f"$ ckptlint {' '.join(args)}\nexit {code}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"
    # the github format's stop-commands token is random per run
    return re.sub(r"ckptlint-[0-9a-f]{32}", "ckptlint-TOKEN", text)


def main(argv: list[str]) -> int:
    from ckptlint.targets import list_targets

    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    targets = [t.id for t in list_targets()]
    every = ["--target", "sglang", "--target", "vllm"]
    fixtures = sorted(p.parent for p in (ROOT / "fixtures").rglob("config.json"))
    for fx in fixtures:
        rel = fx.relative_to(ROOT)
        name = str(fx.relative_to(ROOT / "fixtures")).replace("/", "__")
        d = out / name
        d.mkdir(exist_ok=True)
        base = [str(rel), "--isolated", "-q"]
        for fmt in ("text", "json", "sarif", "github"):
            (d / f"check-{fmt}.txt").write_text(run(["check", *base, "-f", fmt, *every]))
        for dep, flags in DEPLOYMENTS.items():
            if dep != "default":
                (d / f"check-json-{dep}.txt").write_text(run(["check", *base, "-f", "json", *every, *flags]))
        for t in targets:
            tn = t.replace("==", "-")
            (d / f"plan-{tn}.txt").write_text(run(["plan", str(rel), "--isolated", "-t", t]))
            (d / f"plan-json-{tn}.txt").write_text(run(["plan", str(rel), "--isolated", "-t", t, "-f", "json"]))
            (d / f"fix-{tn}.txt").write_text(run(["fix", str(rel), "--isolated", "-t", t]))
        (d / "inspect.txt").write_text(run(["inspect", str(rel)]))
        (d / "inspect-h100-tp8.txt").write_text(run(["inspect", str(rel), "--gpu", "h100", "--tp", "8"]))
    for extra in (["targets"], ["targets", "-f", "json"], ["rules"], ["rules", "-f", "json"],
                  ["rules", "-f", "markdown"], ["gpus"]):
        (out / f"{'-'.join(extra)}.txt").write_text(run(extra))
    print(f"wrote {len(fixtures)} fixtures' outputs to {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    import os

    os.chdir(ROOT)
    raise SystemExit(main(sys.argv[1:]))
