"""Read a checkpoint's JSON files and safetensors headers into a :class:`Checkpoint`.

``load_checkpoint(path)`` never reads tensor data: per shard it reads the 8-byte length and the
JSON header (at most ``header_len + 8`` bytes, 1 KiB for a Git LFS pointer). Problems with the
files become findings in ``Checkpoint.issues``; only input that is not a checkpoint at all raises
:class:`NotACheckpoint` (exit 2).

Each problem the reader finds belongs to a rule of the catalogue (:mod:`ckptlint.rules`), whose
class the detecting module imports to build the finding: ``SF1xx`` shard files
(:mod:`~ckptlint.reader.header`, :mod:`~ckptlint.reader.parse`, :mod:`~ckptlint.reader.entries`,
:mod:`~ckptlint.reader.layout`), ``IX2xx`` the index and the set of files
(:mod:`~ckptlint.reader.index`, :mod:`~ckptlint.reader.fileset`), ``CF30x`` config file syntax
(:mod:`~ckptlint.reader.configs`). The reader imports those rule modules; nothing in
:mod:`ckptlint.rules` imports the reader.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (for type checkers and editors: at run time these come from __getattr__)
    from ckptlint.reader.header import ShardRead, read_shard
    from ckptlint.reader.loader import (CONFIG_NAME, INDEX_NAME, QUANT_CONFIG_NAME, NotACheckpoint,
                                        load_checkpoint, open_path)
    from ckptlint.reader.source import Source

# What the package exports, by the submodule that defines it: imported on first use, so that a
# process that needs one submodule (the shard-reading child needs ckptlint.reader.header) does not
# import them all.
_EXPORTS = {"ShardRead": "header", "read_shard": "header", "CONFIG_NAME": "loader", "INDEX_NAME": "loader",
            "QUANT_CONFIG_NAME": "loader", "NotACheckpoint": "loader", "load_checkpoint": "loader",
            "open_path": "loader", "Source": "source"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"ckptlint.reader.{_EXPORTS[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


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
