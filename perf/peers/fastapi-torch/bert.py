"""A BERT sentence encoder in PyTorch, the way a user without the
transformers package writes one (transformers is not packaged in Debian):
BertTokenizer's WordPiece tokenizer in plain Python, transformers'
BertModel as torch.nn modules with the same parameter names (so the
checkpoint's state dict loads as is), sentence-transformers' mean pooling
and L2 normalisation. float32, as the model is stored.

Used by the fastapi-torch peer (app.py) and by the fastify-onnx peer's
export script (torch.onnx.export of the same module), and by
perf/lib/embed.py to count the tokens of the benchmark's sentences.

  tok = Tokenizer(MODEL_DIR + "/vocab.txt"); ids = tok.encode(text)
  model = load(MODEL_DIR)                      # eval mode
  vec = embed(model, ids)                      # list of floats, unit length
"""

import json
import math
import os
import struct
import unicodedata

# --- tokenizer (transformers' BertTokenizer: BasicTokenizer + WordpieceTokenizer)


def _is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c).startswith("C")


def _is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class Tokenizer:
    def __init__(self, vocab_path, max_length=256):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        self.cls, self.sep, self.unk = self.vocab["[CLS]"], self.vocab["[SEP]"], self.vocab["[UNK]"]
        self.max_length = max_length

    def _words(self, text):
        out = []
        for c in text:
            cp = ord(c)
            if cp == 0 or cp == 0xFFFD or _is_control(c):
                continue
            if _is_cjk(cp):
                out.append(" " + c + " ")
            elif _is_whitespace(c):
                out.append(" ")
            else:
                out.append(c)
        words = []
        for token in "".join(out).split():
            token = unicodedata.normalize("NFD", token.lower())
            token = "".join(c for c in token if unicodedata.category(c) != "Mn")
            current = ""
            for c in token:
                if _is_punctuation(c):
                    if current:
                        words.append(current)
                    words.append(c)
                    current = ""
                else:
                    current += c
            if current:
                words.append(current)
        return words

    def _wordpiece(self, word):
        if len(word) > 100:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return [self.unk]
            ids.append(found)
            start = end
        return ids

    def encode(self, text):
        """[CLS] ids [SEP], truncated to max_length."""
        ids = []
        for w in self._words(text):
            ids.extend(self._wordpiece(w))
        return [self.cls] + ids[:self.max_length - 2] + [self.sep]


# --- model (torch imported here only, so that the tokenizer needs no torch)

try:
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError:  # the tokenizer alone (perf/lib/embed.py) works without torch
    torch = None

if torch is not None:

    class Embeddings(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
            self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
            self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden_size"])
            self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

        def forward(self, input_ids):
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
            x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
                 + self.token_type_embeddings(torch.zeros_like(input_ids)))
            return self.LayerNorm(x)

    class SelfAttention(nn.Module):
        def __init__(self, c):
            super().__init__()
            h = c["hidden_size"]
            self.heads = c["num_attention_heads"]
            self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)

        def forward(self, x, additive_mask):
            b, t, h = x.shape
            d = h // self.heads

            def split(y):
                return y.view(b, t, self.heads, d).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(d) + additive_mask
            return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h)

    class Output(nn.Module):
        def __init__(self, c, inner):
            super().__init__()
            self.dense = nn.Linear(inner, c["hidden_size"])
            self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

        def forward(self, y, residual):
            return self.LayerNorm(self.dense(y) + residual)

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.self = SelfAttention(c)
            self.output = Output(c, c["hidden_size"])

        def forward(self, x, additive_mask):
            return self.output(self.self(x, additive_mask), x)

    class Intermediate(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

        def forward(self, x):
            return F.gelu(self.dense(x))

    class Layer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.attention = Attention(c)
            self.intermediate = Intermediate(c)
            self.output = Output(c, c["intermediate_size"])

        def forward(self, x, additive_mask):
            x = self.attention(x, additive_mask)
            return self.output(self.intermediate(x), x)

    class Encoder(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.layer = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))

    class BertModel(nn.Module):
        """forward(input_ids, attention_mask) -> last_hidden_state [B, T, H]."""

        def __init__(self, config):
            super().__init__()
            self.embeddings = Embeddings(config)
            self.encoder = Encoder(config)

        def forward(self, input_ids, attention_mask):
            x = self.embeddings(input_ids)
            additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            for layer in self.encoder.layer:
                x = layer(x, additive)
            return x

    def read_safetensors(path):
        """{name: tensor} from a float32 .safetensors file (no bert. prefix)."""
        with open(path, "rb") as f:
            data = f.read()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            assert info["dtype"] == "F32", name
            begin, end = info["data_offsets"]
            t = torch.frombuffer(bytearray(data[8 + n + begin:8 + n + end]), dtype=torch.float32)
            out[name[5:] if name.startswith("bert.") else name] = t.reshape(info["shape"])
        return out

    def load(folder):
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        model = BertModel(config)
        model.load_state_dict(read_safetensors(os.path.join(folder, "model.safetensors")), strict=True)
        return model.eval()

    def mean_pool(hidden, attention_mask):
        m = attention_mask[..., None].to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)

    @torch.inference_mode()
    def embed(model, ids):
        """Unit-length sentence embedding of one tokenized text, as a list."""
        input_ids = torch.tensor([ids], dtype=torch.long)
        mask = torch.ones_like(input_ids)
        pooled = mean_pool(model(input_ids, mask), mask)
        return F.normalize(pooled, p=2, dim=1)[0].tolist()
