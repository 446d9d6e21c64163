"""Compile the target data files into ``data/compiled.json``.

Every file is merged with the files it extends, validated strictly against ``schema.py``, its
architectures' ``like`` inheritance resolved and all defaults filled in. ``check`` then reads this one
JSON file instead of importing pydantic and validating TOML on every run; it falls back to the TOML
files (validated) whenever the digest of the data files no longer matches. The test suite fails when
the committed compiled file is stale.

    python -m ckptlint.targets.compile
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ckptlint import hardware
from ckptlint.hardware.parallel import validate_parallel_data
from ckptlint.targets import (COMPILED, DATA_DIR, FRAMEWORKS, data_digest, parse_version, raw_files, resolve_arch,
                              validate_target_data)


def build() -> dict[str, Any]:
    versions = {fw: sorted(raw_files(fw), key=parse_version) for fw in FRAMEWORKS}
    targets: dict[str, Any] = {}
    for fw, vs in versions.items():
        for v in vs:
            data = validate_target_data(fw, v)
            dump = data.model_dump(by_alias=True)
            dump["architectures"] = {name: resolve_arch(data, name).model_dump(by_alias=True)
                                     for name in data.architectures}
            targets[f"{fw}=={v}"] = dump
    return {"digest": data_digest(), "versions": versions, "targets": targets}


def render() -> str:
    return json.dumps(build(), sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def build_hardware() -> dict[str, Any]:
    return {"digest": hardware._digest(),
            "gpus": hardware.validate_gpu_data().model_dump(by_alias=True),
            "parallel": validate_parallel_data().model_dump(by_alias=True)}


def render_hardware() -> str:
    return json.dumps(build_hardware(), sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def main() -> int:
    for path, text in ((os.path.join(DATA_DIR, COMPILED), render()), (hardware.COMPILED, render_hardware())):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
