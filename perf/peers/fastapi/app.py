"""FastAPI peer for coring's benchmarks (perf/run): the hello and todo apps
with the same routes and JSON shapes as coring, written the way FastAPI's
documentation writes them (pydantic models, response_model, status codes),
served by uvicorn with uvloop and httptools and no access log.

  GET    /           200 {"message":"hello world"}
  GET    /todos      200 [todo...] ordered by id
  GET    /todos/{id} 200 todo | 404 {"error":...}
  POST   /todos      201 todo, Location: /todos/<id> | 422 {"error":...}
  PATCH  /todos/{id} 200 todo | 404 | 422
  DELETE /todos/{id} 204 | 404
"""

from typing import List, Optional

from fastapi import FastAPI, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, StrictBool, StrictStr, constr

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


class TodoIn(BaseModel):
    title: constr(strict=True, min_length=1, max_length=1000)
    completed: StrictBool = False


class TodoPatch(BaseModel):
    title: Optional[constr(strict=True, min_length=1, max_length=1000)] = None
    completed: Optional[StrictBool] = None


class Todo(BaseModel):
    id: int
    title: StrictStr
    completed: bool


# dicts keep insertion order and ids only grow: iteration is id order.
todos = {}
next_id = 1


@app.exception_handler(RequestValidationError)
async def invalid(request: Request, exc: RequestValidationError):
    err = exc.errors()[0] if exc.errors() else {"msg": "invalid request"}
    where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
    return JSONResponse({"error": f"{where}: {err['msg']}" if where else err["msg"]},
                        status_code=422)


def not_found():
    return JSONResponse({"error": "todo not found"}, status_code=404)


@app.get("/")
async def hello():
    return {"message": "hello world"}


@app.get("/todos", response_model=List[Todo])
async def list_todos():
    return list(todos.values())


@app.get("/todos/{todo_id}", response_model=Todo, responses={404: {}})
async def get_todo(todo_id: int):
    todo = todos.get(todo_id)
    return not_found() if todo is None else todo


@app.post("/todos", response_model=Todo, status_code=status.HTTP_201_CREATED)
async def create_todo(body: TodoIn, response: Response):
    global next_id
    todo = Todo(id=next_id, title=body.title, completed=body.completed)
    next_id += 1
    todos[todo.id] = todo
    response.headers["Location"] = f"/todos/{todo.id}"
    return todo


@app.patch("/todos/{todo_id}", response_model=Todo, responses={404: {}})
async def update_todo(todo_id: int, body: TodoPatch):
    todo = todos.get(todo_id)
    if todo is None:
        return not_found()
    if body.title is None and body.completed is None:
        return JSONResponse({"error": "nothing to update: give title and/or completed"},
                            status_code=422)
    if body.title is not None:
        todo.title = body.title
    if body.completed is not None:
        todo.completed = body.completed
    return todo


@app.delete("/todos/{todo_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_todo(todo_id: int):
    if todos.pop(todo_id, None) is None:
        return not_found()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
