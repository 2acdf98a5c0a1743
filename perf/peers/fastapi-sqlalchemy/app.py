"""FastAPI + SQLAlchemy peer for coring's users benchmark (perf/run), written
the way FastAPI's "SQL (Relational) Databases" tutorial writes it: a
SQLAlchemy ORM model, a session per request from a `get_db` dependency,
pydantic schemas with orm_mode, sync `def` endpoints (run in the thread
pool), psycopg2 underneath. Same routes, statuses and JSON shapes as
coring's users app, on the same PostgreSQL table (DATABASE_URL, a libpq
conninfo; the schema is coring's, applied before this starts).

  GET  /users[?limit=1..100&after_id=N]  200 [user...] by id (default 50)
  GET  /users/{id}                       200 user | 404 {"error"} | 400
  POST /users {"name","email"}           201 user + Location | 409 | 422 | 400

A user is {"id","name","email","created_at"} with created_at RFC 3339 UTC.
"""

import os
from datetime import datetime, timezone
from typing import List

import psycopg2
from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, constr, validator
from sqlalchemy import BigInteger, Column, DateTime, Identity, Text, create_engine, func
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, declarative_base, sessionmaker

# DATABASE_URL is libpq's key=value conninfo (a Unix socket path): handed to
# psycopg2 as is through `creator`; the URL only names the dialect.
conninfo = os.environ["DATABASE_URL"]
engine = create_engine(
    "postgresql+psycopg2://",
    creator=lambda: psycopg2.connect(conninfo),
    pool_size=int(os.environ.get("PEER_POOL_SIZE", "10")),
    max_overflow=10,
)
SessionLocal = sessionmaker(autocommit=False, autoflush=False, bind=engine)
Base = declarative_base()


class User(Base):
    __tablename__ = "users"
    id = Column(BigInteger, Identity(always=True), primary_key=True)
    name = Column(Text, nullable=False)
    email = Column(Text, nullable=False)
    created_at = Column(DateTime(timezone=True), nullable=False, server_default=func.now())


def rfc3339(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class UserOut(BaseModel):
    id: int
    name: str
    email: str
    created_at: datetime

    class Config:
        orm_mode = True
        json_encoders = {datetime: rfc3339}


class UserIn(BaseModel):
    name: constr(strict=True, min_length=1, max_length=100)
    email: constr(strict=True, min_length=3, max_length=254)

    @validator("name")
    def name_not_blank(cls, v):
        if not v.strip() or "\0" in v:
            raise ValueError("name must not be empty")
        return v

    @validator("email")
    def email_shape(cls, v):
        local, at, domain = v.partition("@")
        if not local or not domain or "@" in domain or any(c <= " " for c in v):
            raise ValueError("email must contain exactly one @ between a local part and a domain")
        return v


app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


def get_db():
    db = SessionLocal()
    try:
        yield db
    finally:
        db.close()


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


@app.exception_handler(RequestValidationError)
async def invalid(request: Request, exc: RequestValidationError):
    errs = exc.errors()
    err = errs[0] if errs else {"msg": "invalid request", "loc": ()}
    loc = err.get("loc", ())
    # Like coring: a bad path or query parameter or unparsable JSON is 400,
    # a body that is JSON but not a valid user is 422.
    status = 422 if loc and loc[0] == "body" and err.get("type") != "value_error.jsondecode" else 400
    where = ".".join(str(p) for p in loc if p != "body")
    return error(status, f"{where}: {err['msg']}" if where else err["msg"])


@app.get("/users", response_model=List[UserOut])
def list_users(limit: int = Query(50, ge=1, le=100), after_id: int = Query(0, ge=0),
               db: Session = Depends(get_db)):
    return db.query(User).filter(User.id > after_id).order_by(User.id).limit(limit).all()


@app.get("/users/{user_id}", response_model=UserOut, responses={404: {}})
def get_user(user_id: int, db: Session = Depends(get_db)):
    user = db.get(User, user_id)
    if user is None:
        return error(404, "user not found")
    return user


@app.post("/users", response_model=UserOut, status_code=201, responses={409: {}})
def create_user(body: UserIn, response: Response, db: Session = Depends(get_db)):
    user = User(name=body.name, email=body.email)
    db.add(user)
    try:
        db.commit()
    except IntegrityError as e:
        db.rollback()
        if getattr(e.orig, "pgcode", None) == "23505":
            return error(409, "a user with this email already exists")
        return error(422, "invalid user")
    db.refresh(user)
    response.headers["Location"] = f"/users/{user.id}"
    return user
