"""File names and the URL scheme that both the loader and the remote source need.

Kept apart so that :mod:`ckptlint.reader.remote` does not import the loader that opens it.
"""

INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
QUANT_CONFIG_NAME = "hf_quant_config.json"
HF_SCHEME = "hf://"
