#!/usr/bin/python3
"""The OpenAPI document held against the server, both ways. It is put
together by coring from the server's description (apps/openapi/openapi.json)
and each mounted app's fragment (app_def.openapi: apps/NAME/openapi.json in
this tree); the apps are the binary's own (`coring --list-apps=json`), none
named here.

RoutesTest: the router's routes (`coring --list-routes`) and the document's
operations (`coring --openapi`) are the same set, with every app mounted:
a route added without its description fails, and so does a description of
a route that does not exist (coring warns of both; no warning may be
printed); /openapi.json served with some apps mounted describes exactly
those apps' routes.

ContractTest: every app mounted on a real PostgreSQL (db/pg-local), the fake
ViaCEP and a tiny model; every operation of the served document is driven
with its examples (path and query parameters, request body) and, where it
has them, with a bad path parameter and a body that is not JSON; each
answer's status must be documented for the operation and its body must
match the documented schema (Python jsonschema, Draft 2020-12, as OpenAPI
3.1 uses), with the documented Content-Type.
"""
import json
import os
import subprocess
import sys
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "embed"))
import coring_server as cs  # noqa: E402

METHODS = ("get", "put", "post", "patch", "delete")
# Request order, so that what a GET or DELETE reads was created first.
ORDER = {"post": 0, "put": 1, "get": 2, "patch": 3, "delete": 4}


def run(*args):
    """The binary under test run with @args (no DATABASE_URL needed: it
    only mounts): its stdout, and its stderr."""
    r = subprocess.run([cs.binary()] + list(args), check=True, timeout=30, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    return r.stdout, r.stderr


def all_apps():
    """Every app of the binary, comma-separated, as --apps takes them."""
    return ",".join(app["name"] for app in json.loads(run("--list-apps=json")[0])["apps"])


def document(apps):
    """`coring --openapi --apps APPS`: the document, and what coring warned."""
    out, err = run("--openapi", "--apps", apps)
    return json.loads(out), [line for line in err.splitlines() if "openapi:" in line]


def operations(doc):
    """{"GET /todos/{id}": (path, method, operation, path item)}"""
    return {"%s %s" % (m.upper(), p): (p, m, op, item)
            for p, item in doc["paths"].items() for m, op in item.items() if m in METHODS}


def list_routes(apps):
    out = run("--list-routes", "--apps", apps)[0]
    return {line for line in out.splitlines() if line and not line.startswith(("HEAD ", "OPTIONS "))}


class RoutesTest(unittest.TestCase):
    maxDiff = 4000

    def test_every_route_described_and_every_description_routed(self):
        apps = all_apps()
        self.assertGreaterEqual(len(apps.split(",")), 5, apps)
        routes = list_routes(apps)
        doc, warnings = document(apps)
        self.assertEqual(warnings, [], "coring --openapi warned: a route without its description in "
                         "its app's openapi.json, or a description of a route that no app serves")
        self.assertEqual(sorted(routes ^ set(operations(doc))), [])

    def test_served_document_is_the_mounted_routes(self):
        for apps in ("hello", "hello,todo", "todo,embed"):
            with self.subTest(apps=apps):
                with cs.CoringServer(threads=1, apps=apps) as srv, srv.connect() as c:
                    r = c.request("GET", "/openapi.json")
                self.assertEqual(r.status, 200)
                self.assertEqual(r.header("Content-Type"), "application/json")
                doc = r.json()
                self.assertEqual(doc["openapi"], "3.1.0")
                self.assertEqual(sorted(operations(doc)), sorted(list_routes(apps)), apps)
                used = {op.get("tags", [""])[0] for _, _, op, _ in operations(doc).values()}
                self.assertEqual({t["name"] for t in doc["tags"]}, used, "tags of the operations served")
                self.assertIn("components", doc)

    def test_writes_to_the_database_document_an_unknown_outcome(self):
        # A write that reached PostgreSQL but whose commit was not
        # confirmed answers 504 (apps/database.c, app_db_respond_error):
        # every route that writes to the database says so, and that a
        # retry with the same Idempotency-Key is safe.
        doc, _ = document(all_apps())
        writes = {"POST /users", "POST /todos", "PATCH /todos/{id}", "DELETE /todos/{id}"}
        ops = operations(doc)
        self.assertLessEqual(writes, set(ops))
        for name in sorted(writes):
            with self.subTest(operation=name):
                responses = ops[name][2]["responses"]
                self.assertIn("504", responses, "%s does not document 504" % name)
                self.assertEqual(responses["504"], {"$ref": "#/components/responses/OutcomeUnknown"})
        unknown = doc["components"]["responses"]["OutcomeUnknown"]["description"]
        self.assertIn("Idempotency-Key", unknown)
        for name, (_, method, op, _) in sorted(ops.items()):
            if method == "get" and "504" in op["responses"]:
                self.assertEqual(op["responses"]["504"],
                                 {"$ref": "#/components/responses/DeadlineExceeded"},
                                 "%s: a read answers 504 only at its deadline" % name)

    def test_server_wide_answers_on_every_operation(self):
        # Added by the merge (apps/openapi/openapi.c), not by each fragment:
        # the trace context's headers everywhere, 429 but on the paths
        # exempt from the rate limit by default.
        doc, _ = document(all_apps())
        for name, (path, _, op, _) in sorted(operations(doc).items()):
            with self.subTest(operation=name):
                refs = [p.get("$ref") for p in op["parameters"]]
                self.assertIn("#/components/parameters/Traceparent", refs)
                self.assertIn("#/components/parameters/Tracestate", refs)
                if path in ("/livez", "/readyz", "/metrics"):
                    self.assertNotIn("429", op["responses"])
                else:
                    self.assertEqual(op["responses"]["429"],
                                     {"$ref": "#/components/responses/TooManyRequests"})
                for status, response in op["responses"].items():
                    response = resolve(doc, response)
                    self.assertEqual(response["headers"]["traceresponse"],
                                     {"$ref": "#/components/headers/Traceresponse"}, status)

    def test_apps_with_a_deadline_document_it(self):
        # users, todo, cep and embed have a deadline by default
        # (docs/deadlines.md): each of their operations documents its 504;
        # hello has none.
        doc, _ = document(all_apps())
        for name, (_, _, op, _) in sorted(operations(doc).items()):
            with self.subTest(operation=name):
                if op["tags"][0] in ("users", "todo", "cep", "embed"):
                    self.assertIn("504", op["responses"])
                elif op["tags"][0] in ("hello", "operations", "docs"):
                    self.assertNotIn("504", op["responses"])


def resolve(doc, obj):
    while isinstance(obj, dict) and "$ref" in obj:
        node = doc
        for part in obj["$ref"].lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        obj = node
    return obj


class ContractTest(cs.CoringTestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        import jsonschema  # Debian's python3-jsonschema (.ci/install-deps test)
        cls.jsonschema = jsonschema
        fake_bin = cs.option("fake_viacep")
        if not fake_bin:
            raise unittest.SkipTest("pass --fake-viacep PATH (the coring-fake-viacep binary)")
        from test_cep import EXTRA_DATA, FakeViaCep
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-openapi-")
        os.environ["DATABASE_URL"] = cls.postgres.url()
        cls.fake = FakeViaCep(fake_bin, [EXTRA_DATA])
        cls.addClassCleanup(cls.fake.stop)
        os.environ["VIACEP_URL"] = "http://127.0.0.1:%d/ws" % cls.fake.port
        from test_embed_limits import Model
        cls.model = Model.setup()
        cls.apps = all_apps()
        cls.server = cs.CoringServer(threads=2, apps=cls.apps,
                                     args=["--embed-model", cls.model, "--embed-threads", "1"]).start()
        cls.addClassCleanup(cls.server.kill)
        with cls.server.connect() as c:
            cls.doc = c.request("GET", "/openapi.json").json()
            cls.docs_built = c.request("GET", "/docs").status != 503

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    def check(self, key, op, resp):
        """resp's status is documented for @op, its Content-Type too, and
        its body matches the schema. Returns the documented response."""
        responses = op["responses"]
        self.assertIn(str(resp.status), responses, "%s: status %d is not documented (%s)"
                      % (key, resp.status, resp.body[:200]))
        documented = resolve(self.doc, responses[str(resp.status)])
        for name, header in documented.get("headers", {}).items():
            header = resolve(self.doc, header)
            value = resp.header(name)
            if value is None:
                self.assertFalse(header.get("required"), "%s %d: no %s header" % (key, resp.status, name))
                continue
            schema = header.get("schema", {})
            if schema.get("type") == "integer":
                self.assertRegex(value, r"^[0-9]+$", "%s %d: %s" % (key, resp.status, name))
                value = int(value)
            try:
                self.jsonschema.Draft202012Validator(schema).validate(value)
            except self.jsonschema.ValidationError as e:
                self.fail("%s %d: header %s %r: %s" % (key, resp.status, name, value, e.message))
        content = documented.get("content")
        if not content:
            return documented
        ctype = (resp.header("Content-Type") or "").split(";")[0].strip()
        self.assertIn(ctype, content, "%s %d: Content-Type %r" % (key, resp.status, ctype))
        schema = content[ctype].get("schema")
        if schema is not None:
            body = resp.json() if ctype == "application/json" else resp.body.decode()
            root = dict(schema, components=self.doc["components"])
            try:
                self.jsonschema.Draft202012Validator(root).validate(body)
            except self.jsonschema.ValidationError as e:
                self.fail("%s %d: the body does not match the schema: %s\nbody: %.300s"
                          % (key, resp.status, e.message, resp.body))
        return documented

    def request(self, path, method, op, item, params=None, body=None, ctype="application/json"):
        params = dict(params or {})
        query, headers, data = [], {}, None
        for p in item.get("parameters", []) + op.get("parameters", []):
            p = resolve(self.doc, p)
            value = params.get(p["name"], p.get("example"))
            if p["in"] == "path":
                path = path.replace("{%s}" % p["name"], urllib.parse.quote(str(value), safe=""))
            elif p["in"] == "query" and value is not None:
                query.append("%s=%s" % (p["name"], urllib.parse.quote(str(value))))
            elif p["in"] == "header" and value is not None:
                headers[p["name"]] = str(value)
        target = path + ("?" + "&".join(query) if query else "")
        if body is not None:
            headers["Content-Type"] = ctype
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        with self.server.connect(timeout=15) as c:
            return c.request(method.upper(), target, headers, data)

    def test_every_operation_answers_as_documented(self):
        ops = operations(self.doc)
        self.assertEqual(sorted(ops), sorted(list_routes(self.apps)),
                         "the served document against the routes")
        checked = 0
        created = {}  # collection path: the id its POST example made (todo ids name their shard)
        for key, (path, method, op, item) in sorted(ops.items(), key=lambda kv: (ORDER[kv[1][1]], kv[0])):
            with self.subTest(operation=key):
                example = None
                if "requestBody" in op:
                    example = op["requestBody"]["content"]["application/json"]["example"]
                parent, last = path.rsplit("/", 1)
                given = {last[1:-1]: created[parent]} if parent in created and last.startswith("{") else {}
                resp = self.request(path, method, op, item, given, body=example)
                self.check(key, op, resp)
                if method == "post" and resp.status == 201 and "id" in resp.json():
                    created[path] = resp.json()["id"]
                success = 200 <= resp.status < 300
                if path.startswith("/docs") and not self.docs_built:
                    success = resp.status == 503
                self.assertTrue(success, "%s with its examples: %d %.200s" % (key, resp.status, resp.body))
                checked += 1

                # A path parameter that is not one: documented 400 or 404.
                names = [resolve(self.doc, p)["name"] for p in item.get("parameters", [])
                         if resolve(self.doc, p)["in"] == "path"]
                if names:
                    resp = self.request(path, method, op, item, {n: "x!" for n in names}, body=example)
                    self.check(key + " (bad parameter)", op, resp)
                    self.assertIn(resp.status // 100, (4, 5), key)
                # A body that is not JSON: 415 as documented.
                if example is not None:
                    resp = self.request(path, method, op, item, body=b"title=x", ctype="text/plain")
                    self.assertEqual(resp.status, 415, key)
                    self.check(key + " (text/plain body)", op, resp)
                    resp = self.request(path, method, op, item, body=b"[1,", ctype="application/json")
                    self.assertEqual(resp.status, 400, key)
                    self.check(key + " (bad JSON)", op, resp)
                    resp = self.request(path, method, op, item, body={"title": 1, "name": 1, "text": 1, "input": 1})
                    self.assertIn(resp.status, (422, 200), key)  # PATCH may find nothing wrong in name
                    self.check(key + " (wrong field types)", op, resp)
        print("%d operations driven and checked against their schemas" % checked)

    def test_examples_match_their_schemas(self):
        for key, (path, method, op, item) in sorted(operations(self.doc).items()):
            checks = [(resolve(self.doc, p)["name"], resolve(self.doc, p)) for p in
                      item.get("parameters", []) + op.get("parameters", [])]
            if "requestBody" in op:
                checks.append(("body", op["requestBody"]["content"]["application/json"]))
            for name, holder in checks:
                with self.subTest(operation=key, example=name):
                    self.assertIn("example", holder, "%s: %s has no example" % (key, name))
                    root = dict(resolve(self.doc, holder["schema"]), components=self.doc["components"])
                    error = self.jsonschema.exceptions.best_match(
                        self.jsonschema.Draft202012Validator(root).iter_errors(holder["example"]))
                    if error is not None:
                        self.fail("%s: the example of %s does not match its schema: %s"
                                  % (key, name, error.message))

    def test_rate_limited_answers_are_documented(self):
        """A real 429 (--rate-limit 1 --rate-burst 1: the second request of
        a client within a second) on every operation of hello and todo, with
        its Retry-After, RateLimit-Policy and RateLimit, against the
        document that server serves."""
        with cs.CoringServer(threads=1, apps="hello,todo",
                             args=["--rate-limit", "1", "--rate-burst", "1"]) as srv:
            with srv.connect() as c:
                doc = c.request("GET", "/openapi.json").json()
            saved, self.doc = self.doc, doc
            try:
                limited = 0
                for key, (path, method, op, item) in sorted(operations(doc).items()):
                    with self.subTest(operation=key), srv.connect() as c:
                        target = path.replace("{id}", "1")
                        body = op["requestBody"]["content"]["application/json"]["example"] \
                            if "requestBody" in op else None
                        headers = {"Content-Type": "application/json"} if body is not None else {}
                        resp = c.request(method.upper(), target, headers,
                                         json.dumps(body).encode() if body is not None else None)
                        if path in ("/livez", "/readyz", "/metrics"):
                            self.assertNotEqual(resp.status, 429, "%s is exempt" % key)
                            continue
                        self.assertEqual(resp.status, 429, key)
                        self.check(key, op, resp)
                        limited += 1
                self.assertGreater(limited, 5)
            finally:
                self.doc = saved

    def test_deadline_answer_is_documented(self):
        """A real 504 at a deadline: the cep app with the fake ViaCEP
        slower than --deadline cep=300ms, against the served document."""
        with cs.CoringServer(threads=1, apps="cep", args=["--deadline", "cep=300ms"]) as srv:
            with srv.connect() as c:
                doc = c.request("GET", "/openapi.json").json()
            path, method, op, item = operations(doc)["GET /api/v1/cep/{cep}"]
            self.fake.behave(delay_ms=2000)
            try:
                with srv.connect(timeout=15) as c:
                    resp = c.request("GET", "/api/v1/cep/01001999")
            finally:
                self.fake.behave(delay_ms=0)
            self.assertEqual(resp.status, 504, resp.body)
            self.assertEqual(resp.json(), {"error": "deadline exceeded"})
            saved, self.doc = self.doc, doc
            try:
                self.check("GET /api/v1/cep/{cep}", op, resp)
            finally:
                self.doc = saved

    def test_query_parameters_are_checked_as_documented(self):
        path, method, op, item = operations(self.doc)["GET /users"]
        for params, status in (({"limit": 0}, 400), ({"limit": 101}, 400), ({"after_id": "x"}, 400),
                               ({"limit": 1}, 200)):
            resp = self.request(path, method, op, item, params)
            self.assertEqual(resp.status, status, params)
            self.check("GET /users %r" % params, op, resp)


if __name__ == "__main__":
    cs.main()
