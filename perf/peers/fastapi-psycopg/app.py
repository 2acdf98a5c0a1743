"""FastAPI + psycopg 3 + httpx peer for coring's cep benchmark (perf/run):
GET /api/v1/cep/{cep}, cache-aside in PostgreSQL in front of ViaCEP, as
coring's cep app does, written the way an async FastAPI service is: async
endpoint, a psycopg_pool.AsyncConnectionPool (10 connections, autocommit;
psycopg prepares a statement after 5 executions), one httpx.AsyncClient
for the upstream. Same table (coring's schema, cep_addresses), same upstream
(VIACEP_URL), same answers:

  200 {"cep","logradouro","complemento","bairro","localidade","uf","ibge","ddd","source"}
      source "database" from the table, "viacep" just fetched (then stored,
      INSERT ... ON CONFLICT DO NOTHING, every field ViaCEP sends)
  400 {"error":"invalid CEP"}          not NNNNNNNN / NNNNN-NNN
  404 {"error":"CEP not found"}        ViaCEP's {"erro": true}; remembered an hour
  503 {"error":"upstream unavailable"} upstream down, slow (5 s), non-200, unparsable
  503 {"error":"database unavailable"} PostgreSQL unreachable

No single flight: two concurrent misses of one CEP make two upstream calls.
"""

import os
import re
import time

import httpx
import psycopg
import psycopg_pool
from fastapi import FastAPI
from fastapi.responses import JSONResponse

UPSTREAM = os.environ.get("VIACEP_URL", "https://viacep.com.br/ws").rstrip("/")
FIELDS = ("logradouro", "complemento", "unidade", "bairro", "localidade", "uf",
          "estado", "regiao", "ibge", "gia", "ddd", "siafi")
SHOWN = ("logradouro", "complemento", "bairro", "localidade", "uf", "ibge", "ddd")
SELECT = ("SELECT logradouro, complemento, bairro, localidade, uf, ibge, ddd "
          "FROM cep_addresses WHERE cep = %s")
INSERT = ("INSERT INTO cep_addresses (cep, " + ", ".join(FIELDS) + ") VALUES (%s"
          + ", %s" * len(FIELDS) + ") ON CONFLICT (cep) DO NOTHING")
CEP = re.compile(r"^([0-9]{5})-?([0-9]{3})$")
NEGATIVE_TTL_S = 3600.0

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
pool = psycopg_pool.AsyncConnectionPool(os.environ["DATABASE_URL"], min_size=10, max_size=10,
                                        kwargs={"autocommit": True}, open=False)
client: httpx.AsyncClient
negative = {}  # cep -> expiry (monotonic seconds)


@app.on_event("startup")
async def startup():
    global client
    await pool.open()
    client = httpx.AsyncClient(timeout=httpx.Timeout(5.0, connect=2.0),
                               limits=httpx.Limits(max_connections=100, max_keepalive_connections=100))


@app.on_event("shutdown")
async def shutdown():
    await client.aclose()
    await pool.close()


def error(status, message):
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def address(digits, values, source):
    body = {"cep": f"{digits[:5]}-{digits[5:]}"}
    body.update(zip(SHOWN, values))
    body["source"] = source
    return JSONResponse(body)


@app.get("/api/v1/cep/{cep}")
async def get_cep(cep: str):
    m = CEP.match(cep)
    if not m:
        return error(400, "invalid CEP")
    digits = m.group(1) + m.group(2)
    if negative.get(digits, 0.0) > time.monotonic():
        return error(404, "CEP not found")
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute(SELECT, (digits,))).fetchone()
    except (psycopg.Error, psycopg_pool.PoolTimeout):
        return error(503, "database unavailable")
    if row is not None:
        return address(digits, row, "database")

    try:
        r = await client.get(f"{UPSTREAM}/{digits}/json/")
        if r.status_code != 200 or len(r.content) > 64 * 1024:
            return error(503, "upstream unavailable")
        data = r.json()
    except (httpx.HTTPError, ValueError):
        return error(503, "upstream unavailable")
    if not isinstance(data, dict):
        return error(503, "upstream unavailable")
    if data.get("erro") in (True, "true"):
        negative[digits] = time.monotonic() + NEGATIVE_TTL_S
        return error(404, "CEP not found")
    echoed = CEP.match(data.get("cep") or "") if isinstance(data.get("cep"), str) else None
    if not echoed or echoed.group(1) + echoed.group(2) != digits:
        return error(503, "upstream unavailable")
    fields = {f: (data[f] if isinstance(data.get(f), str) else "") for f in FIELDS}
    try:
        async with pool.connection() as conn:
            await conn.execute(INSERT, (digits, *fields.values()))
    except (psycopg.Error, psycopg_pool.PoolTimeout):
        pass  # answer from the upstream anyway, as coring does
    return address(digits, [fields[f] for f in SHOWN], "viacep")
