#!/usr/bin/python3
"""Migrations belong to the apps that own the tables (db_migrate,
coring/db/admin.h; app_def.migrations), each under its name in
schema_migrations, applied when the app is mounted:

- a fresh database gets the mounted apps' tables and no other app's, one
  row per migration naming its app, and a second start applies nothing;
- a database that coring 0.1.0 migrated (schema_migrations without an app
  column, every migration one number of one sequence) is taken over: the
  column is added, each old row given to its app, nothing applied again,
  and the primary key becomes (app, version) so that two apps may both
  have a migration 1.

One PostgreSQL cluster (db/pg-local), a database per test.
"""
import glob
import os

import coring_server as cs

ROOT = cs.ROOT


class MigrationsTest(cs.CoringTestCase):
    postgres = None

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-migrations-")

    def database(self, name):
        """A new database @name: its DATABASE_URL, and a function running
        SQL in it (rows as lists of text)."""
        self.postgres.sql("CREATE DATABASE %s" % name)
        url = self.postgres.url().replace("dbname=coring", "dbname=%s" % name)

        def sql(query):
            out = self.postgres.run("psql", "-At", "-F", "|", "-c", query, "-d", name, timeout=30)
            return [line.split("|") for line in out.splitlines() if line]
        return url, sql

    def serve(self, url, apps, args=()):
        """Start coring on @url with @apps, stop it; its log lines."""
        saved = os.environ.get("DATABASE_URL")
        os.environ["DATABASE_URL"] = url
        try:
            server = cs.CoringServer(threads=1, apps=apps, args=list(args)).start()
        finally:
            if saved is None:
                os.environ.pop("DATABASE_URL", None)
            else:
                os.environ["DATABASE_URL"] = saved
        server.stop(expect_status=0)
        return server.stderr_text(200)

    @staticmethod
    def files(app):
        return sorted(os.path.basename(f) for f in glob.glob(os.path.join(ROOT, "apps", app, "migrations", "*.sql")))

    def test_each_app_its_own(self):
        url, sql = self.database("fresh")
        log = self.serve(url, "users")
        rows = sql("SELECT app, version, name FROM schema_migrations ORDER BY app, version")
        want = [["idempotency", "5", "0005_idempotency_keys.sql"]]
        want += [["users", str(int(f.split("_")[0])), f] for f in self.files("users")]
        self.assertEqual(rows, sorted(want), log)
        tables = {r[0] for r in sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        self.assertIn("users", tables)
        self.assertNotIn("cep_addresses", tables, "the cep app is not mounted: its tables are not made")
        self.assertIn("applied migration users/0001_users.sql", log)

        log = self.serve(url, "users,cep")
        self.assertNotIn("applied migration users/", log, "users' migrations applied twice")
        self.assertIn("applied migration cep/", log)
        apps = {r[0] for r in sql("SELECT app FROM schema_migrations")}
        self.assertEqual(apps, {"users", "cep", "idempotency"})

    def test_database_from_before_owners(self):
        url, sql = self.database("legacy")
        # What coring 0.1.0 left: its table, and the five migrations applied.
        sql("CREATE TABLE schema_migrations (version bigint PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())")
        old = []
        for app in ("users", "cep", "todo"):
            for f in self.files(app):
                with open(os.path.join(ROOT, "apps", app, "migrations", f), encoding="utf-8") as fh:
                    sql(fh.read())
                old.append((app, int(f.split("_")[0]), f))
        sql("CREATE TABLE idempotency_keys (scope text NOT NULL, key text NOT NULL, fingerprint bytea"
            " NOT NULL, status int NOT NULL, location text, body text NOT NULL, created_at timestamptz"
            " NOT NULL DEFAULT now(), PRIMARY KEY (scope, key))")
        old.append(("idempotency", 5, "0005_idempotency_keys.sql"))
        for _, version, name in old:
            sql("INSERT INTO schema_migrations (version, name) VALUES (%d, '%s')" % (version, name))
        self.assertEqual(len(old), 5, "coring 0.1.0 had five migrations")

        log = self.serve(url, "users,cep,todo", ["--todo-store", "postgres"])
        self.assertNotIn("applied migration", log, "a migration of 0.1.0 was applied again")
        rows = sql("SELECT app, version, name FROM schema_migrations ORDER BY app, version")
        self.assertEqual(rows, sorted([a, str(v), n] for a, v, n in old),
                         "each old row given to its app, none added")
        key = sql("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                  " AND a.attnum = ANY (i.indkey) WHERE i.indrelid = 'schema_migrations'::regclass"
                  " AND i.indisprimary ORDER BY a.attname")
        self.assertEqual(key, [["app"], ["version"]], "the primary key is (app, version)")


if __name__ == "__main__":
    cs.main()
