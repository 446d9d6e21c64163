"""Helpers for tests: synthetic checkpoints (see :mod:`ckptlint.testing.builder`)."""

from ckptlint.testing.builder import (
    DELETE,
    MINIMAL_CONFIG,
    WrittenFile,
    parse_listing,
    shard_name,
    tensor_nbytes,
    write_checkpoint,
    write_safetensors,
)

__all__ = [
    "DELETE",
    "MINIMAL_CONFIG",
    "WrittenFile",
    "parse_listing",
    "shard_name",
    "tensor_nbytes",
    "write_checkpoint",
    "write_safetensors",
]
