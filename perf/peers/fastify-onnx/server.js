'use strict'
// fastify + onnxruntime-node peer for coring's embed benchmark (perf/run):
// sentence embeddings from the same BERT weights, exported to ONNX
// (export_onnx.py), written the way a Node user serves an ONNX encoder:
// Hugging Face's JavaScript tokenizer (@huggingface/tokenizers) on the
// model's tokenizer.json, one onnxruntime InferenceSession created at start,
// session.run (async, off the event loop) per request, mean pooling and L2
// normalisation in JS. fastify with the logger off, a request body schema.
//
//   node server.js --port P [--host 127.0.0.1] --model DIR [--threads N] [--onnx FILE]
//
//   POST /embed {"text": "..."} -> 200 {"embedding": [384 floats]}
// DIR holds model.onnx and tokenizer.json. --threads: onnxruntime's
// intra-op threads (the cores given). --onnx: the ONNX file in DIR
// (default model.onnx; the fastify-onnx-int8 peer: model-int8.onnx).

const fs = require('node:fs')
const path = require('node:path')
const ort = require('onnxruntime-node')
const Fastify = require('fastify')

function arg (name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback
}

const port = Number(arg('--port', process.env.PORT || '3000'))
const host = arg('--host', '127.0.0.1')
const modelDir = arg('--model', process.env.PERF_EMBED_MODEL)
const threads = Number(arg('--threads', '1'))
const onnxFile = arg('--onnx', 'model.onnx')
const maxLength = 256

async function main () {
  // @huggingface/tokenizers is an ES module.
  const { Tokenizer } = await import('@huggingface/tokenizers')
  const tokenizer = new Tokenizer(
    JSON.parse(fs.readFileSync(path.join(modelDir, 'tokenizer.json'), 'utf8')), {})
  const session = await ort.InferenceSession.create(path.join(modelDir, onnxFile), {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all'
  })

  async function embed (text) {
    let ids = tokenizer.encode(text).ids
    if (ids.length > maxLength) ids = [...ids.slice(0, maxLength - 1), ids[ids.length - 1]]
    const n = ids.length
    const inputIds = new BigInt64Array(n)
    const mask = new BigInt64Array(n).fill(1n)
    for (let i = 0; i < n; i++) inputIds[i] = BigInt(ids[i])
    const out = await session.run({
      input_ids: new ort.Tensor('int64', inputIds, [1, n]),
      attention_mask: new ort.Tensor('int64', mask, [1, n])
    })
    const hidden = out.last_hidden_state.data
    const dim = hidden.length / n
    const v = new Array(dim).fill(0)
    for (let t = 0; t < n; t++) {
      for (let j = 0; j < dim; j++) v[j] += hidden[t * dim + j]
    }
    let norm = 0
    for (let j = 0; j < dim; j++) { v[j] /= n; norm += v[j] * v[j] }
    norm = Math.max(Math.sqrt(norm), 1e-12)
    for (let j = 0; j < dim; j++) v[j] /= norm
    return v
  }

  const app = Fastify({ logger: false })
  app.post('/embed', {
    schema: {
      body: {
        type: 'object',
        properties: { text: { type: 'string', minLength: 1 } },
        required: ['text']
      }
    }
  }, async (request) => {
    return { embedding: await embed(request.body.text) }
  })

  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => { app.close().then(() => process.exit(0)) })
  }
  await app.listen({ port, host, backlog: 4096 })
}

main().catch((err) => { console.error(err); process.exit(1) })
