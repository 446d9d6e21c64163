"""What a path on the command line stands for: a checkpoint directory, a file of one, or a lone file."""

from __future__ import annotations

import os

CHECKPOINT_FILES = ("config.json", "model.safetensors.index.json", "hf_quant_config.json")


def resolve_input(path: str) -> tuple[str, str | None]:
    """The checkpoint to check for ``path``, and a note when it is not ``path`` itself.

    A file of a checkpoint (a ``.safetensors`` shard, ``config.json``, the index) whose directory
    holds ``config.json`` or ``model.safetensors.index.json`` stands for that whole checkpoint: the
    frameworks load the directory, so checking one shard alone would miss the index and the config.
    A lone ``.safetensors`` file with neither beside it is checked as a container only."""
    if path.startswith("hf://") or not os.path.isfile(path):
        return path, None
    d = os.path.dirname(path) or "."
    name = os.path.basename(path)
    if not (name.endswith(".safetensors") or name in CHECKPOINT_FILES):
        return path, None
    beside = [n for n in CHECKPOINT_FILES[:2] if os.path.isfile(os.path.join(d, n))]
    if beside:
        return d, (f"{path} is a file of the checkpoint in {d} ({', '.join(beside)} beside it): "
                   "checked the whole checkpoint, as the frameworks load it")
    if name.endswith(".safetensors"):
        return path, (f"{path}: no config.json or model.safetensors.index.json beside it: checked as a "
                      "safetensors container only (headers, offsets, sizes), no load simulation")
    return path, None


def not_a_checkpoint(src, exc: Exception) -> str:
    """The reader's "not a checkpoint directory", said as what it means for a Hub repository."""
    root = getattr(src, "root", "")
    if not isinstance(root, str) or not root.startswith("hf://") or not str(exc).endswith("not a checkpoint directory"):
        return str(exc)  # (a remote error of its own: not found, no access, no network… says what it is)
    if getattr(src, "complete", True):
        return f"{root}: the repository has no config.json, index or .safetensors file at this revision: not a checkpoint"
    return (f"{root}: the endpoint has no listing for this repository and answers 404 Not Found for config.json, "
            "hf_quant_config.json and model.safetensors.index.json: no such repository or revision there, or the "
            "endpoint is not a Hugging Face Hub (--endpoint / HF_ENDPOINT)")
