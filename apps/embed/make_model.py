#!/usr/bin/python3
"""Write a BERT model folder with random weights, for tests and benchmarks.

The folder has what coring's --embed-model reads: config.json (Hugging Face
BertConfig fields), model.safetensors (float32, tensor names as
transformers' BertModel writes them) and vocab.txt (copied), plus
sentence_bert_config.json (max_seq_length). The defaults are the shapes of
sentence-transformers/all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads,
FFN 1536, 512 positions, the 30,522-token bert-base-uncased vocabulary);
a fixed --seed gives the same bytes every time.

Weights follow BERT's initialisation scale (normal, std 0.02) so that
activations stay well-conditioned; biases and LayerNorm parameters are
perturbed around 0 and 1 so that a mix-up of any two tensors shows.

  apps/embed/make_model.py --out /tmp/minilm                  # MiniLM-shaped
  apps/embed/make_model.py --out /tmp/tiny --layers 2 --hidden 32 --heads 4 --intermediate 64

Needs only /usr/bin/python3 and numpy (Debian: python3-numpy); when numpy
is missing the script installs it (`.ci/install-deps tools`, with sudo when
not root) and goes on.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import numpy as np
except ImportError:
    # Debian's python3-numpy is for /usr/bin/python3: install it and re-run
    # under that interpreter (once).
    if os.environ.get("CORING_MAKE_MODEL_RETRY"):
        sys.exit("make_model.py: numpy still cannot be imported by /usr/bin/python3")
    print("make_model.py: numpy is missing: installing python3-numpy", file=sys.stderr)
    subprocess.run([os.path.join(ROOT, ".ci", "install-deps"), "tools"], check=True)
    os.environ["CORING_MAKE_MODEL_RETRY"] = "1"
    os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__)] + sys.argv[1:])
DEFAULT_VOCAB = os.path.join(ROOT, "tests", "data", "minilm", "vocab.txt")


def tensors(args, vocab_size, rng):
    h, i = args.hidden, args.intermediate

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype("<f4")

    def norm(prefix):
        yield prefix + ".weight", (1 + normal(h, std=0.05)).astype("<f4")
        yield prefix + ".bias", normal(h)

    def linear(prefix, out_dim, in_dim):
        yield prefix + ".weight", normal(out_dim, in_dim)
        yield prefix + ".bias", normal(out_dim)

    yield "embeddings.word_embeddings.weight", normal(vocab_size, h)
    yield "embeddings.position_embeddings.weight", normal(args.max_positions, h)
    yield "embeddings.token_type_embeddings.weight", normal(2, h)
    yield from norm("embeddings.LayerNorm")
    for n in range(args.layers):
        p = "encoder.layer.%d." % n
        yield from linear(p + "attention.self.query", h, h)
        yield from linear(p + "attention.self.key", h, h)
        yield from linear(p + "attention.self.value", h, h)
        yield from linear(p + "attention.output.dense", h, h)
        yield from norm(p + "attention.output.LayerNorm")
        yield from linear(p + "intermediate.dense", i, h)
        yield from linear(p + "output.dense", h, i)
        yield from norm(p + "output.LayerNorm")


def write_safetensors(path, items):
    """8-byte little-endian header size, JSON header (padded to 8 bytes), data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, array in items:
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _, array in items:
            f.write(np.ascontiguousarray(array).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder to write (created)")
    ap.add_argument("--vocab", default=DEFAULT_VOCAB, help="vocab.txt to copy (default: tests/data/minilm/vocab.txt)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--max-positions", type=int, default=512)
    ap.add_argument("--max-seq-length", type=int, default=256)
    ap.add_argument("--prefix", default="", help='prepended to every tensor name, e.g. "bert."')
    ap.add_argument("--seed", type=int, default=20240601)
    args = ap.parse_args()
    if args.hidden % args.heads:
        ap.error("--hidden must be a multiple of --heads")

    os.makedirs(args.out, exist_ok=True)
    shutil.copyfile(args.vocab, os.path.join(args.out, "vocab.txt"))
    with open(args.vocab, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    rng = np.random.default_rng(args.seed)
    items = [(args.prefix + name, a) for name, a in tensors(args, vocab_size, rng)]
    write_safetensors(os.path.join(args.out, "model.safetensors"), items)
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
        "hidden_size": args.hidden, "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads, "intermediate_size": args.intermediate,
        "max_position_embeddings": args.max_positions, "vocab_size": vocab_size,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
        "position_embedding_type": "absolute", "pad_token_id": 0,
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": args.max_seq_length, "do_lower_case": False}, f)


if __name__ == "__main__":
    main()
