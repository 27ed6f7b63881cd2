"""The dtype names the harness's options take, and the torch dtype each means (torch.<value>)."""

DTYPE_NAMES = {
    "float64": "float64",
    "fp64": "float64",
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
}
