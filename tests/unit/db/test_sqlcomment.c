/*
 * A sampled trace's comment on a query (db/src/sqlcomment.c): the
 * sqlcommenter form after the statement, a trailing ';' dropped.
 */
#include "db/src/sqlcomment.h"

#include <criterion/criterion.h>
#include <string.h>

static const cr_trace_context trace = {.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
                                       .span_id = "00f067aa0ba902b7", .flags = 1};

static void check(const char *sql, const char *want)
{
    char out[256];
    size_t len = strlen(sql);
    cr_assert_leq(db_sqlcomment_size(len), sizeof(out));
    db_sqlcomment_write(out, sql, len, &trace);
    cr_expect_str_eq(out, want);
    cr_expect_eq(strlen(out) + 1 <= db_sqlcomment_size(len), 1);
}

Test(sqlcomment, appended_after_the_statement)
{
    check("SELECT 1 FROM users WHERE id = $1",
          "SELECT 1 FROM users WHERE id = $1 /*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736"
          "-00f067aa0ba902b7-01'*/");
    check("SELECT 1;\n", "SELECT 1 /*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736"
                         "-00f067aa0ba902b7-01'*/");
}
