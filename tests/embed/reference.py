#!/usr/bin/python3
"""Reference sentence embeddings from PyTorch, for checking coring's encoder.

A plain BERT written here with torch.nn.functional (transformers is not
packaged in Debian), reading the same model folder as coring: config.json and
model.safetensors (parsed by hand: 8-byte header length, JSON header, raw
little-endian data). It follows transformers' BertModel: embeddings (word +
position + token type 0) and LayerNorm; per layer, self-attention with the
additive padding mask, output dense + residual + LayerNorm, intermediate
dense + exact GELU, output dense + residual + LayerNorm. Then
sentence-transformers' mean pooling over the attention mask and
F.normalize. Sequences are sorted by length and padded in batches whose
longest is at most twice their shortest plus 16, so the mask is exercised in
every batch and the one 256-token sentence does not pad the short ones to
256 (one batch of all made this 43 s instead of 5 s). It computes in
float64, so differences from coring are coring's float32 error.

  reference.py MODEL_DIR IDS_JSONL > out.json
IDS_JSONL: one JSON array of token ids per line (from tokenize.mjs).
Prints {"pooled": [[...], ...], "normalized": [[...], ...]}.
"""

import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        a = np.frombuffer(data, dtype="<f4", count=(end - begin) // 4, offset=base + begin)
        key = name[5:] if name.startswith("bert.") else name
        out[key] = torch.from_numpy(a.reshape(info["shape"]).astype(np.float64))
    return out


def encode(cfg, w, batch):
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    d, eps = h // heads, cfg.get("layer_norm_eps", 1e-12)
    longest = max(len(ids) for ids in batch)
    ids = torch.zeros(len(batch), longest, dtype=torch.long)
    mask = torch.zeros(len(batch), longest, dtype=torch.float64)
    for i, seq in enumerate(batch):
        ids[i, :len(seq)] = torch.tensor(seq)
        mask[i, :len(seq)] = 1
    positions = torch.arange(longest)
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][positions][None]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = F.layer_norm(x, (h,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    additive = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float64).min
    b, t = ids.shape
    for n in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % n

        def lin(x, name):
            return F.linear(x, w[p + name + ".weight"], w[p + name + ".bias"])

        def split(x):
            return x.view(b, t, heads, d).transpose(1, 2)

        q, k, v = (split(lin(x, "attention.self." + m)) for m in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / (d ** 0.5) + additive
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h)
        x = F.layer_norm(lin(ctx, "attention.output.dense") + x, (h,),
                         w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        inter = F.gelu(lin(x, "intermediate.dense"))
        x = F.layer_norm(lin(inter, "output.dense") + x, (h,),
                         w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
    return pooled, F.normalize(pooled, p=2, dim=1)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: reference.py MODEL_DIR IDS_JSONL")
    folder, ids_path = sys.argv[1:]
    torch.set_num_threads(1)
    with open(folder + "/config.json") as f:
        cfg = json.load(f)
    w = load_safetensors(folder + "/model.safetensors")
    with open(ids_path) as f:
        batch = [json.loads(line) for line in f if line.strip()]
    order = sorted(range(len(batch)), key=lambda i: len(batch[i]))
    groups = []
    for i in order:
        if groups and len(batch[i]) <= 2 * len(batch[groups[-1][0]]) + 16:
            groups[-1].append(i)
        else:
            groups.append([i])
    pooled, normalized = [None] * len(batch), [None] * len(batch)
    with torch.no_grad():
        for g in groups:
            p, n = encode(cfg, w, [batch[i] for i in g])
            for row, i in enumerate(g):
                pooled[i], normalized[i] = p[row].tolist(), n[row].tolist()
    json.dump({"pooled": pooled, "normalized": normalized}, sys.stdout)


if __name__ == "__main__":
    main()
