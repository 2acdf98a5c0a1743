//! rust-hyper-pg: hyper 0.14 on tokio's multi-threaded runtime with
//! tokio-postgres, the peer for coring's users benchmark (perf/run). The
//! users app with coring's routes, statuses and JSON shapes, on the same
//! PostgreSQL table (DATABASE_URL: a libpq conninfo or URL). A few
//! connections (2 per worker thread, as coring's default --db-pool 2 per
//! thread), each with its statements prepared once, shared round-robin:
//! tokio-postgres pipelines the queries of concurrent requests on one
//! connection. created_at is formatted by PostgreSQL, as coring does.
//!
//!   server --port P [--host 127.0.0.1] [--connections N]
//!
//!   GET  /users[?limit=1..100&after_id=N]  200 [user...] by id (default 50)
//!   GET  /users/{id}                       200 user | 404 {"error"} | 400
//!   POST /users {"name","email"}           201 user + Location | 409 | 422 | 400

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hyper::header::{CONTENT_TYPE, LOCATION};
use hyper::service::{make_service_fn, service_fn};
use hyper::{Body, Method, Request, Response, Server, StatusCode};
use serde::{Deserialize, Serialize};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls, Row, Statement};

const COLUMNS: &str = "id, name, email, \
    to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";

#[derive(Serialize)]
struct User {
    id: i64,
    name: String,
    email: String,
    created_at: String,
}

#[derive(Deserialize)]
struct UserInput {
    name: Option<serde_json::Value>,
    email: Option<serde_json::Value>,
}

struct Conn {
    client: Client,
    list: Statement,
    get: Statement,
    insert: Statement,
}

struct Pool {
    conns: Vec<Conn>,
    next: AtomicUsize,
}

impl Pool {
    fn pick(&self) -> &Conn {
        &self.conns[self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len()]
    }
}

fn user(row: &Row) -> User {
    User { id: row.get(0), name: row.get(1), email: row.get(2), created_at: row.get(3) }
}

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

fn db_error(e: &tokio_postgres::Error) -> Response<Body> {
    match e.code() {
        Some(c) if *c == SqlState::UNIQUE_VIOLATION => {
            error(StatusCode::CONFLICT, "a user with this email already exists")
        }
        Some(c) if *c == SqlState::CHECK_VIOLATION || c.code().starts_with("22") => {
            error(StatusCode::UNPROCESSABLE_ENTITY, "invalid user")
        }
        Some(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "database error"),
        None => {
            let mut r = error(StatusCode::SERVICE_UNAVAILABLE, "database unavailable");
            r.headers_mut().insert("Retry-After", hyper::header::HeaderValue::from_static("1"));
            r
        }
    }
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then_some(v)
    })
}

fn parse_id(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

async fn list_users(req: &Request<Body>, pool: &Pool) -> Response<Body> {
    let q = req.uri().query().unwrap_or("");
    let limit = match query_param(q, "limit") {
        None => 50,
        Some(v) => match parse_id(v) {
            Some(n) if (1..=100).contains(&n) => n,
            _ => return error(StatusCode::BAD_REQUEST, "limit must be an integer from 1 to 100"),
        },
    };
    let after = match query_param(q, "after_id") {
        None => 0,
        Some(v) => match parse_id(v) {
            Some(n) => n,
            None => return error(StatusCode::BAD_REQUEST, "after_id must be a non-negative integer"),
        },
    };
    let c = pool.pick();
    match c.client.query(&c.list, &[&after, &limit]).await {
        Ok(rows) => json(StatusCode::OK, &rows.iter().map(user).collect::<Vec<_>>()),
        Err(e) => db_error(&e),
    }
}

async fn get_user(id: &str, pool: &Pool) -> Response<Body> {
    let id = match parse_id(id) {
        Some(id) => id,
        None if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {
            return error(StatusCode::NOT_FOUND, "user not found")
        }
        None => return error(StatusCode::BAD_REQUEST, "id must be a positive integer"),
    };
    let c = pool.pick();
    match c.client.query_opt(&c.get, &[&id]).await {
        Ok(Some(row)) => json(StatusCode::OK, &user(&row)),
        Ok(None) => error(StatusCode::NOT_FOUND, "user not found"),
        Err(e) => db_error(&e),
    }
}

fn field(v: &Option<serde_json::Value>, key: &str, max: usize) -> Result<String, Response<Body>> {
    let s = match v {
        None => return Err(error(StatusCode::UNPROCESSABLE_ENTITY, &format!("{} is required", key))),
        Some(serde_json::Value::String(s)) => s,
        Some(_) => return Err(error(StatusCode::UNPROCESSABLE_ENTITY, &format!("{} must be a string", key))),
    };
    if s.trim().is_empty() || s.contains('\0') {
        return Err(error(StatusCode::UNPROCESSABLE_ENTITY, &format!("{} must not be empty", key)));
    }
    if s.chars().count() > max {
        return Err(error(StatusCode::UNPROCESSABLE_ENTITY, &format!("{} must be at most {} characters", key, max)));
    }
    Ok(s.clone())
}

async fn create_user(req: Request<Body>, pool: &Pool) -> Response<Body> {
    let bytes = match hyper::body::to_bytes(req.into_body()).await {
        Ok(b) => b,
        Err(_) => return error(StatusCode::BAD_REQUEST, "could not read the body"),
    };
    let value: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("invalid JSON: {}", e)),
    };
    if !value.is_object() {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "body must be a JSON object");
    }
    let input: UserInput = serde_json::from_value(value).expect("an object");
    let name = match field(&input.name, "name", 100) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let email = match field(&input.email, "email", 254) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let valid = match email.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty() && !domain.is_empty() && !domain.contains('@') && !email.bytes().any(|b| b <= b' ')
        }
        None => false,
    };
    if !valid {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "email must contain exactly one @ between a local part and a domain, and no spaces",
        );
    }
    let c = pool.pick();
    match c.client.query_one(&c.insert, &[&name, &email]).await {
        Ok(row) => {
            let u = user(&row);
            let mut r = json(StatusCode::CREATED, &u);
            r.headers_mut().insert(LOCATION, format!("/users/{}", u.id).parse().expect("header"));
            r
        }
        Err(e) => db_error(&e),
    }
}

async fn route(req: Request<Body>, pool: Arc<Pool>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    let resp = match (req.method(), path.as_str()) {
        (&Method::GET, "/users") => list_users(&req, &pool).await,
        (&Method::POST, "/users") => create_user(req, &pool).await,
        (&Method::GET, p) if p.starts_with("/users/") => get_user(&p[7..], &pool).await,
        (_, "/users") => error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        _ => error(StatusCode::NOT_FOUND, "not found"),
    };
    Ok(resp)
}

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

async fn connect(url: &str) -> Conn {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("connect to DATABASE_URL");
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("database connection error: {}", e);
        }
    });
    let list = client
        .prepare(&format!("SELECT {} FROM users WHERE id > $1 ORDER BY id LIMIT $2", COLUMNS))
        .await
        .expect("prepare list");
    let get = client
        .prepare(&format!("SELECT {} FROM users WHERE id = $1", COLUMNS))
        .await
        .expect("prepare get");
    let insert = client
        .prepare(&format!("INSERT INTO users (name, email) VALUES ($1, $2) RETURNING {}", COLUMNS))
        .await
        .expect("prepare insert");
    Conn { client, list, get, insert }
}

#[tokio::main]
async fn main() {
    let host = arg("--host", "127.0.0.1");
    let port = arg("--port", "8080");
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let n: usize = arg("--connections", &(2 * workers).to_string()).parse().expect("--connections N");
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(connect(&url).await);
    }
    let pool = Arc::new(Pool { conns, next: AtomicUsize::new(0) });
    let addr: SocketAddr = format!("{}:{}", host, port).parse().expect("--host/--port: an address");
    let make_svc = make_service_fn(move |_conn| {
        let pool = pool.clone();
        async move { Ok::<_, Infallible>(service_fn(move |req| route(req, pool.clone()))) }
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
