'use strict'
// fastify peer for coring's benchmarks (perf/run). It serves the same routes
// with the same shapes as coring's hello and todo apps, in the settings a
// fastify user runs in production: logger off, one process, response schemas
// (fast-json-stringify) on the hot routes, state in an in-memory Map.
//
//   node server.js --port P [--host 127.0.0.1] [--workers N]
//
// --workers N > 1 forks N processes with node:cluster sharing the port (used
// for hello on 2 cores only: todo's state lives in one process's memory).
//
//   GET    /           200 {"message":"hello world"}
//   GET    /todos      200 [todo...] ordered by id
//   GET    /todos/:id  200 todo | 404
//   POST   /todos      201 todo, Location: /todos/<id> | 422 missing/empty title
//   PATCH  /todos/:id  200 todo | 404 | 422
//   DELETE /todos/:id  204 | 404
//   todo = {"id":n,"title":"...","completed":false}

const cluster = require('node:cluster')
const Fastify = require('fastify')

function arg (name, fallback) {
  const i = process.argv.indexOf(name)
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback
}

const port = Number(arg('--port', process.env.PORT || '3000'))
const host = arg('--host', '127.0.0.1')
const workers = Number(arg('--workers', '1'))

if (workers > 1 && cluster.isPrimary) {
  for (let i = 0; i < workers; i++) cluster.fork()
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => {
      for (const w of Object.values(cluster.workers)) w.kill('SIGTERM')
      process.exit(0)
    })
  }
} else {
  serve()
}

function serve () {

  const app = Fastify({ logger: false })

  const todoSchema = {
    type: 'object',
    properties: {
      id: { type: 'integer' },
      title: { type: 'string' },
      completed: { type: 'boolean' }
    },
    required: ['id', 'title', 'completed']
  }
  const errorSchema = {
    type: 'object',
    properties: { error: { type: 'string' } },
    required: ['error']
  }

  app.get('/', {
    schema: {
      response: {
        200: {
          type: 'object',
          properties: { message: { type: 'string' } },
          required: ['message']
        }
      }
    }
  }, async () => ({ message: 'hello world' }))

  // Map keeps insertion order and ids only grow, so iteration is id order.
  const todos = new Map()
  let nextId = 1

  function parseId (raw) {
    return /^[1-9][0-9]{0,15}$/.test(raw) ? Number(raw) : 0
  }

  function notFound (reply) {
    return reply.code(404).send({ error: 'todo not found' })
  }

  function invalid (reply, message) {
    return reply.code(422).send({ error: message })
  }

  app.get('/todos', {
    schema: { response: { 200: { type: 'array', items: todoSchema } } }
  }, async () => Array.from(todos.values()))

  app.get('/todos/:id', {
    schema: { response: { 200: todoSchema, 404: errorSchema } }
  }, async (request, reply) => {
    const todo = todos.get(parseId(request.params.id))
    return todo === undefined ? notFound(reply) : todo
  })

  app.post('/todos', {
    schema: { response: { 201: todoSchema, 422: errorSchema } }
  }, async (request, reply) => {
    const body = request.body
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return invalid(reply, 'body must be a JSON object')
    }
    if (typeof body.title !== 'string' || body.title.length === 0) {
      return invalid(reply, 'title must be a non-empty string')
    }
    if (body.completed !== undefined && typeof body.completed !== 'boolean') {
      return invalid(reply, 'completed must be a boolean')
    }
    const todo = { id: nextId++, title: body.title, completed: body.completed === true }
    todos.set(todo.id, todo)
    return reply.code(201).header('location', `/todos/${todo.id}`).send(todo)
  })

  app.patch('/todos/:id', {
    schema: { response: { 200: todoSchema, 404: errorSchema, 422: errorSchema } }
  }, async (request, reply) => {
    const todo = todos.get(parseId(request.params.id))
    if (todo === undefined) return notFound(reply)
    const body = request.body
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      return invalid(reply, 'body must be a JSON object')
    }
    if (body.title !== undefined && (typeof body.title !== 'string' || body.title.length === 0)) {
      return invalid(reply, 'title must be a non-empty string')
    }
    if (body.completed !== undefined && typeof body.completed !== 'boolean') {
      return invalid(reply, 'completed must be a boolean')
    }
    if (body.title !== undefined) todo.title = body.title
    if (body.completed !== undefined) todo.completed = body.completed
    return todo
  })

  app.delete('/todos/:id', async (request, reply) => {
    const id = parseId(request.params.id)
    if (!todos.delete(id)) return notFound(reply)
    return reply.code(204).send()
  })

  app.listen({ port, host }).catch((err) => {
    console.error(err)
    process.exit(1)
  })

  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => { app.close().then(() => process.exit(0)) })
  }
}
