'use strict'
// express peer for coring's benchmarks (perf/run): the hello and todo apps
// with coring's routes and JSON shapes, written the way express users write
// them (express.json() body parser, res.status().json()), NODE_ENV=production,
// no request logging, state in an in-memory Map.
//
//   node server.js --port P [--host 127.0.0.1] [--workers N]
//
// --workers N > 1 forks N processes with node:cluster sharing the port (used
// for hello on 2 cores only: todo's state lives in one process's memory).
//
//   GET    /           200 {"message":"hello world"}
//   GET    /todos      200 [todo...] ordered by id
//   GET    /todos/:id  200 todo | 404 {"error":...}
//   POST   /todos      201 todo, Location: /todos/<id> | 422 {"error":...}
//   PATCH  /todos/:id  200 todo | 404 | 422
//   DELETE /todos/:id  204 | 404

const cluster = require('node:cluster')
const express = require('express')

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
  const app = express()
  app.disable('x-powered-by')
  app.disable('etag')
  app.use(express.json())

  app.get('/', (req, res) => {
    res.json({ message: 'hello world' })
  })

  // Map keeps insertion order and ids only grow, so iteration is id order.
  const todos = new Map()
  let nextId = 1

  const parseId = (raw) => /^[1-9][0-9]{0,15}$/.test(raw) ? Number(raw) : 0
  const notFound = (res) => res.status(404).json({ error: 'todo not found' })
  const invalid = (res, message) => res.status(422).json({ error: message })

  function validate (body, partial) {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'body must be a JSON object'
    if (!partial || body.title !== undefined) {
      if (typeof body.title !== 'string') return 'title must be a string'
      if (body.title.length === 0) return 'title must not be empty'
    }
    if (body.completed !== undefined && typeof body.completed !== 'boolean') return 'completed must be a boolean'
    if (partial && body.title === undefined && body.completed === undefined) {
      return 'nothing to update: give title and/or completed'
    }
    return null
  }

  app.get('/todos', (req, res) => {
    res.json(Array.from(todos.values()))
  })

  app.get('/todos/:id', (req, res) => {
    const todo = todos.get(parseId(req.params.id))
    if (todo === undefined) return notFound(res)
    res.json(todo)
  })

  app.post('/todos', (req, res) => {
    const error = validate(req.body, false)
    if (error) return invalid(res, error)
    const todo = { id: nextId++, title: req.body.title, completed: req.body.completed === true }
    todos.set(todo.id, todo)
    res.status(201).location(`/todos/${todo.id}`).json(todo)
  })

  app.patch('/todos/:id', (req, res) => {
    const todo = todos.get(parseId(req.params.id))
    if (todo === undefined) return notFound(res)
    const error = validate(req.body, true)
    if (error) return invalid(res, error)
    if (req.body.title !== undefined) todo.title = req.body.title
    if (req.body.completed !== undefined) todo.completed = req.body.completed
    res.json(todo)
  })

  app.delete('/todos/:id', (req, res) => {
    if (!todos.delete(parseId(req.params.id))) return notFound(res)
    res.status(204).end()
  })

  // Malformed JSON from express.json(): 400 with the same error shape.
  app.use((err, req, res, next) => {
    res.status(err.status || 500).json({ error: err.expose ? err.message : 'internal error' })
  })

  const server = app.listen(port, host)
  server.on('error', (err) => { console.error(err); process.exit(1) })
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => process.exit(0))
  }
}
