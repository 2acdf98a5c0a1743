"""fastapi-torch peer for coring's embed benchmark (perf/run): sentence
embeddings from a BERT encoder in PyTorch, served by FastAPI on uvicorn,
written the way a FastAPI + torch user writes it: the model loaded once at
import, a pydantic request model, a plain `def` endpoint (FastAPI runs it in
its thread pool so the event loop stays free), inference under
torch.inference_mode, torch's threads set to the cores given.

  POST /embed {"text": "..."} -> 200 {"embedding": [384 floats]}  (unit length)

Reads PERF_EMBED_MODEL (the model folder: config.json, model.safetensors,
vocab.txt) and PERF_CPUS (torch.set_num_threads). With PERF_TORCH_INT8=1
(the fastapi-torch-int8 peer) the model's nn.Linear layers are quantised
to int8 at load by torch.ao.quantization.quantize_dynamic, what PyTorch's
documentation tells a user to do for a BERT on CPU: int8 weights, the
activations quantised per batch at run time, float32 everywhere else.
"""

import os

import torch
from fastapi import FastAPI
from pydantic import BaseModel, constr

from bert import Tokenizer, embed, load

torch.set_num_threads(int(os.environ.get("PERF_CPUS", "1")))
MODEL_DIR = os.environ["PERF_EMBED_MODEL"]
tokenizer = Tokenizer(os.path.join(MODEL_DIR, "vocab.txt"))
model = load(MODEL_DIR)
if os.environ.get("PERF_TORCH_INT8") == "1":
    model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


class EmbedIn(BaseModel):
    text: constr(strict=True, min_length=1)


@app.post("/embed")
def post_embed(body: EmbedIn):
    return {"embedding": embed(model, tokenizer.encode(body.text))}
