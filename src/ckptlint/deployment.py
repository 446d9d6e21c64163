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
