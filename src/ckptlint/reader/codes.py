"""Finding codes the reader emits, and the error texts the ``safetensors`` library prints.

The codes are stable: each names one *kind* of problem. ``rules/container.py`` documents
every code with a ``ReaderRule``; keep the two in step.

The quoted library texts were taken by running ``safetensors`` 0.8.0 ``safe_open`` on crafted
files (see ``tests/test_malformed.py``, which checks them against the library). Texts that
carry a position (``at line 1 column 17``) or a serde detail are quoted up to that detail only.
"""

from __future__ import annotations

# --- shard file / container (SF1xx) -----------------------------------------------------
SF_TOO_SMALL = "SF101"  # file shorter than 8 bytes (incl. empty)
SF_HEADER_TOO_LARGE = "SF102"  # declared header length > 100,000,000
SF_HEADER_LENGTH = "SF103"  # 8 + declared length > file size (truncated inside the header)
SF_NOT_UTF8 = "SF104"
SF_INVALID_JSON = "SF105"  # not JSON, not an object, too deeply nested, NaN, lone surrogate
SF_UNKNOWN_DTYPE = "SF106"
SF_BAD_ENTRY = "SF107"  # tensor entry: not an object, missing/duplicate field, bad shape/offsets
SF_BAD_METADATA = "SF108"  # __metadata__ not a string->string map, duplicated
SF_BAD_OFFSETS = "SF109"  # gaps, overlaps, not from 0, end < begin
SF_SIZE_MISMATCH = "SF110"  # end - begin != numel * bits / 8
SF_SIZE_OVERFLOW = "SF111"  # numel or numel*bits overflows u64
SF_SUB_BYTE = "SF112"  # numel * bits not a multiple of 8
SF_TRUNCATED = "SF113"  # data ends past the end of the file
SF_TRAILING = "SF114"  # bytes after the last tensor
SF_DUPLICATE_KEY = "SF115"  # duplicate tensor name / __metadata__ key in a header
SF_LFS_POINTER = "SF116"
SF_UNREADABLE = "SF117"  # directory, broken symlink, permission, I/O error
SF_SPEC_DEVIATION = "SF118"  # tolerated by the library: extra entry keys, >48-bit, leading whitespace

# --- index / file set (IX2xx) -----------------------------------------------------------
IX_INVALID_JSON = "IX201"
IX_BAD_WEIGHT_MAP = "IX202"
IX_BAD_SHARD_NAME = "IX203"
IX_MISSING_SHARD = "IX204"
IX_TENSOR_NOT_IN_SHARD = "IX205"
IX_TENSOR_IN_TWO_SHARDS = "IX206"
IX_TENSOR_NOT_IN_INDEX = "IX207"
IX_TOTAL_SIZE = "IX208"
IX_UNREFERENCED_SHARD = "IX209"
IX_NO_WEIGHTS = "IX210"
IX_BAD_METADATA = "IX211"
IX_DUPLICATE_KEY = "IX212"

# --- config files (CF30x) ---------------------------------------------------------------
CF_MISSING = "CF301"
CF_INVALID_JSON = "CF302"
CF_NOT_OBJECT = "CF303"
CF_DUPLICATE_KEY = "CF304"

ALL_CODES = tuple(
    v for k, v in sorted(globals().items()) if k[:3] in ("SF_", "IX_", "CF_") and isinstance(v, str)
)

# --- texts printed by safetensors 0.8.0 (python binding, SafetensorError) ----------------
ST = "Error while deserializing header: "
ST_TOO_SMALL = ST + "header too small"
ST_TOO_LARGE = ST + "header too large"
ST_HEADER_LENGTH = ST + "invalid header length"
ST_UTF8 = ST + "invalid UTF-8 in header"
ST_JSON = ST + "invalid JSON in header"
ST_OFFSET = ST + "invalid offset for tensor `{name}`"
ST_OVERFLOW = ST + "overflow computing buffer size from shape and/or element type"
ST_MISALIGNED = (
    ST + "The slice is slicing for subbytes dtypes, and the slice does not end up at a byte "
    "boundary, this is invalid."
)
ST_INFO = ST + "invalid shape, data type, or offset for tensor"
ST_INCOMPLETE = ST + "incomplete metadata, file not fully covered"
ST_IS_DIR = "No such device (os error 19)"
ST_NOT_FOUND = "No such file or directory: {path}"

# safetensors' Rust error variant behind each text (for data["safetensors_error"]).
VARIANT = {
    ST_TOO_SMALL: "HeaderTooSmall",
    ST_TOO_LARGE: "HeaderTooLarge",
    ST_HEADER_LENGTH: "InvalidHeaderLength",
    ST_UTF8: "InvalidHeader",
    ST_JSON: "InvalidHeaderDeserialization",
    ST_OVERFLOW: "ValidationOverflow",
    ST_MISALIGNED: "MisalignedSlice",
    ST_INFO: "TensorInvalidInfo",
    ST_INCOMPLETE: "MetadataIncompleteBuffer",
}

LFS_HINT = (
    'fetch the weights: `git lfs pull --include="*.safetensors"` in the clone (LFS downloads '
    "whole files although ckptlint reads only the first bytes of each), or download the repo "
    "with `hf download <repo>` / `huggingface-cli download <repo>`"
)
