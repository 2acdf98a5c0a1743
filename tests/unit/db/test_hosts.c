/*
 * Host planning (db/src/hosts.c): which hosts of a conninfo the pool
 * resolves itself, with which ports, and the parameters each connection
 * attempt hands libpq. libpq's parser only: no server.
 */
#include "db/src/hosts.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static db_hosts h;

static void setup(void)
{
    unsetenv("PGHOST"); /* libpq's fallback for a conninfo without a host */
}

static void teardown(void)
{
    db_hosts_free(&h);
}

TestSuite(hosts, .init = setup, .fini = teardown);

static void plan(const char *conninfo)
{
    cr_assert_eq(db_hosts_plan(&h, conninfo), 0, "%s", conninfo);
}

static void expect_target(size_t i, const char *host, const char *port, bool resolve)
{
    cr_assert_lt(i, h.ntargets);
    cr_expect_str_eq(h.targets[i].host, host);
    cr_expect_str_eq(h.targets[i].port, port);
    cr_expect_eq(h.targets[i].resolve, resolve, "%s resolves: %d", host, resolve);
}

/* The value of @keyword among the planned parameters, or NULL. */
static const char *param(const char *keyword)
{
    for (size_t i = 0; h.keywords[i]; i++)
        if (strcmp(h.keywords[i], keyword) == 0)
            return h.values[i];
    return NULL;
}

Test(hosts, a_name_is_planned_with_the_other_options_kept)
{
    plan("host=db.example port=5433 dbname=app user=ana connect_timeout=3");
    cr_assert_eq(h.ntargets, 1);
    expect_target(0, "db.example", "5433", true);
    cr_expect_eq(h.nopts, 3, "dbname, user, connect_timeout");
    db_hosts_params(&h, 0, "192.0.2.7");
    cr_expect_str_eq(param("host"), "db.example", "kept for TLS and the password file");
    cr_expect_str_eq(param("hostaddr"), "192.0.2.7");
    cr_expect_str_eq(param("port"), "5433");
    cr_expect_str_eq(param("dbname"), "app");
    cr_expect_str_eq(param("user"), "ana");
    cr_expect_null(h.keywords[h.nopts + 3], "NULL-terminated for PQconnectStartParams");
}

Test(hosts, a_host_list_pairs_its_ports)
{
    plan("host=a.example,b.example,c.example port=1,2,3");
    cr_assert_eq(h.ntargets, 3);
    expect_target(0, "a.example", "1", true);
    expect_target(1, "b.example", "2", true);
    expect_target(2, "c.example", "3", true);
    db_hosts_params(&h, 2, "");
    cr_expect_str_eq(param("host"), "c.example");
    cr_expect_str_eq(param("hostaddr"), "");
    cr_expect_str_eq(param("port"), "3");
}

Test(hosts, one_port_serves_every_host)
{
    plan("host=a.example,b.example port=6000");
    cr_assert_eq(h.ntargets, 2);
    expect_target(0, "a.example", "6000", true);
    expect_target(1, "b.example", "6000", true);
    db_hosts_free(&h);
    plan("host=a.example");
    expect_target(0, "a.example", "", true);
}

Test(hosts, a_uri_is_planned_as_its_keywords)
{
    plan("postgresql://ana@db1.example:5433,db2.example:5434/app?sslmode=disable");
    cr_assert_eq(h.ntargets, 2);
    expect_target(0, "db1.example", "5433", true);
    expect_target(1, "db2.example", "5434", true);
    db_hosts_params(&h, 1, "198.51.100.1");
    cr_expect_str_eq(param("dbname"), "app");
    cr_expect_str_eq(param("sslmode"), "disable");
}

Test(hosts, numeric_addresses_and_socket_paths_are_not_resolved)
{
    plan("host=10.0.0.1,db.example,::1,/run/postgresql");
    cr_assert_eq(h.ntargets, 4);
    expect_target(0, "10.0.0.1", "", false);
    expect_target(1, "db.example", "", true);
    expect_target(2, "::1", "", false);
    expect_target(3, "/run/postgresql", "", false);
}

Test(hosts, nothing_to_resolve_leaves_the_conninfo_to_libpq)
{
    const char *as_they_are[] = {
        "host=127.0.0.1 dbname=app",           /* numeric */
        "host=/run/postgresql dbname=app",     /* a socket folder */
        "host=@abstract dbname=app",           /* an abstract socket */
        "host=db.example hostaddr=192.0.2.1",  /* hostaddr given */
        "host=a.example,b.example port=1,2,3", /* ports that do not pair: libpq refuses */
        "dbname=app",                          /* no host, no PGHOST */
        "host='unterminated",                  /* libpq cannot parse it */
    };
    for (size_t i = 0; i < sizeof(as_they_are) / sizeof(as_they_are[0]); i++) {
        plan(as_they_are[i]);
        cr_expect_null(h.targets, "%s: planned", as_they_are[i]);
        cr_expect_null(h.keywords, "%s", as_they_are[i]);
        cr_expect_null(h.parsed, "%s: nothing kept", as_they_are[i]);
    }
}

Test(hosts, pghost_stands_in_for_a_missing_host)
{
    setenv("PGHOST", "env.example", 1);
    plan("dbname=app port=5499");
    cr_assert_eq(h.ntargets, 1);
    expect_target(0, "env.example", "5499", true);
    db_hosts_free(&h);
    cr_expect_null(h.targets, "freed and emptied");
    plan("host=own.example");
    expect_target(0, "own.example", "", true);
}
