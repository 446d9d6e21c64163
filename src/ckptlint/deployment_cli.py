"""The deployment-shape commands and option checks (``ckptlint gpus``, ``ckptlint inspect``,
``--gpu/--ep/--dp-attention``), kept apart from cli.py, which registers them."""

import sys
from typing import Annotated, Optional


def validate(gpu: Optional[str], tp: int, ep: Optional[int]) -> tuple:
    """Canonical GPU key and EP size; a usage error (exit 2) for an unknown GPU or an EP that does
    not divide TP (both frameworks split the MoE intermediate size over TP/EP ranks)."""
    from ckptlint.cli import _usage_error
    from ckptlint.hardware import get_gpu, gpu_data

    key = None
    if gpu is not None:
        g = get_gpu(gpu)
        if g is None:
            _usage_error(f"unknown GPU {gpu!r}; known: {', '.join(gpu_data().gpus)} (see `ckptlint gpus`)")
        key = g.key
    ep = ep or 1
    if ep > tp or tp % ep:
        _usage_error(f"--ep {ep} must divide --tp {tp} (experts are split over EP ranks inside the TP group)")
    return key, ep


def register(app) -> None:
    import typer

    from ckptlint.cli import EXIT_OK, Format, _targets, _usage_error  # noqa: F401 (Format: option types)
    globals()['Format'] = Format

    @app.command()
    def gpus(format: Annotated[Format, typer.Option("--format", "-f")] = Format.text) -> None:
        """List the GPUs ckptlint knows: architecture, memory, and which quant formats run there."""
        import json

        from ckptlint.hardware import FORMAT_KEYS, architecture, gpu_data, support

        data = gpu_data()
        if format is Format.json:
            out = []
            for g in data.gpus.values():
                a = architecture(g)
                fmts = {f: {fw: (s.model_dump() if s else None) for fw in ("sglang", "vllm")
                            for s in [support(g, f, fw)]} for f in FORMAT_KEYS}
                out.append({**g.model_dump(), "memory_bytes": g.memory_bytes, "platform": a.platform,
                            "fp8_dtype": a.fp8_dtype, "architecture_source": a.source, "formats": fmts})
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
            raise typer.Exit(EXIT_OK)
        short = {"native": "yes", "fallback": "w-only", "emulated": "emul", "unsupported": "NO", "unknown": "?"}
        head = f"{'gpu':<14}{'arch':<8}{'memory':<16}" + "".join(f"{f:<15}" for f in FORMAT_KEYS)
        lines = [head, " " * 38 + "(sglang/vllm: yes native, w-only weight-only fallback, emul emulated, NO load error, ? unknown)"]
        for g in data.gpus.values():
            cells = []
            for f in FORMAT_KEYS:
                a, b = (support(g, f, fw) for fw in ("sglang", "vllm"))
                cells.append(f"{short[a.level] if a else '-'}/{short[b.level] if b else '-'}")
            mem = f"{g.memory:g} {g.memory_unit} {g.memory_kind}"
            lines.append(f"{g.key:<14}{g.architecture:<8}{mem:<16}" + "".join(f"{c:<15}" for c in cells))
        sys.stdout.write("\n".join(lines) + "\n")
        raise typer.Exit(EXIT_OK)

    @app.command()
    def inspect(
        path: Annotated[str, typer.Argument(help="Checkpoint directory.")],
        target: Annotated[Optional[str], typer.Option("--target", "-t", help="FRAMEWORK==VERSION whose module layout is used (default: the newest SGLang).")] = None,
        gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU (see `ckptlint gpus`; default: the format's native GPU).")] = None,
        tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel size.")] = 1,
        ep: Annotated[Optional[int], typer.Option("--ep", min=1, help="Expert-parallel size (divides --tp).")] = None,
        dp_attention: Annotated[bool, typer.Option("--dp-attention", help="Data-parallel attention (attention whole on every rank).")] = False,
        speculative: Annotated[Optional[bool], typer.Option("--speculative/--no-speculative")] = None,
        reserve_gib: Annotated[Optional[float], typer.Option("--reserve-gib", min=0, help="Runtime reserve per GPU (default 8% of its memory).")] = None,
        format: Annotated[Format, typer.Option("--format", "-f")] = Format.text,
    ) -> None:
        """Parameters and bytes by dtype and scheme, per-GPU weight bytes under TP/EP, KV-cache room, fit."""
        from ckptlint.deployment import Deployment
        from ckptlint.inspect import inspect_checkpoint, render_json, render_text
        from ckptlint.reader import NotACheckpoint, load_checkpoint
        from ckptlint.targets import newest_targets

        key, ep_n = validate(gpu, tp, ep)
        ts = _targets([target]) if target else [t for t in newest_targets() if t.framework == "sglang"]
        if len(ts) != 1:
            _usage_error("inspect takes exactly one release: FRAMEWORK==VERSION")
        try:
            ckpt = load_checkpoint(path)
        except NotACheckpoint as exc:
            _usage_error(str(exc))
        dep = Deployment(speculative=speculative, tp=tp, gpu=key, ep=ep_n, dp_attention=dp_attention)
        ins = inspect_checkpoint(ckpt, ts[0], dep, None if reserve_gib is None else int(reserve_gib * 2**30))
        sys.stdout.write(render_json(ins) if format is Format.json else render_text(ins))
        raise typer.Exit(EXIT_OK)
