#!/usr/bin/python3
"""Export the embed benchmark's BERT to ONNX for the fastify-onnx peer.

  export_onnx.py MODEL_DIR [OUT]      (OUT defaults to MODEL_DIR/model.onnx)

Loads MODEL_DIR (config.json + model.safetensors) into the same torch module
the fastapi-torch peer serves (../fastapi-torch/bert.py) and writes it with
torch.onnx.export (opset 14): inputs input_ids and attention_mask (int64,
[batch, sequence], both dynamic), output last_hidden_state (float32,
[batch, sequence, hidden]). Pooling and normalisation stay in the server,
as with sentence-transformers' exported models. Needs only torch (Debian:
python3-torch); the onnx package is not used.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fastapi-torch"))
from bert import load  # noqa: E402


def export(model, out, what=""):
    """Write @model to @out (through a .tmp, then renamed) with the inputs
    and output above; @what is added to the line printed."""
    ids = torch.tensor([[101, 7592, 2088, 102]], dtype=torch.long)
    mask = torch.ones_like(ids)
    tmp = out + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), tmp, opset_version=14,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"},
                                        "last_hidden_state": {0: "batch", 1: "sequence"}})
    os.replace(tmp, out)
    print(f"wrote {out} ({os.path.getsize(out)} bytes{what}), torch {torch.__version__}")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: export_onnx.py MODEL_DIR [OUT]")
    folder = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(folder, "model.onnx")
    export(load(folder), out)


if __name__ == "__main__":
    main()
