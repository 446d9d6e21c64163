"""DP806 gpu-memory-fit: the weights each GPU holds under the deployment, against its memory."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.hardware.memory import memory_fit, per_gpu_weights
from ckptlint.hardware.parallel import for_framework
from ckptlint.rules.base import Rule, RuleContext

_TRY_TP = (2, 4, 8, 16, 32, 64)


def _gib(b: float) -> str:
    return f"{b / 2**30:,.2f} GiB"


class GpuMemoryFit(Rule):
    """
    ## What it does
    When the deployment is stated (`--gpu` or `--tp`, or `tp` in the configuration), adds up the
    bytes of every tensor the target's load plan puts on one GPU under that tensor/expert-parallel
    layout (sharded modules split over their ranks, replicated ones whole; the layout is
    `hardware/parallel.toml`, as `ckptlint inspect` uses it), and compares them with the GPU's
    memory (`ckptlint gpus`) minus a runtime reserve (8% of the GPU: activations, CUDA graphs,
    allocator; vLLM's default `gpu_memory_utilization` is 0.92). What is left is the KV cache:

    * the weights alone exceed the GPU's memory: load error (the allocator runs out while the
      weights are loaded);
    * the weights fit but leave nothing for the KV cache: load error (the framework refuses to start);
    * the KV cache gets less than the headroom, by default 10% of the GPU's memory
      (`--kv-cache-fraction`): degraded.

    ## Why is this bad?
    A server that runs out of memory while loading fails minutes into a start-up, after the
    weights were read. With the weights in but no room for the KV cache, SGLang raises
    `RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.`
    (`model_executor/pool_configurator.py`) and vLLM `ValueError: No available memory for the
    cache blocks.` (`v1/core/kv_cache_planning.py`). With a sliver of KV cache the server starts but
    holds few sequences at a time, or (vLLM) refuses to start when one sequence of the model's
    maximum length does not fit.

    ## Example
    A DeepSeek-V3 block-FP8 checkpoint (about 640 GiB of weights) checked with `--gpu h100 --tp 1`:
    one H100's 80 GB cannot hold the weights (load error; the hint names the smallest TP size that
    fits). With `--tp 8` each GPU holds about 80 GiB of weights: still more than it has.

    ## How to fix
    Serve on more GPUs (a larger `--tp`, with `--ep` for MoE experts), on GPUs with more memory, or
    a smaller (more aggressively quantized) checkpoint. For a tight KV cache, a larger TP size or a
    shorter maximum context also helps; `--kv-cache-fraction` states the headroom your service needs.
    """

    code = "DP806"
    name = "gpu-memory-fit"
    summary = "The weights each GPU holds leave too little of its memory, or none, for the KV cache"
    consequences = (Consequence.LOAD_ERROR, Consequence.DEGRADED)

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        plan, dep = ctx.plan, ctx.deployment
        if not dep.memory_check or plan is None or not plan.simulated:
            return
        gpu = plan.gpu_info
        if gpu is None:
            return
        replicated, sharded, _ = per_gpu_weights(plan, dep)
        fit = memory_fit(gpu, round(replicated + sharded), kv_fraction=dep.kv_cache_fraction)
        if fit.fits:
            return
        fw = for_framework(plan.target.framework)
        where = f"one {gpu.label} ({_gib(fit.memory_bytes)}) under {dep.parallel_assumption()}"
        head = f"the weights each GPU holds, {_gib(fit.weights_bytes)},"
        if fit.status == "weights-exceed":
            consequence, error = Consequence.LOAD_ERROR, getattr(fw, "oom_error", "") or None
            message = f"{head} do not fit in {where}"
        elif fit.status == "no-kv-cache":
            consequence, error = Consequence.LOAD_ERROR, getattr(fw, "kv_cache_error", "") or None
            message = (f"{head} with the runtime reserve ({_gib(fit.reserve_bytes)}) leave no memory for the "
                       f"KV cache on {where}")
        else:
            consequence, error = Consequence.DEGRADED, None
            message = (f"{head} leave a KV cache of {_gib(fit.kv_cache_bytes)} on {where}, under the "
                       f"{fit.kv_fraction:.0%} headroom ({_gib(fit.kv_needed_bytes)}): few sequences at a time")
        yield self.finding(
            ctx, consequence, message, error_text=error, hint=self._hint(plan, dep, gpu, fit),
            assumptions=[dep.gpu_assumption(gpu), dep.parallel_assumption(),
                         f"runtime reserve {_gib(fit.reserve_bytes)} (8% of the GPU); the KV cache needs "
                         f"{fit.kv_fraction:.0%} of the GPU (--kv-cache-fraction)"],
            data={"gpu": gpu.key, "status": fit.status, "memory_bytes": fit.memory_bytes,
                  "weights_bytes": fit.weights_bytes, "reserve_bytes": fit.reserve_bytes,
                  "kv_cache_bytes": fit.kv_cache_bytes, "kv_cache_needed_bytes": fit.kv_needed_bytes,
                  "kv_cache_fraction": fit.kv_fraction})

    @staticmethod
    def _hint(plan, dep, gpu, fit) -> str:
        for tp in (n for n in _TRY_TP if n > dep.tp):
            wider = replace(dep, tp=tp, ep=dep.ep if tp % dep.ep == 0 else 1)
            r, s, _ = per_gpu_weights(plan, wider)
            if memory_fit(gpu, round(r + s), kv_fraction=dep.kv_cache_fraction).fits:
                return (f"serve on more GPUs: at --tp {tp} each {gpu.label} holds {_gib(r + s)} of weights and the "
                        "KV cache fits; or use GPUs with more memory or a smaller checkpoint")
        return ("no TP size up to 64 fits these weights on this GPU: use GPUs with more memory, expert "
                "parallelism, or a smaller checkpoint")
