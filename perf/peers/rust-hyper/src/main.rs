//! rust-hyper: hyper 0.14 on tokio's multi-threaded runtime, the peer for
//! coring's benchmarks (perf/run). The hello and todo apps with coring's
//! routes and JSON shapes, written the way hyper's examples write a service:
//! `service_fn` with a match on (method, path), serde_json for the bodies, a
//! BTreeMap behind a std Mutex. `#[tokio::main]` starts one worker thread per
//! core in the affinity mask, so `taskset` sets the cores it uses.
//!
//!   server --port P [--host 127.0.0.1]
//!
//!   GET    /           200 {"message":"hello world"}
//!   GET    /todos      200 [todo...] ordered by id
//!   GET    /todos/{id} 200 todo | 404 {"error":...}
//!   POST   /todos      201 todo, Location: /todos/<id> | 422 {"error":...}
//!   PATCH  /todos/{id} 200 todo | 404 | 422
//!   DELETE /todos/{id} 204 | 404

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use hyper::header::{CONTENT_TYPE, LOCATION};
use hyper::service::{make_service_fn, service_fn};
use hyper::{Body, Method, Request, Response, Server, StatusCode};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize)]
struct Todo {
    id: u64,
    title: String,
    completed: bool,
}

#[derive(Deserialize)]
struct TodoInput {
    title: Option<String>,
    completed: Option<bool>,
}

#[derive(Default)]
struct Store {
    todos: BTreeMap<u64, Todo>,
    next_id: u64,
}

type State = Arc<Mutex<Store>>;

fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(value).expect("serializable")))
        .expect("valid response")
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, &serde_json::json!({ "error": message }))
}

async fn input(req: Request<Body>) -> Result<TodoInput, Response<Body>> {
    let bytes = hyper::body::to_bytes(req.into_body())
        .await
        .map_err(|_| error(StatusCode::BAD_REQUEST, "could not read the body"))?;
    let input: TodoInput = serde_json::from_slice(&bytes).map_err(|_| {
        error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "body must be a JSON object with title (string) and completed (boolean)",
        )
    })?;
    if matches!(input.title.as_deref(), Some("")) {
        return Err(error(StatusCode::UNPROCESSABLE_ENTITY, "title must not be empty"));
    }
    Ok(input)
}

async fn route(req: Request<Body>, state: State) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let response = match (req.method(), path.as_str()) {
        (&Method::GET, "/") => json(StatusCode::OK, &serde_json::json!({ "message": "hello world" })),
        (&Method::GET, "/todos") => {
            let list: Vec<Todo> = state.lock().unwrap().todos.values().cloned().collect();
            json(StatusCode::OK, &list)
        }
        (&Method::POST, "/todos") => match input(req).await {
            Err(response) => response,
            Ok(TodoInput { title: None, .. }) => error(StatusCode::UNPROCESSABLE_ENTITY, "title is required"),
            Ok(TodoInput { title: Some(title), completed }) => {
                let todo = {
                    let mut store = state.lock().unwrap();
                    store.next_id += 1;
                    let todo = Todo { id: store.next_id, title, completed: completed.unwrap_or(false) };
                    store.todos.insert(todo.id, todo.clone());
                    todo
                };
                let mut response = json(StatusCode::CREATED, &todo);
                response
                    .headers_mut()
                    .insert(LOCATION, format!("/todos/{}", todo.id).parse().expect("valid header"));
                response
            }
        },
        (_, p) if p.starts_with("/todos/") => match p["/todos/".len()..].parse::<u64>() {
            Err(_) => error(StatusCode::BAD_REQUEST, "id must be an unsigned 64-bit integer"),
            Ok(id) => one(req, id, state).await,
        },
        (_, "/" | "/todos") => error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        _ => error(StatusCode::NOT_FOUND, "not found"),
    };
    Ok(response)
}

async fn one(req: Request<Body>, id: u64, state: State) -> Response<Body> {
    let not_found = || error(StatusCode::NOT_FOUND, "todo not found");
    match *req.method() {
        Method::GET => match state.lock().unwrap().todos.get(&id).cloned() {
            Some(todo) => json(StatusCode::OK, &todo),
            None => not_found(),
        },
        Method::PATCH => match input(req).await {
            Err(response) => response,
            Ok(TodoInput { title: None, completed: None }) => error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "nothing to update: give title and/or completed",
            ),
            Ok(TodoInput { title, completed }) => {
                let updated = {
                    let mut store = state.lock().unwrap();
                    store.todos.get_mut(&id).map(|todo| {
                        if let Some(title) = title {
                            todo.title = title;
                        }
                        if let Some(completed) = completed {
                            todo.completed = completed;
                        }
                        todo.clone()
                    })
                };
                match updated {
                    Some(todo) => json(StatusCode::OK, &todo),
                    None => not_found(),
                }
            }
        },
        Method::DELETE => match state.lock().unwrap().todos.remove(&id) {
            Some(_) => Response::builder()
                .status(StatusCode::NO_CONTENT)
                .body(Body::empty())
                .expect("valid response"),
            None => not_found(),
        },
        _ => error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    }
}

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

#[tokio::main]
async fn main() {
    let host = arg("--host", "127.0.0.1");
    let port = arg("--port", "8080");
    let addr: SocketAddr = format!("{}:{}", host, port).parse().expect("--host/--port: an address");
    let state: State = Arc::new(Mutex::new(Store::default()));
    let make_svc = make_service_fn(move |_conn| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(service_fn(move |req| route(req, state.clone()))) }
    });
    let server = Server::bind(&addr).serve(make_svc);
    let graceful = server.with_graceful_shutdown(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    });
    if let Err(e) = graceful.await {
        eprintln!("server error: {}", e);
        std::process::exit(1);
    }
}
