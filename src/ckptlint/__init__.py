"""ckptlint: will this quantized checkpoint load on that serving-framework release?

Reads ``config.json`` (+ ``hf_quant_config.json``) and the safetensors *headers* of a
checkpoint, simulates how a given SGLang or vLLM release renames every tensor into a
runtime module and decides whether that module is built quantized, and reports every
disagreement with what the checkpoint actually stores.
"""

__version__ = "0.1.0"
