// go-fasthttp: valyala/fasthttp peer for coring's benchmarks (perf/run). The
// hello and todo apps with coring's routes and JSON shapes, written the way
// fasthttp users write them: one RequestHandler switching on the path,
// encoding/json, a map behind a sync.RWMutex. GOMAXPROCS defaults to the
// cores in the affinity mask, so `taskset` sets the cores it uses.
//
//	server -port P [-host 127.0.0.1]
//
//	GET    /           200 {"message":"hello world"}
//	GET    /todos      200 [todo...] ordered by id
//	GET    /todos/{id} 200 todo | 404 {"error":...}
//	POST   /todos      201 todo, Location: /todos/<id> | 422 {"error":...}
//	PATCH  /todos/{id} 200 todo | 404 | 422
//	DELETE /todos/{id} 204 | 404
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"log"
	"net"
	"sort"
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"
)

type Todo struct {
	ID        uint64 `json:"id"`
	Title     string `json:"title"`
	Completed bool   `json:"completed"`
}

type todoInput struct {
	Title     *string `json:"title"`
	Completed *bool   `json:"completed"`
}

var (
	mu     sync.RWMutex
	todos  = make(map[uint64]*Todo)
	nextID uint64
	hello  = []byte(`{"message":"hello world"}`)
	prefix = []byte("/todos/")
)

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	b, err := json.Marshal(v)
	if err != nil {
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetBody(b)
}

func writeError(ctx *fasthttp.RequestCtx, status int, msg string) {
	writeJSON(ctx, status, map[string]string{"error": msg})
}

func decode(ctx *fasthttp.RequestCtx) (*todoInput, bool) {
	var in todoInput
	if err := json.Unmarshal(ctx.PostBody(), &in); err != nil {
		writeError(ctx, fasthttp.StatusUnprocessableEntity, "body must be a JSON object with title (string) and completed (boolean)")
		return nil, false
	}
	if in.Title != nil && *in.Title == "" {
		writeError(ctx, fasthttp.StatusUnprocessableEntity, "title must not be empty")
		return nil, false
	}
	return &in, true
}

func list(ctx *fasthttp.RequestCtx) {
	mu.RLock()
	out := make([]Todo, 0, len(todos))
	for _, t := range todos {
		out = append(out, *t)
	}
	mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func create(ctx *fasthttp.RequestCtx) {
	in, ok := decode(ctx)
	if !ok {
		return
	}
	if in.Title == nil {
		writeError(ctx, fasthttp.StatusUnprocessableEntity, "title is required")
		return
	}
	t := &Todo{Title: *in.Title}
	if in.Completed != nil {
		t.Completed = *in.Completed
	}
	mu.Lock()
	nextID++
	t.ID = nextID
	todos[t.ID] = t
	c := *t
	mu.Unlock()
	ctx.Response.Header.Set("Location", "/todos/"+strconv.FormatUint(c.ID, 10))
	writeJSON(ctx, fasthttp.StatusCreated, &c)
}

func one(ctx *fasthttp.RequestCtx, id uint64) {
	switch string(ctx.Method()) {
	case fasthttp.MethodGet:
		mu.RLock()
		t, ok := todos[id]
		var c Todo
		if ok {
			c = *t
		}
		mu.RUnlock()
		if !ok {
			writeError(ctx, fasthttp.StatusNotFound, "todo not found")
			return
		}
		writeJSON(ctx, fasthttp.StatusOK, &c)
	case fasthttp.MethodPatch:
		in, ok := decode(ctx)
		if !ok {
			return
		}
		if in.Title == nil && in.Completed == nil {
			writeError(ctx, fasthttp.StatusUnprocessableEntity, "nothing to update: give title and/or completed")
			return
		}
		mu.Lock()
		t, found := todos[id]
		var c Todo
		if found {
			if in.Title != nil {
				t.Title = *in.Title
			}
			if in.Completed != nil {
				t.Completed = *in.Completed
			}
			c = *t
		}
		mu.Unlock()
		if !found {
			writeError(ctx, fasthttp.StatusNotFound, "todo not found")
			return
		}
		writeJSON(ctx, fasthttp.StatusOK, &c)
	case fasthttp.MethodDelete:
		mu.Lock()
		_, found := todos[id]
		delete(todos, id)
		mu.Unlock()
		if !found {
			writeError(ctx, fasthttp.StatusNotFound, "todo not found")
			return
		}
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "method not allowed")
	}
}

func handler(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	switch {
	case string(path) == "/":
		ctx.SetContentType("application/json")
		ctx.SetBody(hello)
	case string(path) == "/todos":
		switch string(ctx.Method()) {
		case fasthttp.MethodGet:
			list(ctx)
		case fasthttp.MethodPost:
			create(ctx)
		default:
			writeError(ctx, fasthttp.StatusMethodNotAllowed, "method not allowed")
		}
	case bytes.HasPrefix(path, prefix):
		id, err := strconv.ParseUint(string(path[len(prefix):]), 10, 64)
		if err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, "id must be an unsigned 64-bit integer")
			return
		}
		one(ctx, id)
	default:
		writeError(ctx, fasthttp.StatusNotFound, "not found")
	}
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 8080, "port to listen on")
	flag.Parse()
	s := &fasthttp.Server{Handler: handler, Name: "fasthttp"}
	log.Fatal(s.ListenAndServe(net.JoinHostPort(*host, strconv.Itoa(*port))))
}
