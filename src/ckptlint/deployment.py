"""Deployment assumptions a check is made under (DECISIONS.md, "What a check assumes").

Defaults: the GPU on which the checkpoint's quant format runs natively with the framework's
default kernels, tensor parallel 1, default server flags, and speculative decoding with the
checkpoint's own MTP/NextN layer *on* whenever ``config.json`` declares one. Every option is
explicit so later work adds values, not a rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deployment:
    speculative: bool | None = None  # None: on iff config.json declares an MTP/NextN layer
    platform: str | None = None  # "cuda" | "rocm"; None: the format's native platform
    tp: int = 1
    gpu: str | None = None

    def describe(self, *, platform: str, gpu: str, speculative: bool) -> str:
        spec = "MTP speculative decoding on" if speculative else "speculative decoding off"
        return f"{gpu} ({platform}), TP={self.tp}, default server flags, {spec}"


# The GPU on which each format runs natively with the frameworks' default kernels (DECISIONS.md).
NATIVE_HARDWARE: dict[str, tuple[str, str]] = {
    "nvfp4": ("NVIDIA B200 (sm100)", "cuda"),
    "mxfp4:quark": ("AMD MI355X (gfx950)", "rocm"),
    "mxfp4": ("NVIDIA H100 (sm90)", "cuda"),  # gpt-oss MXFP4 via Triton kernels on Hopper
    "default": ("NVIDIA H100 (sm90)", "cuda"),  # FP8, INT4/INT8
}


def default_hardware(method: str | None, scheme: str | None, platform: str | None = None) -> tuple[str, str]:
    """(GPU, platform) assumed for a checkpoint whose default scheme is ``scheme``."""
    if scheme == "mxfp4" and method == "quark":
        gpu, plat = NATIVE_HARDWARE["mxfp4:quark"]
    else:
        gpu, plat = NATIVE_HARDWARE.get(scheme or "", NATIVE_HARDWARE["default"])
    if platform is not None and platform != plat:
        gpu = "an AMD Instinct GPU" if platform == "rocm" else "an NVIDIA GPU"
        plat = platform
    return gpu, plat
