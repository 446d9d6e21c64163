"""Rules for what the reader finds while reading a checkpoint (container, index, config files).

Each rule is a :class:`~ckptlint.rules.base.ReaderRule`: the reader (``ckptlint.reader``) records
findings with the rule's code in ``Checkpoint.issues`` and the rule surfaces them. Codes:
``SF1xx`` shard files / the safetensors container, ``IX2xx`` the index and the set of files,
``CF30x`` config file syntax. Quoted errors are those safetensors 0.8.0 prints.
"""

from __future__ import annotations

import copy
from typing import Iterator

from ckptlint.findings import Consequence, Finding
from ckptlint.reader import codes as C
from ckptlint.rules.base import ReaderRule, Rule, RuleContext

LOAD = Consequence.LOAD_ERROR
SILENT = Consequence.SILENT_CORRUPTION
HYGIENE = Consequence.HYGIENE


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

    code = C.SF_TOO_SMALL
    name = "shard-too-small"
    summary = 'Shard file is shorter than the 8-byte header length field (empty or cut off)'
    consequences = (LOAD,)


class ShardHeaderTooLarge(ReaderRule):
    """Shard's header length field claims more than 100,000,000 bytes.

    ## What it does
    Reports a shard whose first 8 bytes (little-endian u64) claim a header over safetensors'
    100 MB cap. The claimed size is never allocated.

    ## Why is this bad?
    safetensors refuses such a file with `header too large`. This usually means the file is
    not a safetensors file at all (an HTML error page, a pickle) or its first bytes are
    corrupted.

    ## Example
    The first 8 bytes of a shard decode to 1,152,921,504,606,846,976.

    ## How to fix
    Check what the file actually is; download or export it again.
    """

    code = C.SF_HEADER_TOO_LARGE
    name = "shard-header-too-large"
    summary = "Shard's header length field claims more than 100,000,000 bytes"
    consequences = (LOAD,)


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

    code = C.SF_HEADER_LENGTH
    name = "shard-header-beyond-file"
    summary = "Shard's header length field points past the end of the file"
    consequences = (LOAD,)


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

    code = C.SF_NOT_UTF8
    name = "shard-header-not-utf8"
    summary = 'Shard header is not valid UTF-8'
    consequences = (LOAD,)


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

    code = C.SF_INVALID_JSON
    name = "shard-header-invalid-json"
    summary = 'Shard header is not a JSON object safetensors can parse'
    consequences = (LOAD,)


class ShardUnknownDtype(ReaderRule):
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

    code = C.SF_UNKNOWN_DTYPE
    name = "shard-unknown-dtype"
    summary = 'A tensor in a shard has a dtype code safetensors does not know'
    consequences = (LOAD,)


class ShardInvalidTensorEntry(ReaderRule):
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

    code = C.SF_BAD_ENTRY
    name = "shard-invalid-tensor-entry"
    summary = 'A tensor entry in a shard header is malformed'
    consequences = (LOAD,)


class ShardInvalidMetadata(ReaderRule):
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

    code = C.SF_BAD_METADATA
    name = "shard-invalid-metadata"
    summary = "Shard header's `__metadata__` is not a string-to-string map"
    consequences = (LOAD,)


class ShardInvalidOffsets(ReaderRule):
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

    code = C.SF_BAD_OFFSETS
    name = "shard-invalid-offsets"
    summary = "Shard's tensor data offsets have gaps, overlaps, or do not start at 0"
    consequences = (LOAD,)


class ShardTensorSizeMismatch(ReaderRule):
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

    code = C.SF_SIZE_MISMATCH
    name = "shard-tensor-size-mismatch"
    summary = "A tensor's byte range does not match its dtype and shape"
    consequences = (LOAD,)


class ShardTensorSizeOverflow(ReaderRule):
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

    code = C.SF_SIZE_OVERFLOW
    name = "shard-tensor-size-overflow"
    summary = "A tensor's element count times its dtype bits overflows 64 bits"
    consequences = (LOAD,)


class ShardSubByteMisaligned(ReaderRule):
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

    code = C.SF_SUB_BYTE
    name = "shard-sub-byte-misaligned"
    summary = 'A sub-byte tensor (F4, F6) does not fill a whole number of bytes'
    consequences = (LOAD,)


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

    code = C.SF_TRUNCATED
    name = "shard-truncated"
    summary = 'Shard file ends before the tensor data its header describes'
    consequences = (LOAD,)


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

    code = C.SF_TRAILING
    name = "shard-trailing-bytes"
    summary = "Shard file has bytes after the last tensor's data"
    consequences = (LOAD,)


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

    code = C.SF_DUPLICATE_KEY
    name = "shard-duplicate-key"
    summary = 'A shard header defines the same tensor (or metadata key) twice'
    consequences = (LOAD, HYGIENE,)


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

    code = C.SF_LFS_POINTER
    name = "git-lfs-pointer"
    summary = 'Shard files are Git LFS pointers: the weights were never downloaded'
    consequences = (LOAD,)


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

    code = C.SF_UNREADABLE
    name = "shard-unreadable"
    summary = 'A shard path is a directory, a broken symlink or otherwise unreadable'
    consequences = (LOAD,)


class ShardSpecDeviation(ReaderRule):
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

    code = C.SF_SPEC_DEVIATION
    name = "shard-spec-deviation"
    summary = 'Shard header deviates from the safetensors format in a way the library tolerates'
    consequences = (HYGIENE,)


class IndexInvalidJson(ReaderRule):
    """`model.safetensors.index.json` is not a JSON object.

    ## What it does
    Reports an index that cannot be read, is not UTF-8 or valid JSON, or is not a JSON
    object.

    ## Why is this bad?
    Frameworks parse the index to find the shards and fail. ckptlint then checks every
    `.safetensors` file in the directory instead.

    ## Example
    An index truncated in the middle of `weight_map`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = C.IX_INVALID_JSON
    name = "index-invalid-json"
    summary = '`model.safetensors.index.json` is not a JSON object'
    consequences = (LOAD,)


class IndexInvalidWeightMap(ReaderRule):
    """The index has no usable `weight_map`.

    ## What it does
    Reports an index without `weight_map`, with a `weight_map` that is not an object, or
    with values that are not strings.

    ## Why is this bad?
    Frameworks take the shard list from `weight_map` and fail when it is missing or
    malformed.

    ## Example
    `"weight_map": ["model-00001-of-00002.safetensors"]`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = C.IX_BAD_WEIGHT_MAP
    name = "index-invalid-weight-map"
    summary = 'The index has no usable `weight_map`'
    consequences = (LOAD,)


class IndexInvalidShardName(ReaderRule):
    """The index names a shard that is not a plain `.safetensors` file name.

    ## What it does
    Reports `weight_map` values that are empty, `.`/`..`, contain a slash or backslash, are absolute
    paths, or do not end in `.safetensors`. Such a path is never opened or even stat'ed.

    ## Why is this bad?
    Shards must live in the checkpoint directory; a path outside it is at best a broken
    download and at worst makes a loader read files it should not. The tensors mapped to it
    are not loaded.

    ## Example
    `"lm_head.weight": "../secret.safetensors"`.

    ## How to fix
    Map every tensor to a shard file in the checkpoint directory.
    """

    code = C.IX_BAD_SHARD_NAME
    name = "index-invalid-shard-name"
    summary = 'The index names a shard that is not a plain `.safetensors` file name'
    consequences = (LOAD,)


class IndexMissingShard(ReaderRule):
    """The index names a shard file that does not exist.

    ## What it does
    Reports shard names in `weight_map` that are not in the checkpoint directory, with the
    tensors mapped to them.

    ## Why is this bad?
    Loaders look for every listed shard and fail (or miss those weights).

    ## Example
    `weight_map` mentions `model-00003-of-00003.safetensors`, but only two shards were
    downloaded.

    ## How to fix
    Download the missing shard, or regenerate the index.
    """

    code = C.IX_MISSING_SHARD
    name = "index-missing-shard"
    summary = 'The index names a shard file that does not exist'
    consequences = (LOAD, Consequence.SILENT_CORRUPTION)
    # What happens depends on the release (target data `loading.missing_shard`): SGLang <= 0.5.16
    # and vLLM load the shards that are present and leave the rest uninitialised; SGLang >= 0.5.17
    # refuses to start. So this reader finding is reported once per target.
    scope = "target"

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        issues = [i for i in ctx.checkpoint.issues if i.code == self.code]
        if not issues:
            return
        if ctx.target is None:
            yield from super().check(ctx)
            return
        outcome = ctx.target.data.loading.missing_shard
        files = [i.data.get("shard") for i in issues]
        text = (outcome.error or "").format(index_file=ctx.checkpoint.index_file or "model.safetensors.index.json",
                                             n=len(files), dir=ctx.checkpoint.root, files=files,
                                             file_set="{" + ", ".join(map(repr, files)) + "}") or None
        for i in issues:
            f = copy.copy(i)
            f.name, f.target = self.name, ctx.target.id
            f.consequence = Consequence(outcome.consequence)
            f.severity = f.consequence.default_severity
            f.error_text = text
            f.data = dict(i.data)
            if outcome.note:
                f.message = f"{i.message}; {ctx.target.resolved}: {outcome.note}"
            yield f


class IndexTensorNotInShard(ReaderRule):
    """The index maps tensors to a shard whose header does not contain them.

    ## What it does
    Compares `weight_map` with the shard headers and reports tensors the index places in a
    shard that lacks them. If the tensor is in another listed shard it is hygiene
    (frameworks read every listed file); if no listed shard has it, the weight is simply not
    there.

    ## Why is this bad?
    A missing weight is left uninitialised by several loaders (silently, for quantized
    layers), so the model produces garbage.

    ## Example
    The index says `model.layers.61.eh_proj.weight` is in shard 2, and no shard has it.

    ## How to fix
    Re-export the checkpoint, or add the shard that holds those tensors.
    """

    code = C.IX_TENSOR_NOT_IN_SHARD
    name = "index-tensor-not-in-shard"
    summary = 'The index maps tensors to a shard whose header does not contain them'
    consequences = (HYGIENE, SILENT,)


class TensorInMultipleShards(ReaderRule):
    """The same tensor is stored in more than one shard.

    ## What it does
    Reports tensor names present in two or more shards that are read.

    ## Why is this bad?
    Frameworks load every file, so the tensor is loaded twice and the last copy wins; when
    the copies differ in dtype or shape, which one is used depends on file order.

    ## Example
    `lm_head.weight` in both `model-00001-of-00002.safetensors` and
    `model-00002-of-00002.safetensors`.

    ## How to fix
    Keep each tensor in exactly one shard.
    """

    code = C.IX_TENSOR_IN_TWO_SHARDS
    name = "tensor-in-multiple-shards"
    summary = 'The same tensor is stored in more than one shard'
    consequences = (HYGIENE, SILENT,)


class TensorNotInIndex(ReaderRule):
    """Shards contain tensors the index does not list.

    ## What it does
    Reports tensors found in a listed shard's header but absent from `weight_map`.

    ## Why is this bad?
    Frameworks read whole shard files, so they still load; but tools that trust the index
    (parameter counts, partial loaders) miss them.

    ## Example
    MTP weights appended to the last shard without updating the index.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = C.IX_TENSOR_NOT_IN_INDEX
    name = "tensor-not-in-index"
    summary = 'Shards contain tensors the index does not list'
    consequences = (HYGIENE,)


class IndexTotalSizeMismatch(ReaderRule):
    """The index's `metadata.total_size` is not the sum of tensor bytes.

    ## What it does
    Compares `metadata.total_size` with the sum of tensor byte sizes in the listed shards
    and says whether it equals the sum of file sizes instead.

    ## Why is this bad?
    Readers do not check it, but it should be the tensor byte total (as huggingface_hub
    writes it); a different value hints at an index written for other files.

    ## Example
    `total_size` counts the shard files' headers too, as some export scripts compute it.

    ## How to fix
    Set `metadata.total_size` to the sum of tensor byte sizes.
    """

    code = C.IX_TOTAL_SIZE
    name = "index-total-size-mismatch"
    summary = "The index's `metadata.total_size` is not the sum of tensor bytes"
    consequences = (HYGIENE,)


class UnreferencedShard(ReaderRule):
    """A `.safetensors` file in the directory is not referenced by the index.

    ## What it does
    Reports `.safetensors` files beside an index that does not name them, with the tensors
    they hold. Their tensors are not part of the checkpoint's tensor set.

    ## Why is this bad?
    Frameworks read only the shards the index names, so these tensors are never loaded: dead
    weight at best, and missing weights (e.g. an MTP layer) if they were meant to load.

    ## Example
    `model_mtp.safetensors` added next to the shards, but `weight_map` never updated.

    ## How to fix
    Add its tensors to the index if they are needed, or delete the file.
    """

    code = C.IX_UNREFERENCED_SHARD
    name = "unreferenced-shard"
    summary = 'A `.safetensors` file in the directory is not referenced by the index'
    consequences = (HYGIENE,)


class NoSafetensorsWeights(ReaderRule):
    """The checkpoint directory has no `.safetensors` weights.

    ## What it does
    Reports a checkpoint directory (with `config.json`) that contains no `.safetensors`
    files. If weights in other formats (`.bin`, `.pt`, `.gguf`, ...) are there it is
    hygiene: they were not checked.

    ## Why is this bad?
    Without weight files there is nothing to load; with only non-safetensors weights,
    ckptlint cannot check anything.

    ## Example
    A repository cloned with only its JSON files.

    ## How to fix
    Download the weights, or convert them to safetensors.
    """

    code = C.IX_NO_WEIGHTS
    name = "no-safetensors-weights"
    summary = 'The checkpoint directory has no `.safetensors` weights'
    consequences = (LOAD, HYGIENE,)


class IndexInvalidMetadata(ReaderRule):
    """The index's `metadata` or `metadata.total_size` has the wrong type.

    ## What it does
    Reports an index whose `metadata` is not an object, or whose `total_size` is not a
    non-negative integer.

    ## Why is this bad?
    Serving frameworks ignore it, but other tools read it and may fail.

    ## Example
    `"metadata": {"total_size": "16GB"}`.

    ## How to fix
    Write `total_size` as the integer sum of tensor bytes.
    """

    code = C.IX_BAD_METADATA
    name = "index-invalid-metadata"
    summary = "The index's `metadata` or `metadata.total_size` has the wrong type"
    consequences = (HYGIENE,)


class IndexDuplicateKey(ReaderRule):
    """The index repeats a key.

    ## What it does
    Reports keys that appear more than once in the same object of the index (usually a
    tensor twice in `weight_map`).

    ## Why is this bad?
    JSON parsers keep the last value silently; if the two entries name different shards, one
    mapping is lost.

    ## Example
    `"lm_head.weight"` listed twice in `weight_map`.

    ## How to fix
    Regenerate the index from the shards.
    """

    code = C.IX_DUPLICATE_KEY
    name = "index-duplicate-key"
    summary = 'The index repeats a key'
    consequences = (HYGIENE,)


class ConfigMissing(ReaderRule):
    """`config.json` is missing next to the weights.

    ## What it does
    Reports a checkpoint directory that has weights or an index but no `config.json`.

    ## Why is this bad?
    Frameworks need `config.json` for the architecture and the quantization; without it
    nothing loads, and ckptlint can only check the files as containers.

    ## Example
    A directory with only `model-*.safetensors` and the index.

    ## How to fix
    Download `config.json` from the model repository.
    """

    code = C.CF_MISSING
    name = "config-missing"
    summary = '`config.json` is missing next to the weights'
    consequences = (LOAD,)


class ConfigInvalidJson(ReaderRule):
    """`config.json` or `hf_quant_config.json` cannot be parsed.

    ## What it does
    Reports a config file that cannot be read, is not UTF-8, or is not valid JSON (Python's
    rules, which frameworks use).

    ## Why is this bad?
    Frameworks parse the file at startup and fail.

    ## Example
    A trailing comma after the last key of `config.json`.

    ## How to fix
    Fix the JSON, or download the file again.
    """

    code = C.CF_INVALID_JSON
    name = "config-invalid-json"
    summary = '`config.json` or `hf_quant_config.json` cannot be parsed'
    consequences = (LOAD,)


class ConfigNotAnObject(ReaderRule):
    """`config.json` or `hf_quant_config.json` is valid JSON but not an object.

    ## What it does
    Reports a config file whose top-level JSON value is not an object.

    ## Why is this bad?
    Frameworks expect a mapping of settings and fail on anything else.

    ## Example
    `config.json` containing `[]` or `null`.

    ## How to fix
    Download the file again.
    """

    code = C.CF_NOT_OBJECT
    name = "config-not-an-object"
    summary = '`config.json` or `hf_quant_config.json` is valid JSON but not an object'
    consequences = (LOAD,)


class ConfigDuplicateKey(ReaderRule):
    """A config file repeats a key.

    ## What it does
    Reports keys that appear more than once in the same object of `config.json` or
    `hf_quant_config.json`.

    ## Why is this bad?
    JSON parsers silently keep the last value, so an edit to the first copy (e.g. of
    `quantization_config`) has no effect.

    ## Example
    Two `"quantization_config"` blocks in one `config.json`.

    ## How to fix
    Remove the stale copy.
    """

    code = C.CF_DUPLICATE_KEY
    name = "config-duplicate-key"
    summary = 'A config file repeats a key'
    consequences = (HYGIENE,)


CONTAINER_RULES: tuple[type[Rule], ...] = (
    ShardTooSmall,
    ShardHeaderTooLarge,
    ShardHeaderBeyondFile,
    ShardHeaderNotUtf8,
    ShardHeaderInvalidJson,
    ShardUnknownDtype,
    ShardInvalidTensorEntry,
    ShardInvalidMetadata,
    ShardInvalidOffsets,
    ShardTensorSizeMismatch,
    ShardTensorSizeOverflow,
    ShardSubByteMisaligned,
    ShardTruncated,
    ShardTrailingBytes,
    ShardDuplicateKey,
    GitLfsPointer,
    ShardUnreadable,
    ShardSpecDeviation,
    IndexInvalidJson,
    IndexInvalidWeightMap,
    IndexInvalidShardName,
    IndexMissingShard,
    IndexTensorNotInShard,
    TensorInMultipleShards,
    TensorNotInIndex,
    IndexTotalSizeMismatch,
    UnreferencedShard,
    NoSafetensorsWeights,
    IndexInvalidMetadata,
    IndexDuplicateKey,
    ConfigMissing,
    ConfigInvalidJson,
    ConfigNotAnObject,
    ConfigDuplicateKey,
)
