// go-nethttp: Go's standard net/http peer for coring's benchmarks (perf/run).
// The hello and todo apps with coring's routes and JSON shapes, written the
// way Go users write them with the standard library only: http.ServeMux,
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
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
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

type store struct {
	mu     sync.RWMutex
	todos  map[uint64]*Todo
	nextID uint64
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func decode(w http.ResponseWriter, r *http.Request) (*todoInput, bool) {
	var in todoInput
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "body must be a JSON object with title (string) and completed (boolean)")
		return nil, false
	}
	if in.Title != nil && *in.Title == "" {
		writeError(w, http.StatusUnprocessableEntity, "title must not be empty")
		return nil, false
	}
	return &in, true
}

func (s *store) list(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	out := make([]*Todo, 0, len(s.todos))
	for _, t := range s.todos {
		c := *t
		out = append(out, &c)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(w, http.StatusOK, out)
}

func (s *store) create(w http.ResponseWriter, r *http.Request) {
	in, ok := decode(w, r)
	if !ok {
		return
	}
	if in.Title == nil {
		writeError(w, http.StatusUnprocessableEntity, "title is required")
		return
	}
	t := &Todo{Title: *in.Title}
	if in.Completed != nil {
		t.Completed = *in.Completed
	}
	s.mu.Lock()
	s.nextID++
	t.ID = s.nextID
	s.todos[t.ID] = t
	c := *t
	s.mu.Unlock()
	w.Header().Set("Location", "/todos/"+strconv.FormatUint(c.ID, 10))
	writeJSON(w, http.StatusCreated, &c)
}

func (s *store) one(w http.ResponseWriter, r *http.Request, id uint64) {
	switch r.Method {
	case http.MethodGet:
		s.mu.RLock()
		t, ok := s.todos[id]
		var c Todo
		if ok {
			c = *t
		}
		s.mu.RUnlock()
		if !ok {
			writeError(w, http.StatusNotFound, "todo not found")
			return
		}
		writeJSON(w, http.StatusOK, &c)
	case http.MethodPatch:
		in, ok := decode(w, r)
		if !ok {
			return
		}
		if in.Title == nil && in.Completed == nil {
			writeError(w, http.StatusUnprocessableEntity, "nothing to update: give title and/or completed")
			return
		}
		s.mu.Lock()
		t, found := s.todos[id]
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
		s.mu.Unlock()
		if !found {
			writeError(w, http.StatusNotFound, "todo not found")
			return
		}
		writeJSON(w, http.StatusOK, &c)
	case http.MethodDelete:
		s.mu.Lock()
		_, found := s.todos[id]
		delete(s.todos, id)
		s.mu.Unlock()
		if !found {
			writeError(w, http.StatusNotFound, "todo not found")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 8080, "port to listen on")
	flag.Parse()

	s := &store{todos: make(map[uint64]*Todo)}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			writeError(w, http.StatusNotFound, "not found")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"message": "hello world"})
	})
	mux.HandleFunc("/todos", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			s.list(w, r)
		case http.MethodPost:
			s.create(w, r)
		default:
			writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		}
	})
	mux.HandleFunc("/todos/", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(strings.TrimPrefix(r.URL.Path, "/todos/"), 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, "id must be an unsigned 64-bit integer")
			return
		}
		s.one(w, r, id)
	})

	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	log.Fatal((&http.Server{Addr: addr, Handler: mux}).ListenAndServe())
}
