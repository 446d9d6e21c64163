"""Deployment-shape rules (DP8xx): the GPU a checkpoint is served on and how TP/EP split it.

Everything framework- or GPU-specific comes from data: ``ckptlint/hardware/gpus.toml`` (which
formats run natively, emulated or not at all on each GPU, per framework) and
``ckptlint/hardware/parallel.toml`` (which module classes are column/row parallel or replicated,
the errors each framework raises). The GPU is ``--gpu`` or, by default, the GPU on which the
checkpoint's format runs natively (docs/decisions.md#default-gpu-per-format); every finding names the GPU it assumed.
"""

from __future__ import annotations

import math
import operator
from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.hardware import architecture, format_key, support
from ckptlint.hardware.parallel import head_split
from ckptlint.rules.base import Rule, RuleContext


def _gpu(ctx: RuleContext):
    return ctx.plan.gpu_info if ctx.plan is not None else None


_EXPERT = operator.attrgetter("expert")


def _quantized(plan):
    for rm in plan.modules.values():
        if rm.decision is not None and rm.decision.quantized and rm.decision.scheme is not None:
            yield rm


def _parallel(ctx: RuleContext):
    """The framework's sharding data, when the plan has placements to judge."""
    plan = ctx.plan
    if plan is None or not plan.simulated or plan.quant is None:
        return None
    return plan.parallel


class GpuFormatSupport(Rule):
    """
    ## What it does
    Looks up every quantization format the load plan builds (FP8, block FP8, MXFP4, NVFP4, INT4,
    ...) in ckptlint's GPU data for the GPU the deployment assumes (`--gpu`, or the format's native
    GPU), for the target's framework, and reports a format that the framework cannot run there
    (load error), runs only through weight dequantization / emulation or weight-only fallback
    kernels (degraded, with the reason), or for which ckptlint has no established fact (info).

    ## Why is this bad?
    A format without a kernel stops the server at start-up; an emulated one loads and answers
    correctly but computes in BF16 after dequantizing the weights every forward pass, losing the
    speed and often the memory saving the quantization was for.

    ## Example
    A Quark MXFP4 checkpoint with `--gpu mi300x` on vLLM 0.33.0: gfx942 has no FP4 hardware
    (`supports_mx()` is only true on gfx95x), so QuarkOCP_MX dequantizes the weights to BF16 and
    the MoE uses the emulation backend. A ModelOpt NVFP4 checkpoint with `--gpu mi355x` on SGLang:
    its NVFP4 kernels are CUDA-only.

    ## How to fix
    Serve the checkpoint on a GPU that runs the format natively (`ckptlint gpus`), or use an
    export in a format the GPU supports (e.g. MXFP4 for MI355X, NVFP4 for B200, FP8 for MI300X).
    """

    code = "DP801"
    name = "gpu-format-support"
    summary = "The framework cannot run the checkpoint's quant format natively on the assumed GPU"
    consequences = (Consequence.LOAD_ERROR, Consequence.DEGRADED, Consequence.HYGIENE)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated or plan.quant is None:
            return
        gpu = _gpu(ctx)
        if gpu is None:
            return
        formats: dict[str, list[str]] = {}
        for rm in _quantized(plan):
            fmt = format_key(plan.quant.method, rm.decision.scheme.name)
            if fmt is not None:
                formats.setdefault(fmt, []).append(rm.name)
        fw = plan.target.framework
        for fmt, modules in sorted(formats.items()):
            s = support(gpu, fmt, fw)
            data = {"gpu": gpu.key, "architecture": gpu.architecture, "format": fmt, "modules": len(modules)}
            assumptions = [ctx.deployment.gpu_assumption(gpu)]
            if s is None:
                yield self.finding(ctx, Consequence.HYGIENE,
                                   f"ckptlint has no data on whether {fw} runs {fmt} on {gpu.label}",
                                   file="config.json", assumptions=assumptions, data=data)
                continue
            data.update(level=s.level, source=s.source)
            where = f"{len(modules)} module{'s' if len(modules) != 1 else ''} built {fmt}"
            if s.level == "unsupported":
                yield self.finding(ctx, Consequence.LOAD_ERROR,
                                   f"{fw} cannot run {fmt} on {gpu.label} ({where}): {s.note}",
                                   file="config.json", assumptions=assumptions, data=data,
                                   hint="serve on a GPU that supports the format (`ckptlint gpus`)")
            elif s.level in ("emulated", "fallback"):
                how = "only emulated" if s.level == "emulated" else "only with weight-only fallback kernels"
                yield self.finding(ctx, Consequence.DEGRADED,
                                   f"{fw} runs {fmt} on {gpu.label} {how} ({where}): {s.note}",
                                   file="config.json", assumptions=assumptions, data=data,
                                   hint="expect BF16-class speed; a GPU with native support is listed by `ckptlint gpus`")
            elif s.level == "unknown":
                yield self.finding(ctx, Consequence.HYGIENE,
                                   f"not established whether {fw} runs {fmt} natively on {gpu.label}: {s.note}",
                                   file="config.json", assumptions=assumptions, data=data)


class TensorParallelIndivisible(Rule):
    """
    ## What it does
    For every module the load plan builds quantized, takes the dimension the framework shards for
    that module class (column-parallel: out features; row-parallel: in features; replicated: none;
    FusedMoE: the intermediate size over TP/EP ranks and whole experts over EP ranks) from
    ckptlint's parallelism data and checks that it splits evenly over the deployment's `--tp` /
    `--ep`.

    ## Why is this bad?
    The parallel layers divide their sizes with an assertion: the server stops while building
    the model (`AssertionError: 2048 is not divisible by 6`). SGLang also asserts that the routed
    experts divide evenly over the EP ranks; vLLM gives the first ranks one expert more.

    ## Example
    A DeepSeek-V3-shaped checkpoint (MoE intermediate size 2048) at `--tp 6`; or 257 routed
    experts at `--ep 8` on SGLang.

    ## How to fix
    Pick a TP/EP size that divides the sharded dimensions (for DeepSeek-V3: 1, 2, 4, 8, 16 ...).
    """

    code = "DP802"
    name = "tp-shard-indivisible"
    summary = "A quantized module's sharded dimension does not split evenly over the TP/EP ranks"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        fw = _parallel(ctx)
        if fw is None:
            return
        assumptions = [ctx.deployment.parallel_assumption()]
        for rm in _quantized(ctx.plan):
            p = rm.placement
            if p is None:
                continue
            if p.dim == "moe":
                experts = len(set(map(_EXPERT, rm.shards)) - {None})
                if p.ep > 1 and experts and experts % p.ep and fw.ep_uneven == "error":
                    yield self.finding(ctx, Consequence.LOAD_ERROR,
                                       f"{experts} routed experts of {rm.name} do not split evenly over EP={p.ep}",
                                       module=rm.name, error_text=fw.ep_error or None, assumptions=assumptions,
                                       data={"experts": experts, "ep": p.ep, "source": fw.ep_source})
                inter = _moe_intermediate(rm, ctx.plan.arch)
                if p.tp > 1 and inter and inter % p.tp:
                    yield self.finding(ctx, Consequence.LOAD_ERROR,
                                       f"the MoE intermediate size {inter} of {rm.name} does not split over "
                                       f"{p.tp} tensor-parallel ranks", module=rm.name, assumptions=assumptions,
                                       data={"size": inter, "tp": p.tp, "source": fw.divisibility_source})
                continue
            if p.tp <= 1 or p.dim not in ("out", "in"):
                continue
            if p.heads is not None:  # QKVParallelLinear: whole heads per rank, k/v replicated if few
                if head_split(p.heads, p.tp) is None:
                    q, kv, _ = p.heads
                    yield self.finding(ctx, Consequence.LOAD_ERROR,
                                       f"{rm.name}: {q} attention heads and {kv} key/value heads do not split over "
                                       f"TP={p.tp} (each rank needs whole heads; k/v heads are replicated only when "
                                       "TP is a multiple of their number)", module=rm.name,
                                       error_text=fw.qkv.heads_error, assumptions=assumptions,
                                       data={"heads": q, "kv_heads": kv, "tp": p.tp, "source": fw.qkv.source})
                continue
            for s in rm.shards:
                size = s.stored.logical_n if p.dim == "out" else s.stored.logical_k
                if size and size % p.tp:
                    what = "out features" if p.dim == "out" else "in features"
                    yield self.finding(ctx, Consequence.LOAD_ERROR,
                                       f"{rm.name} is {'column' if p.dim == 'out' else 'row'}-parallel: its {what} "
                                       f"({size}, {s.ckpt_module}) do not split over TP={p.tp}",
                                       module=rm.name, tensors=[t.name for t in s.tensors],
                                       error_text=fw.divisibility_error.format(n=size, tp=p.tp),
                                       assumptions=assumptions,
                                       data={"size": size, "tp": p.tp, "source": fw.divisibility_source})
                    break


def _moe_intermediate(rm, arch) -> int | None:
    """A FusedMoE's intermediate size: the gate/up projections' out features or the down projection's
    in features (the architecture's expert projection names, ``expert_w13`` / ``expert_w2``)."""
    for s in rm.shards:
        if s.proj in arch.expert_w13 and s.stored.logical_n:
            return s.stored.logical_n
    for s in rm.shards:
        if s.proj in arch.expert_w2 and s.stored.logical_k:
            return s.stored.logical_k
    return None


class Fp8BlockPartition(Rule):
    """
    ## What it does
    For block-FP8 modules (`weight_block_size: [128, 128]`), checks what the framework checks while
    building each layer: every column-parallel (or merged) output partition a multiple of
    `block_n`, every row-parallel input partition a multiple of `block_k`, and the FusedMoE
    intermediate size per partition a multiple of both, at the deployment's `--tp`/`--ep`.

    ## Why is this bad?
    The block scales could not be split with the weight; the server stops with
    `ValueError: Weight output_partition_size = N is not divisible by weight quantization block_n = 128.`

    ## Example
    DeepSeek-V3 FP8 at `--tp 32`: the dense MLP's gate/up partition is 18432 / 32 = 576, and the
    expert intermediate size 2048 / 32 = 64, neither a multiple of 128. The same checkpoint is
    clean at `--tp 8` and `--tp 16`.

    ## How to fix
    Use a smaller TP (or EP for the experts) so that every partition is a multiple of 128, or
    exclude the offending layers from quantization.
    """

    code = "DP803"
    name = "fp8-block-partition"
    summary = "A block-FP8 partition at this TP size is not a multiple of the quantization block"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        fw = _parallel(ctx)
        if fw is None:
            return
        assumptions = [ctx.deployment.parallel_assumption()]
        for rm in _quantized(ctx.plan):
            scheme = rm.decision.scheme
            p = rm.placement
            if scheme.block is None or p is None:
                continue
            bn, bk = scheme.block
            hit = _block_violation(rm, p, bn, bk, fw, ctx.plan.arch, ctx.plan.method)
            if hit is not None:
                template, size, block, tensors = hit
                yield self.finding(ctx, Consequence.LOAD_ERROR,
                                   f"partition {size} at TP={p.tp} is not a multiple of the FP8 block {block}",
                                   module=rm.name, tensors=tensors,
                                   error_text=template.format(size=size, block=block), assumptions=assumptions,
                                   data={"size": size, "block": block, "tp": p.tp, "source": fw.block_source})


def _moe_refined(rm, part: int, bn: int, bk: int, method, arch) -> bool:
    """vLLM 0.30+ refines the checkpoint's MoE block to gcd(block_n, block_k, partition, hidden) when
    that is at least ``method.moe_block_refine_min`` (refine_fp8_moe_block_shape): no error then."""
    least = method.moe_block_refine_min if method is not None else None
    if not least:
        return False
    hidden = next((s.stored.logical_k for s in rm.shards if s.proj in arch.expert_w13 and s.stored.logical_k), None)
    return bool(hidden) and math.gcd(bn, bk, part, hidden) >= least


def _out_sizes(rm, p, fw):
    """(shard, per-rank out features) of a column-parallel module; a QKVParallelLinear with known
    heads holds whole heads per rank (k/v heads replicated when fewer than the ranks)."""
    split = head_split(p.heads, p.tp) if p.heads is not None else None
    for s in rm.shards:
        n = s.stored.logical_n
        if split is not None and s.proj in fw.qkv.kv_shards:
            yield s, split[1] * p.heads[2]
        elif split is not None and s.proj in fw.qkv.q_shards:
            yield s, split[0] * p.heads[2]
        elif n and not n % p.tp:
            yield s, n // p.tp


def _block_violation(rm, p, bn: int, bk: int, fw, arch, method=None):
    if p.dim == "moe":
        inter = _moe_intermediate(rm, arch)
        if not inter or inter % p.tp:
            return None  # DP802
        part = inter // p.tp
        if (part % bn or (p.tp > 1 and part % bk)) and _moe_refined(rm, part, bn, bk, method, arch):
            return None
        if part % bn:
            return fw.moe_block_n_error, part, bn, []
        if p.tp > 1 and part % bk:
            return fw.moe_block_k_error, part, bk, []
        return None
    if p.dim == "out":
        merged = len(rm.shards) > 1
        if p.tp <= 1 and not merged:
            return None
        if p.heads is not None and p.tp > 1 and head_split(p.heads, p.tp) is None:
            return None  # DP802
        sizes = list(_out_sizes(rm, p, fw))
        if not (p.tp > 1 or fw.merged_block_check == "all"):
            sizes = [(s, n) for s, n in sizes if s is not rm.shards[-1]]
        for s, n in sizes:
            if n % bn:
                return fw.block_n_error, n, bn, [t.name for t in s.tensors]
    elif p.dim == "in" and p.tp > 1:
        for s in rm.shards:
            k = s.stored.logical_k
            if k and not k % p.tp and (k // p.tp) % bk:
                return fw.block_k_error, k // p.tp, bk, [t.name for t in s.tensors]
    return None


class GroupPartition(Rule):
    """
    ## What it does
    For group-quantized formats (MXFP4: one E8M0 scale per 32 inputs; NVFP4: per 16), checks that
    each rank's slice of the in features is a whole number of groups: row-parallel layers split
    K over TP, and FusedMoE down projections split the intermediate size over TP/EP.

    ## Why is this bad?
    A group that straddles two ranks cannot be given one scale: vLLM refuses such a layer
    (`OCP MX linear layer ... must be divisible by the OCP MX group size 32`), and where no check
    exists the scale grid cannot be split with the weight.

    ## Example
    A Quark MXFP4 MoE whose expert intermediate size is 32, served at `--tp 2`: each rank holds
    16 inputs of the down projection, half a group.

    ## How to fix
    Use a TP size for which K / tp is a multiple of the group size, or EP for the experts.
    """

    code = "DP804"
    name = "group-partition"
    summary = "A rank's slice of a group-quantized layer's inputs is not a whole number of groups"
    consequences = (Consequence.LOAD_ERROR,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        fw = _parallel(ctx)
        if fw is None:
            return
        assumptions = [ctx.deployment.parallel_assumption()]
        for rm in _quantized(ctx.plan):
            scheme = rm.decision.scheme
            p = rm.placement
            if not scheme.group or p is None or p.tp <= 1:
                continue
            g = scheme.group
            if p.dim == "moe":
                inter = _moe_intermediate(rm, ctx.plan.arch)
                size = inter // p.tp if inter and not inter % p.tp else None
                text = None
            elif p.dim == "in":
                ks = [s.stored.logical_k for s in rm.shards if s.stored.logical_k]
                size = ks[0] // p.tp if ks and not ks[0] % p.tp else None
                raises = any(s.method == ctx.plan.quant.method and s.scheme == scheme.name for s in fw.group_error_schemes)
                text = fw.group_error.format(module=rm.name, size=size, group=g) if (fw.group_error and raises) else None
            else:
                continue
            if size is not None and size % g:
                yield self.finding(ctx, Consequence.LOAD_ERROR,
                                   f"each rank holds {size} of its in features at TP={p.tp}, not a "
                                   f"multiple of the {scheme.name} group size {g}",
                                   module=rm.name, error_text=text, assumptions=assumptions,
                                   data={"size": size, "group": g, "tp": p.tp, "source": fw.group_source})


class Fp8FnuzConversion(Rule):
    """
    ## What it does
    Notes, once per target, that an FP8 (e4m3fn) checkpoint served on a GPU whose FP8 hardware is
    the e4m3fnuz variant (AMD MI300X/MI325X, gfx942) is converted while loading.

    ## Why is this bad?
    It is not a defect: the frameworks rewrite the weights (`normalize_e4m3fn_to_e4m3fnuz`): the
    bit pattern 0x80 (-0 in fn, NaN in fnuz) becomes 0, the same bits mean half the value in fnuz,
    so weight and input scales are doubled, and the largest finite value is 240 instead of 448.
    Numerics can differ slightly from a CUDA deployment.

    ## Example
    DeepSeek-V3 block FP8 with `--gpu mi300x`.

    ## How to fix
    Nothing to fix; compare accuracy against a reference deployment if bit-exactness matters, or
    serve on gfx950 (MI350X/MI355X), which uses OCP e4m3fn.
    """

    code = "DP805"
    name = "fp8-fnuz-conversion"
    summary = "FP8 e4m3fn weights are converted to e4m3fnuz on this GPU (scales doubled, max 240)"
    consequences = (Consequence.HYGIENE,)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan = ctx.plan
        if plan is None or not plan.simulated or plan.quant is None:
            return
        gpu = _gpu(ctx)
        if gpu is None or architecture(gpu).fp8_dtype != "e4m3fnuz":
            return
        fp8 = [rm.name for rm in _quantized(plan)
               if format_key(plan.quant.method, rm.decision.scheme.name) in ("fp8", "fp8_block")]
        if not fp8:
            return
        yield self.finding(ctx, Consequence.HYGIENE,
                           f"{gpu.label} computes FP8 as e4m3fnuz: the {len(fp8)} FP8 modules are converted at load "
                           "(0x80 -> 0, weight and input scales doubled, largest value 240 instead of 448)",
                           file="config.json", assumptions=[ctx.deployment.gpu_assumption(gpu)],
                           data={"gpu": gpu.key, "modules": len(fp8),
                                 "source": "docs/frameworks/formats.md#fp8-fnuz-conversion (normalize_e4m3fn_to_e4m3fnuz); "
                                           "vllm 0.33.0 platforms/rocm.py is_fp8_fnuz (gfx94)"})


DEPLOYMENT_RULES = (GpuFormatSupport, TensorParallelIndivisible, Fp8BlockPartition, GroupPartition, Fp8FnuzConversion)
