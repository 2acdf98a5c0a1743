#!/usr/bin/python3
"""Export the embed benchmark's BERT to an int8 ONNX model (fastify-onnx-int8).

  export_onnx_int8.py MODEL_DIR [OUT]   (OUT defaults to MODEL_DIR/model-int8.onnx)

What onnxruntime's own `quantize_dynamic` (Python, onnxruntime.quantization,
on PyPI, not reachable here) writes for each MatMul with a constant weight,
made instead while exporting with torch.onnx.export: every nn.Linear
becomes DynamicQuantizeLinear (the activations to uint8, scale and zero
point per tensor, computed at run time) -> MatMulInteger (uint8 x int8 ->
int32) -> Cast -> Mul (activation scale x weight scale) -> Add (bias). The
weights are quantised once here, symmetric int8 per tensor (zero point 0,
scale max|w| / 127), onnxruntime's QuantType.QInt8 / per_channel=False
default. Everything else (embeddings, LayerNorm, softmax, GELU) stays
float32, as in onnxruntime's output. Same inputs and output as
export_onnx.py. Needs only torch (Debian: python3-torch).
"""

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fastapi-torch"))
from bert import load  # noqa: E402
from export_onnx import export  # noqa: E402


class _Int8Linear(torch.autograd.Function):
    """y = x W^T + b with W in int8: float maths in torch (for the trace),
    the integer ONNX pattern in symbolic()."""

    @staticmethod
    def forward(ctx, x, wq_t, w_scale, bias):  # noqa: ARG004
        return torch.matmul(x, wq_t.to(torch.float32) * w_scale) + bias

    @staticmethod
    def symbolic(g, x, wq_t, w_scale, bias):
        xq, x_scale, x_zero = g.op("DynamicQuantizeLinear", x, outputs=3)
        w_zero = g.op("Constant", value_t=torch.tensor(0, dtype=torch.int8))
        acc = g.op("MatMulInteger", xq, wq_t, x_zero, w_zero)
        y = g.op("Cast", acc, to_i=1)  # TensorProto.FLOAT
        scale = g.op("Mul", x_scale, w_scale)
        return g.op("Add", g.op("Mul", y, scale), bias)


class Int8Linear(nn.Module):
    def __init__(self, linear):
        super().__init__()
        w = linear.weight.detach()
        scale = w.abs().max().clamp(min=1e-12) / 127.0
        self.register_buffer("wq_t", torch.clamp(torch.round(w / scale), -127, 127).to(torch.int8).t().contiguous())
        self.register_buffer("w_scale", scale.reshape(()).to(torch.float32))
        self.register_buffer("bias", linear.bias.detach().clone())

    def forward(self, x):
        return _Int8Linear.apply(x, self.wq_t, self.w_scale, self.bias)


def quantise(module):
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, Int8Linear(child))
        else:
            quantise(child)
    return module


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: export_onnx_int8.py MODEL_DIR [OUT]")
    folder = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(folder, "model-int8.onnx")
    export(quantise(load(folder)), out, ", int8 MatMulInteger")


if __name__ == "__main__":
    main()
