"""``ckptlint upgrade --from T1 --to T2 CHECKPOINT…``: which checkpoints break, or get fixed, when the
server moves from release T1 to release T2.

Each checkpoint is checked on both releases (concurrently, as ``check`` does for several) and its two
verdicts compared: ``breaks`` (it loads on T1 and not on T2: will not load, wrong outputs, or the
release does not support it), ``fixed`` (the reverse), ``worse`` / ``better`` (the verdict changes
but it loads, or fails, on both), ``unknown`` (either release has no verdict: not simulated, newer than
the target data, or a container-only check), ``unchanged``. The exit code is 1 when a checkpoint breaks,
gets worse or is unknown (fail closed), 2 when one could not be checked.
"""

from typing import Annotated, Optional

import typer

from ckptlint.cli import common
from ckptlint.cli.common import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, Format, SharedArgs, usage_error

_RANK = {"loads": 0, "degraded": 1, "wrong-outputs": 2, "will-not-load": 3, "not-supported": 3, "no-verdict": 0}
_LOADS = ("loads", "degraded")


def change(before: str, after: str) -> str:
    if "no-verdict" in (before, after):
        return "unknown"
    if (before in _LOADS) != (after in _LOADS):
        return "breaks" if before in _LOADS else "fixed"
    if _RANK[after] != _RANK[before]:
        return "worse" if _RANK[after] > _RANK[before] else "better"
    return "unchanged"


@common.with_options
def upgrade(
    path: Annotated[list[str], typer.Argument(help="Checkpoints: directories, files of a checkpoint (a .safetensors shard stands for the checkpoint beside it), or hf://ORG/REPO[@REVISION].")],
    from_: Annotated[str, typer.Option("--from", help="The release the server runs now, FRAMEWORK==VERSION.")],
    to: Annotated[str, typer.Option("--to", help="The release to upgrade to, FRAMEWORK==VERSION.")],
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.text,
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the report to this file.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    *,
    shared: SharedArgs,
) -> None:
    """Which checkpoints break, or get fixed, when the server is upgraded from one release to another."""
    from ckptlint import batch

    chosen = []
    for spec, opt in ((from_, "--from"), (to, "--to")):
        ts = common.targets([spec])
        if len(ts) != 1:
            usage_error(f"{opt} takes one release: FRAMEWORK==VERSION")
        chosen.append(ts[0])
    releases = [t.id for t in chosen]
    if releases[0] == releases[1]:
        usage_error("--from and --to name the same release")
    req = batch.CheckRequest(shared=shared, targets=common.ResolvedTargets(tuple(chosen)), formats=(),
                             many=len(path) > 1)
    outcomes = batch.run_many(list(path), req, on_result=None if quiet else _progress(len(path)))
    rows = [_row(o, releases) for o in outcomes]
    text = _json(rows, releases) if format is Format.json else _text(rows, releases)
    common.emit(text, output)
    if any(r["error"] for r in rows):
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_FINDINGS if any(r["change"] in ("breaks", "worse", "unknown") for r in rows) else EXIT_OK)


def _progress(total: int):
    def on_result(i: int, o) -> None:
        if total > 1:
            typer.echo(f"ckptlint: [{i + 1}/{total}] {o.path}", err=True)
    return on_result


def _row(o, releases: list[str]) -> dict:
    if o.error is not None:
        return {"checkpoint": o.path, "error": o.error, "change": None}
    by = dict(zip(o.targets, o.verdicts))
    before, after = by[releases[0]], by[releases[1]]
    row = {"checkpoint": o.path, "error": None, "before": before, "after": after,
           "change": change(before["verdict"], after["verdict"])}
    return row


def _why(row: dict) -> str:
    if row["change"] == "unknown":
        v = row["after"] if row["after"]["verdict"] == "no-verdict" else row["before"]
        return f": {v['no_verdict']['why']}"
    v = row["after"] if row["change"] in ("breaks", "worse") else row["before"]
    b = v.get("because")
    if not b or row["change"] == "unchanged":
        return ""
    return f": {b['code']} {b.get('module') or b.get('file') or ''}".rstrip()


def _text(rows: list[dict], releases: list[str]) -> str:
    from ckptlint.render.safe import clean, defuse_commands

    counts = {c: sum(1 for r in rows if r["change"] == c) for c in ("breaks", "worse", "unknown", "fixed", "better", "unchanged")}
    errors = sum(1 for r in rows if r["error"])
    head = (f"Upgrading {releases[0]} -> {releases[1]}: " + ", ".join(f"{n} {c}" for c, n in counts.items() if n)
            + (f", {errors} could not be checked" if errors else ""))
    w0 = max(len("checkpoint"), *(len(clean(r["checkpoint"])) for r in rows))
    w1 = max(len(releases[0]), *(len(r["before"]["label"]) for r in rows if not r["error"]), 0)
    w2 = max(len(releases[1]), *(len(r["after"]["label"]) for r in rows if not r["error"]), 0)
    lines = [head, "", f"{'checkpoint'.ljust(w0)}  {releases[0].ljust(w1)}  {releases[1].ljust(w2)}  change"]
    for r in rows:
        name = clean(r["checkpoint"]).ljust(w0)
        if r["error"]:
            lines.append(f"{name}  error: {clean(r['error'])}")
            continue
        ch = r["change"].upper() if r["change"] in ("breaks", "worse", "unknown") else r["change"]
        lines.append(f"{name}  {r['before']['label'].ljust(w1)}  {r['after']['label'].ljust(w2)}  "
                     f"{ch}{clean(_why(r))}")
    return defuse_commands("\n".join(lines)) + "\n"


def _json(rows: list[dict], releases: list[str]) -> str:
    from ckptlint.render.safe import dumps

    return dumps({"from": releases[0], "to": releases[1], "checkpoints": rows}, indent=2) + "\n"
