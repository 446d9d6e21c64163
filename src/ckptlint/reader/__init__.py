"""Read a checkpoint's JSON files and safetensors headers into a :class:`Checkpoint`.

``load_checkpoint(path)`` never reads tensor data: per shard it reads the 8-byte length and the
JSON header (at most ``header_len + 8`` bytes, 1 KiB for a Git LFS pointer). Problems with the
files become findings in ``Checkpoint.issues`` (codes in :mod:`ckptlint.reader.codes`, rules
in :mod:`ckptlint.rules.container`); only input that is not a checkpoint at all raises
:class:`NotACheckpoint` (exit 2).
"""

from ckptlint.reader.header import ShardRead, read_shard
from ckptlint.reader.loader import (
    CONFIG_NAME,
    INDEX_NAME,
    QUANT_CONFIG_NAME,
    NotACheckpoint,
    load_checkpoint,
    open_path,
)
from ckptlint.reader.source import Source

__all__ = [
    "CONFIG_NAME",
    "INDEX_NAME",
    "QUANT_CONFIG_NAME",
    "NotACheckpoint",
    "ShardRead",
    "Source",
    "load_checkpoint",
    "open_path",
    "read_shard",
]
