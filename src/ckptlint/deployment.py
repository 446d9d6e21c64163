"""Deployment assumptions a check is made under (docs/decisions.md#deployment-assumptions).

Defaults: the GPU on which the checkpoint's quant format runs natively with the framework's
default kernels, tensor parallel 1, default server flags, and speculative decoding with the
checkpoint's own MTP/NextN layer *on* whenever ``config.json`` declares one. Every option is
explicit so later work adds values, not a rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.hardware import architecture, get_gpu, gpu_data


@dataclass(frozen=True)
class Deployment:
    speculative: bool | None = None  # None: on iff config.json declares an MTP/NextN layer
    platform: str | None = None  # "cuda" | "rocm"; None: the format's native platform
    tp: int = 1
    gpu: str | None = None  # a key of ckptlint/hardware/gpus.toml (`ckptlint gpus`); None: the format's native GPU
    ep: int = 1  # expert-parallel size (FusedMoE experts split over EP ranks, intermediate over TP/EP)
    dp_attention: bool = False  # data-parallel attention (attention projections whole on every rank)
    # SGLang shared-experts fusion: None = the framework's default for the model on that GPU;
    # False = `--disable-shared-experts-fusion`.
    shared_experts_fusion: bool | None = None
    # Memory fit (DP806): checked when the user states the deployment (--gpu or --tp); the share of
    # the GPU's memory the KV cache needs at least (None: ckptlint.hardware.memory.DEFAULT_KV_CACHE_FRACTION).
    memory_check: bool = False
    kv_cache_fraction: float | None = None

    def describe(self, *, platform: str, gpu: str, speculative: bool) -> str:
        spec = "MTP speculative decoding on" if speculative else "speculative decoding off"
        if self.gpu is not None:  # --gpu: name the GPU from the data, whatever default was passed in
            gpu, platform = default_hardware(None, None, None, self.gpu)
        par = f"TP={self.tp}" + (f", EP={self.ep}" if self.ep != 1 else "") + (", DP attention" if self.dp_attention else "")
        flags = "--disable-shared-experts-fusion" if self.shared_experts_fusion is False else "default server flags"
        return f"{gpu} ({platform}), {par}, {flags}, {spec}"

    # The assumptions a deployment finding states (rules DP8xx).
    def gpu_assumption(self, gpu) -> str:
        """The GPU a finding assumed (``gpu``: its record in ckptlint/hardware/gpus.toml) and why."""
        how = "--gpu" if self.gpu is not None else "the GPU on which the checkpoint's format runs natively (default)"
        return f"GPU: {gpu.label}, {how}"

    def parallel_assumption(self) -> str:
        """The tensor/expert-parallel layout a finding assumed."""
        out = f"tensor parallel {self.tp}"
        if self.ep != 1:
            out += f", expert parallel {self.ep}"
        if self.dp_attention:
            out += ", data-parallel attention (attention projections whole on every rank)"
        return out


def default_gpu_key(method: str | None, scheme: str | None, platform: str | None = None,
                    gpu: str | None = None) -> str | None:
    """Key of the GPU a check assumes (None: only a platform is known, e.g. ``--platform rocm``)."""
    if gpu is not None:
        return gpu
    # the GPU on which the format runs natively (hardware data `native`)
    native = gpu_data().native
    key = native.get(f"{scheme}:{method}") or native.get(scheme or "") or native["default"]

    g = get_gpu(key)
    if platform is not None and g is not None and platform != _platform_of(g):
        return None
    return key


def _platform_of(g) -> str:
    return architecture(g).platform


def default_hardware(method: str | None, scheme: str | None, platform: str | None = None,
                     gpu: str | None = None) -> tuple[str, str]:
    """(GPU, platform) assumed for a checkpoint whose default scheme is ``scheme`` (``gpu``: a GPU
    chosen with ``--gpu``, named as the GPU data names it)."""
    key = default_gpu_key(method, scheme, platform, gpu)
    g = get_gpu(key) if key is not None else None
    if g is None:
        if gpu is not None:
            return gpu, platform or "cuda"
        return ("an AMD Instinct GPU" if platform == "rocm" else "an NVIDIA GPU"), platform or "cuda"
    return g.label, _platform_of(g)
