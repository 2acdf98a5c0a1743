#!/usr/bin/python3
"""Would bfloat16 products keep the float32 encoder within its reference bound?

AVX-512 BF16's vdpbf16ps does twice the multiply-adds a cycle of a float32
FMA (coring-peak-compute), on inputs rounded to bfloat16 (8 significant
bits). Before writing such a kernel, this measures what the rounding alone
costs: tests/embed/reference.py's BERT (float64) on MODEL_DIR, once as is
and once with every linear layer's input and weights rounded to bfloat16
(products and sums still in float64, so a real kernel, summing in float32,
can only be worse), over 36 random sequences of 20-40 token ids (fixed
seed), and prints the largest absolute difference of the normalised
vectors beside the bound the reference test holds coring's float32 path
to (1e-4, tests/embed/test_embed.py), and the same with only the input
rounded (weights kept float32).

  perf/tools/embed_bf16_accuracy.py MODEL_DIR     (python3-torch)
"""

import json
import os
import random
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "embed"))
import reference  # noqa: E402

BOUND = 1e-4


def bf16(t):
    return t.to(torch.bfloat16).to(torch.float64)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: embed_bf16_accuracy.py MODEL_DIR")
    folder = sys.argv[1]
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    w = reference.load_safetensors(os.path.join(folder, "model.safetensors"))
    rng = random.Random(1)
    seqs = [[101] + [rng.randrange(1000, cfg["vocab_size"]) for _ in range(rng.randrange(18, 38))] + [102]
            for _ in range(36)]
    torch.set_num_threads(1)
    linear = F.linear
    variants = {"exact": linear,
                "bf16 input and weights": lambda x, W, b=None: linear(bf16(x), bf16(W), b),
                "bf16 input only": lambda x, W, b=None: linear(bf16(x), W, b)}
    out = {}
    with torch.no_grad():
        for name, fn in variants.items():
            reference.F.linear = fn
            out[name] = [reference.encode(cfg, w, [s])[1][0] for s in seqs]
    reference.F.linear = linear
    for name in ("bf16 input and weights", "bf16 input only"):
        diff = max(float((a - b).abs().max()) for a, b in zip(out["exact"], out[name]))
        cos = min(float((a * b).sum()) for a, b in zip(out["exact"], out[name]))
        verdict = "within" if diff <= BOUND else "over"
        print(f"{name}: max abs diff {diff:.3g} ({verdict} the {BOUND:g} bound), "
              f"min cosine similarity {cos:.6f}")


if __name__ == "__main__":
    main()
