"""``ckptlint inspect``: bytes by dtype and scheme, per-GPU weights under TP/EP, KV-cache room, fit."""

import sys
from typing import Annotated, Optional

import typer

from ckptlint.cli import common
from ckptlint.cli.common import EXIT_FINDINGS, EXIT_OK, Format, KvFractionOpt, PathArg, usage_error


def inspect(
    path: PathArg,
    target: Annotated[Optional[list[str]], typer.Option("--target", "-t", help="FRAMEWORK==VERSION whose module layout is used, once (default: the newest verified SGLang release).")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU (see `ckptlint gpus`; default: the format's native GPU).")] = None,
    tp: Annotated[int, typer.Option("--tp", min=1, max=65536, help="Tensor-parallel size.")] = 1,
    ep: Annotated[Optional[int], typer.Option("--ep", min=1, max=65536, help="Expert-parallel size (divides --tp).")] = None,
    dp_attention: Annotated[bool, typer.Option("--dp-attention", help="Data-parallel attention (attention whole on every rank).")] = False,
    speculative: Annotated[Optional[bool], typer.Option("--speculative/--no-speculative")] = None,
    reserve_gib: Annotated[Optional[float], typer.Option("--reserve-gib", min=0, help="Runtime reserve per GPU (default 8% of its memory).")] = None,
    kv_cache_fraction: KvFractionOpt = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.text,
    endpoint: Annotated[Optional[str], typer.Option("--endpoint", help="Hub URL for hf://ORG/REPO[@REVISION] paths (default: $HF_ENDPOINT or https://huggingface.co).")] = None,
) -> None:
    """Parameters and bytes by dtype and scheme, per-GPU weight bytes under TP/EP, KV-cache room, and
    whether it fits (exit 1 when it does not, or when the KV cache gets less than its headroom)."""
    from ckptlint.deployment import Deployment
    from ckptlint.inspect import inspect_checkpoint, render_json, render_text

    key, ep_n = common.validate(gpu, tp, ep)
    if target and len(target) > 1:
        usage_error(f"inspect takes one release, --target was given {len(target)} times ({', '.join(target)})")
    ts = common.targets(target) if target else [common.newest_sglang()]
    if len(ts) != 1:
        usage_error("inspect takes exactly one release: FRAMEWORK==VERSION")
    path = common.checkpoint_path(path)
    ckpt = common.load(path, endpoint)
    dep = Deployment(speculative=speculative, tp=tp, gpu=key, ep=ep_n, dp_attention=dp_attention)
    ins = inspect_checkpoint(ckpt, ts[0], dep, None if reserve_gib is None else int(reserve_gib * 2**30),
                             kv_cache_fraction)
    sys.stdout.write(render_json(ins) if format is Format.json else render_text(ins))
    raise typer.Exit(EXIT_FINDINGS if ins.fit not in (None, "fits") else EXIT_OK)
