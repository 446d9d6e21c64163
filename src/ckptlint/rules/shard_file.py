"""Shard files: the safetensors container (SF101-SF118).

The rules of one shard file, from the framing its header is read from (the 8-byte length, a Git LFS
pointer, an unreadable path) through the header's JSON and its tensor entries to the data layout
the entries describe. :mod:`ckptlint.reader` detects them (``header``: SF101-SF103, SF116, SF117;
``parse``: SF104, SF105; ``entries`` and ``layout``: the rest) and builds their findings with these
classes.

The tensor-entry rules (SF106-SF112, SF118) share :class:`EntryProblem`: one finding per kind of
problem per shard, for every entry it affects, in the words the class gives (``lead``,
``headline``, ``error``: the text safetensors prints, ``hint``);
:func:`ckptlint.reader.entries.grouped_finding` builds it.

The texts below are what ``safetensors`` 0.8.0 ``safe_open`` prints for these problems, taken by
running it on crafted files (``tests/test_malformed.py`` checks them against the library). Texts
that carry a position (``at line 1 column 17``) or a serde detail are quoted up to that detail
only.
"""

from __future__ import annotations

from typing import ClassVar

from ckptlint.checkpoint import DTYPE_BITS
from ckptlint.findings import Consequence
from ckptlint.rules.base import ReaderRule

# Texts printed by safetensors 0.8.0 (python binding, SafetensorError).
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

_DTYPE_LIST = ", ".join(f"`{d}`" for d in DTYPE_BITS)


class ShardTooSmall(ReaderRule):
    """Shard file is shorter than the 8-byte header length field (empty or cut off).

    ## What it does
    Reports a `.safetensors` file with fewer than 8 bytes, including an empty file.

    ## Why is this bad?
    Every safetensors file starts with an 8-byte header length. safetensors refuses the file
    with `header too small`, so the framework fails to load the checkpoint.

    ## Example
    `model-00002-of-00002.safetensors` is 0 bytes after an interrupted download.

    ## How to fix
    Download or export the file again.
    """

    code = "SF101"
    name = "shard-too-small"
    consequences = (Consequence.LOAD_ERROR,)


class ShardHeaderTooLarge(ReaderRule):
    """Shard's header length field claims more than 100,000,000 bytes.

    ## What it does
    Reports a shard whose first 8 bytes (little-endian u64) claim a header over safetensors'
    100 MB cap. The claimed size is never allocated, and it is quoted only when a header that
    long would fit in the file (otherwise it is the first bytes of something else, maybe private).

    ## Why is this bad?
    safetensors refuses such a file with `header too large`. This usually means the file is
    not a safetensors file at all (an HTML error page, a pickle) or its first bytes are
    corrupted.

    ## Example
    The first 8 bytes of a shard decode to 1,152,921,504,606,846,976.

    ## How to fix
    Check what the file actually is; download or export it again.
    """

    code = "SF102"
    name = "shard-header-too-large"
    consequences = (Consequence.LOAD_ERROR,)


class ShardHeaderBeyondFile(ReaderRule):
    """Shard's header length field points past the end of the file.

    ## What it does
    Reports a shard whose declared header length plus 8 is larger than the file.

    ## Why is this bad?
    safetensors refuses it with `invalid header length`; the file was cut off inside its
    header.

    ## Example
    A 4 KiB file whose length field claims a 9,000-byte header.

    ## How to fix
    Download or export the file again.
    """

    code = "SF103"
    name = "shard-header-beyond-file"
    consequences = (Consequence.LOAD_ERROR,)


class ShardHeaderNotUtf8(ReaderRule):
    """Shard header is not valid UTF-8.

    ## What it does
    Reports a header whose bytes are not valid UTF-8.

    ## Why is this bad?
    safetensors refuses it with `invalid UTF-8 in header`; the header is corrupted.

    ## Example
    A header containing the byte 0xFF inside a tensor name.

    ## How to fix
    Re-export the file.
    """

    code = "SF104"
    name = "shard-header-not-utf8"
    consequences = (Consequence.LOAD_ERROR,)


class ShardHeaderInvalidJson(ReaderRule):
    """Shard header is not a JSON object safetensors can parse.

    ## What it does
    Reports a header that is not valid JSON, is not a JSON object, is nested too deeply,
    contains `NaN`/`Infinity`, or has an unpaired UTF-16 surrogate escape.

    ## Why is this bad?
    safetensors refuses the file with `invalid JSON in header: ...`; none of its tensors
    load.

    ## Example
    A header that ends with `{"a":` because the writer crashed.

    ## How to fix
    Re-export the file.
    """

    code = "SF105"
    name = "shard-header-invalid-json"
    consequences = (Consequence.LOAD_ERROR,)


class EntryProblem(ReaderRule):
    """A kind of problem with tensor entries, reported once per shard for every entry it affects.

    Subclasses say how the finding reads: ``lead`` (before the first problem), ``error`` (the text
    safetensors prints; ``{name}`` is the first tensor) and ``hint``.
    """

    lead: ClassVar[str] = ""
    error: ClassVar[str | None] = ST_JSON
    hint: ClassVar[str] = "re-export this file with a current safetensors writer"

    @classmethod
    def describe(cls, problem: str) -> str:
        """One entry's problem, as the finding's data lists it."""
        return problem

    @classmethod
    def error_text(cls, name: str, problem: str) -> str | None:
        return cls.error.format(name=name) if cls.error else None

    @classmethod
    def headline(cls, problem: str) -> str:
        """The first entry's problem, as the finding's message says it."""
        return problem


class ShardUnknownDtype(EntryProblem):
    """A tensor in a shard has a dtype code safetensors does not know.

    ## What it does
    Reports tensor entries whose `dtype` is not one of safetensors' codes (BOOL, F4,
    F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16,
    F16, BF16, I32, U32, F32, C64, F64, I64, U64).

    ## Why is this bad?
    An unknown code fails header deserialization (`unknown variant`), so the whole file is
    refused.

    ## Example
    `"dtype": "F8_E4M3FN"` (safetensors spells it `F8_E4M3`), or a lower-case `"u8"`.

    ## How to fix
    Write the dtype with a safetensors code.
    """

    code = "SF106"
    name = "shard-unknown-dtype"
    consequences = (Consequence.LOAD_ERROR,)
    hint = "write a dtype code safetensors knows (F8_E4M3, not F8_E4M3FN; upper case)"

    @classmethod
    def describe(cls, problem: str) -> str:
        return f"unknown dtype {problem!r}"

    @classmethod
    def headline(cls, problem: str) -> str:
        return f"unknown dtype {problem!r}, not a safetensors dtype code"

    @classmethod
    def error_text(cls, name: str, problem: str) -> str | None:
        return f"{ST_JSON}: unknown variant `{problem}`, expected one of {_DTYPE_LIST}"


class ShardInvalidTensorEntry(EntryProblem):
    """A tensor entry in a shard header is malformed.

    ## What it does
    Reports tensor entries that are not objects, miss `dtype`/`shape`/`data_offsets`, repeat
    a field, or whose shape or offsets are not non-negative 64-bit integers (floats,
    booleans, negatives, `-0`, too-large values, wrong lengths).

    ## Why is this bad?
    safetensors refuses the whole file with `invalid JSON in header: ...`.

    ## Example
    `"shape": [4096, -1]` or `"data_offsets": [0, 1, 2]`.

    ## How to fix
    Re-export the file with a safetensors writer.
    """

    code = "SF107"
    name = "shard-invalid-tensor-entry"
    consequences = (Consequence.LOAD_ERROR,)
    lead = "invalid tensor entry: "


class ShardInvalidMetadata(EntryProblem):
    """Shard header's `__metadata__` is not a string-to-string map.

    ## What it does
    Reports a `__metadata__` that is not an object (or null), has non-string values, or
    appears twice.

    ## Why is this bad?
    safetensors only accepts string values there and refuses the file otherwise.

    ## Example
    `"__metadata__": {"format": "pt", "step": 1000}`.

    ## How to fix
    Store every metadata value as a string (`"step": "1000"`).
    """

    code = "SF108"
    name = "shard-invalid-metadata"
    consequences = (Consequence.LOAD_ERROR,)
    lead = "invalid header metadata: "
    hint = "__metadata__ must map strings to strings (e.g. {\"format\": \"pt\"})"


class ShardInvalidOffsets(EntryProblem):
    """Shard's tensor data offsets have gaps, overlaps, or do not start at 0.

    ## What it does
    Sorts a shard's tensors by `data_offsets` and reports every tensor that does not begin
    where the previous one ends (the first at 0), or whose end is before its begin.

    ## Why is this bad?
    safetensors requires the data buffer to be covered exactly, with no holes or overlaps,
    and refuses the file with `invalid offset for tensor`.

    ## Example
    Tensor `b` at `[3, 5]` after tensor `a` at `[0, 2]` (a one-byte gap).

    ## How to fix
    Re-export the file; never edit offsets by hand.
    """

    code = "SF109"
    name = "shard-invalid-offsets"
    consequences = (Consequence.LOAD_ERROR,)
    lead = "invalid data_offsets: "
    error = ST_OFFSET


class ShardTensorSizeMismatch(EntryProblem):
    """A tensor's byte range does not match its dtype and shape.

    ## What it does
    Reports tensors whose `end - begin` differs from `numel * bits / 8`.

    ## Why is this bad?
    safetensors refuses the file with `invalid shape, data type, or offset for tensor`.

    ## Example
    `{"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}` (needs 8 bytes).

    ## How to fix
    Re-export the file; the shape or dtype in the header is wrong.
    """

    code = "SF110"
    name = "shard-tensor-size-mismatch"
    consequences = (Consequence.LOAD_ERROR,)
    lead = "tensor size does not match dtype and shape: "
    error = ST_INFO


class ShardTensorSizeOverflow(EntryProblem):
    """A tensor's element count times its dtype bits overflows 64 bits.

    ## What it does
    Reports tensors whose shape product (computed left to right) or size in bits does not
    fit in 64 bits.

    ## Why is this bad?
    safetensors refuses the file with `overflow computing buffer size from shape and/or
    element type`.

    ## Example
    `"shape": [1099511627776, 1099511627776]`.

    ## How to fix
    Re-export the file; the shape is corrupt.
    """

    code = "SF111"
    name = "shard-tensor-size-overflow"
    consequences = (Consequence.LOAD_ERROR,)
    lead = "tensor size overflows: "
    error = ST_OVERFLOW


class ShardSubByteMisaligned(EntryProblem):
    """A sub-byte tensor (F4, F6) does not fill a whole number of bytes.

    ## What it does
    Reports F4/F6 tensors whose `numel * bits` is not a multiple of 8.

    ## Why is this bad?
    safetensors refuses such a file (`the slice does not end up at a byte boundary`).

    ## Example
    `{"dtype": "F4", "shape": [3], ...}` is 12 bits.

    ## How to fix
    Store packed FP4 with an even element count, or as U8 with the last dim halved.
    """

    code = "SF112"
    name = "shard-sub-byte-misaligned"
    consequences = (Consequence.LOAD_ERROR,)
    lead = "sub-byte tensor does not fill whole bytes: "
    error = ST_MISALIGNED


class ShardTruncated(ReaderRule):
    """Shard file ends before the tensor data its header describes.

    ## What it does
    Reports a shard whose last tensor ends past the end of the file, with how many bytes are
    missing and which tensors are affected.

    ## Why is this bad?
    safetensors refuses it with `incomplete metadata, file not fully covered`; the download
    or export was interrupted.

    ## Example
    A 10 GB shard of which only 9.2 GB arrived.

    ## How to fix
    Download the file again (compare its size with the repository's).
    """

    code = "SF113"
    name = "shard-truncated"
    consequences = (Consequence.LOAD_ERROR,)


class ShardTrailingBytes(ReaderRule):
    """Shard file has bytes after the last tensor's data.

    ## What it does
    Reports a shard that is longer than its header plus the data its tensors cover.

    ## Why is this bad?
    safetensors refuses it with `incomplete metadata, file not fully covered` (the format
    forbids unindexed bytes, against polyglot files).

    ## Example
    Two files concatenated, or a tensor removed from the header but not from the data.

    ## How to fix
    Re-export the file.
    """

    code = "SF114"
    name = "shard-trailing-bytes"
    consequences = (Consequence.LOAD_ERROR,)


class ShardDuplicateKey(ReaderRule):
    """A shard header defines the same tensor (or metadata key) twice.

    ## What it does
    Reports tensor names and `__metadata__` keys that occur more than once in a header.

    ## Why is this bad?
    The format forbids duplicates, but safetensors silently keeps the later entry: the
    earlier tensor's bytes are orphaned and usually leave the layout invalid (load error);
    when the layout still checks out, the later definition wins quietly (hygiene).

    ## Example
    `{"w": {... [0, 8]}, "w": {... [0, 8]}}`.

    ## How to fix
    Re-export the file so that every name appears once.
    """

    code = "SF115"
    name = "shard-duplicate-key"
    consequences = (Consequence.LOAD_ERROR, Consequence.HYGIENE)


class GitLfsPointer(ReaderRule):
    """Shard files are Git LFS pointers: the weights were never downloaded.

    ## What it does
    Reports, once per checkpoint, every shard that is a Git LFS pointer text file (`version
    https://git-lfs.github.com/spec/v1`, `oid`, `size`) instead of weights.

    ## Why is this bad?
    A clone without `git lfs` (or CI's `actions/checkout` without `lfs: true`) leaves
    pointer files; safetensors refuses them (`header too large`) and nothing can be checked.

    ## Example
    `model.safetensors` is 134 bytes long and starts with `version https://git-lfs...`.

    ## How to fix
    Run `git lfs pull --include="*.safetensors"` in the clone (LFS fetches whole files,
    although ckptlint reads only each file's first bytes), or download with `hf download
    <repo>` / `huggingface-cli download <repo>`.
    """

    code = "SF116"
    name = "git-lfs-pointer"
    consequences = (Consequence.LOAD_ERROR,)


class ShardUnreadable(ReaderRule):
    """A shard path is a directory, a broken symlink or otherwise unreadable.

    ## What it does
    Reports `.safetensors` paths that cannot be read as a file: directories, broken
    symlinks, files without read permission, I/O errors.

    ## Why is this bad?
    Frameworks open every shard; an unreadable one aborts the load.

    ## Example
    `model-00001-of-00002.safetensors -> ../../blobs/abc` where the blob was deleted.

    ## How to fix
    Restore the file (re-download it).
    """

    code = "SF117"
    name = "shard-unreadable"
    consequences = (Consequence.LOAD_ERROR,)


class ShardSpecDeviation(EntryProblem):
    """Shard header deviates from the safetensors format in a way the library tolerates.

    ## What it does
    Reports extra keys in a tensor entry, sizes or offsets above the format's 48-bit limit,
    and headers that do not start with `{`.

    ## Why is this bad?
    safetensors 0.8 accepts these, but the format text forbids them and other readers (older
    versions, other languages, the Hub's parser) may not.

    ## Example
    `{"dtype": "U8", "shape": [2], "data_offsets": [0, 2], "quant": "nf4"}`.

    ## How to fix
    Re-export with the reference writer.
    """

    code = "SF118"
    name = "shard-spec-deviation"
    consequences = (Consequence.HYGIENE,)
    lead = "header deviates from the safetensors format (the library tolerates it): "
    error = None
    hint = "re-export with the reference writer; other readers may be stricter"
