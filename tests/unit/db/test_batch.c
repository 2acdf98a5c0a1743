/*
 * Handing a batch's rows to the queries it stands for (db/src/batch.c),
 * on results made by hand with libpq's PQmakeEmptyPGresult,
 * PQsetResultAttrs and PQsetvalue: no server. A reading batch's row goes
 * to the query whose key it carries, wherever it stands in the batch's
 * result; a writing batch's, to the query at its place.
 */
#include "db/src/batch.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <string.h>

#define OID_INT8 20
#define OID_TEXT 25

/* A binary result of columns (id int8, email text) with @n rows: ids
 * @ids (8 bytes big-endian), emails @emails (NULL: SQL NULL). */
static PGresult *make(int n, const long long *ids, const char *const *emails)
{
    PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
    cr_assert_not_null(r);
    PGresAttDesc attrs[2] = {
        {.name = "id", .typid = OID_INT8, .typlen = 8, .format = 1, .atttypmod = -1},
        {.name = "email", .typid = OID_TEXT, .typlen = -1, .format = 1, .atttypmod = -1},
    };
    cr_assert(PQsetResultAttrs(r, 2, attrs));
    for (int i = 0; i < n; i++) {
        char id[8];
        for (int b = 0; b < 8; b++)
            id[b] = (char)((unsigned long long)ids[i] >> (56 - 8 * b));
        cr_assert(PQsetvalue(r, i, 0, id, 8));
        cr_assert(PQsetvalue(r, i, 1, (char *)emails[i], emails[i] ? (int)strlen(emails[i]) : -1));
    }
    return r;
}

static long long id_at(const PGresult *r, int row)
{
    const unsigned char *v = (const unsigned char *)PQgetvalue(r, row, 0);
    long long id = 0;
    for (int b = 0; b < 8; b++)
        id = id << 8 | v[b];
    return id;
}

Test(batch, each_key_gets_its_own_row_in_any_order)
{
    const long long ids[] = {11, 12, 13};
    const char *emails[] = {"c@x", "a@x", "b@x"}; /* not in the order asked */
    PGresult *r = make(3, ids, emails);
    cr_assert(db_batch_fits(r, 1, OID_TEXT, -1));
    const char *asked[] = {"a@x", "b@x", "c@x"};
    const long long want[] = {12, 13, 11};
    for (int i = 0; i < 3; i++) {
        PGresult *own = db_batch_rows(r, 1, asked[i], (int)strlen(asked[i]));
        cr_assert_not_null(own);
        cr_expect_eq(PQresultStatus(own), PGRES_TUPLES_OK);
        cr_expect_eq(PQnfields(own), 2);
        cr_expect_eq(PQfformat(own, 0), 1, "binary, as the batch");
        cr_expect_eq(PQftype(own, 1), (Oid)OID_TEXT);
        cr_assert_eq(PQntuples(own), 1, "%s", asked[i]);
        cr_expect_eq(id_at(own, 0), want[i]);
        cr_expect_str_eq(PQgetvalue(own, 0, 1), asked[i]);
        PQclear(own);
    }
    PQclear(r);
}

Test(batch, a_key_without_rows_gets_none_and_a_key_with_two_gets_both)
{
    const long long ids[] = {1, 2, 3};
    const char *emails[] = {"a@x", "b@x", "a@x"};
    PGresult *r = make(3, ids, emails);
    PGresult *none = db_batch_rows(r, 1, "z@x", 3);
    cr_assert_not_null(none);
    cr_expect_eq(PQntuples(none), 0);
    cr_expect_eq(PQnfields(none), 2, "the columns all the same");
    PQclear(none);
    PGresult *two = db_batch_rows(r, 1, "a@x", 3);
    cr_assert_eq(PQntuples(two), 2);
    cr_expect_eq(id_at(two, 0), 1);
    cr_expect_eq(id_at(two, 1), 3, "in the batch's order");
    PQclear(two);
    PQclear(r);
}

Test(batch, keys_match_byte_for_byte_and_null_matches_nothing)
{
    const long long ids[] = {1, 2};
    const char *emails[] = {"A@x", NULL};
    PGresult *r = make(2, ids, emails);
    PGresult *own = db_batch_rows(r, 1, "a@x", 3);
    cr_expect_eq(PQntuples(own), 0, "no case folding");
    PQclear(own);
    own = db_batch_rows(r, 1, "A@", 2);
    cr_expect_eq(PQntuples(own), 0, "no prefix match");
    PQclear(own);
    own = db_batch_rows(r, 1, NULL, 0);
    cr_expect_eq(PQntuples(own), 0, "a NULL key, a NULL value: no match");
    PQclear(own);
    PQclear(r);
}

Test(batch, a_result_that_does_not_fit_its_registration)
{
    const long long ids[] = {1};
    const char *emails[] = {"a@x"};
    PGresult *r = make(1, ids, emails);
    cr_expect(db_batch_fits(r, 0, OID_INT8, -1));
    cr_expect_not(db_batch_fits(r, 2, OID_TEXT, -1), "no third column");
    cr_expect_not(db_batch_fits(r, -1, OID_TEXT, -1));
    cr_expect_not(db_batch_fits(r, 1, OID_INT8, -1), "email is not int8");
    PQclear(r);
    PGresult *cmd = PQmakeEmptyPGresult(NULL, PGRES_COMMAND_OK);
    cr_expect_not(db_batch_fits(cmd, 0, OID_INT8, -1), "no row set: no RETURNING");
    PQclear(cmd);
}

Test(batch, a_writing_batch_must_return_one_row_per_member)
{
    const long long ids[] = {1, 2, 3};
    const char *emails[] = {"a@x", "b@x", "c@x"};
    PGresult *r = make(3, ids, emails);
    cr_expect(db_batch_fits(r, 1, OID_TEXT, 3), "three rows for three members");
    cr_expect_not(db_batch_fits(r, 1, OID_TEXT, 4), "a row short: a trigger skipped one");
    cr_expect_not(db_batch_fits(r, 1, OID_TEXT, 2), "a row too many");
    cr_expect(db_batch_fits(r, 1, OID_TEXT, -1), "a reading batch: any number");
    PQclear(r);
}

Test(batch, a_writing_batch_gives_each_member_the_row_at_its_place)
{
    /* Inserted as "Ann@X", "bob@x", "Ann@x.org": a trigger stored the
     * emails in lower case, so no key is the one asked. */
    const long long ids[] = {21, 22, 23};
    const char *emails[] = {"ann@x", "bob@x", "ann@x.org"};
    PGresult *r = make(3, ids, emails);
    cr_assert(db_batch_fits(r, 1, OID_TEXT, 3));
    PGresult *none = db_batch_rows(r, 1, "Ann@X", 5);
    cr_expect_eq(PQntuples(none), 0, "by key the first member would get no row");
    PQclear(none);
    for (int i = 0; i < 3; i++) {
        PGresult *own = db_batch_row(r, i);
        cr_assert_not_null(own);
        cr_expect_eq(PQresultStatus(own), PGRES_TUPLES_OK);
        cr_expect_eq(PQnfields(own), 2);
        cr_expect_eq(PQfformat(own, 1), 1, "binary, as the batch");
        cr_assert_eq(PQntuples(own), 1);
        cr_expect_eq(id_at(own, 0), ids[i], "member %d", i);
        cr_expect_str_eq(PQgetvalue(own, 0, 1), emails[i], "the email as stored");
        PQclear(own);
    }
    PQclear(r);
}

/* A statement's description (PQdescribePrepared): status COMMAND_OK and
 * the @n columns named @names, of types @types. */
static PGresult *described(int n, const char *const *names, const unsigned *types)
{
    PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_COMMAND_OK);
    cr_assert_not_null(r);
    PGresAttDesc attrs[4];
    cr_assert(n <= 4);
    for (int i = 0; i < n; i++)
        attrs[i] = (PGresAttDesc){.name = (char *)names[i], .typid = types[i], .typlen = -1,
                                  .format = 0, .atttypmod = -1};
    if (n)
        cr_assert(PQsetResultAttrs(r, n, attrs));
    return r;
}

/* Expects @batch (freed) not to stand in for @single with key column
 * @col of type @oid, for a reason that mentions @says. */
static void expect_refused(const PGresult *single, PGresult *batch, int col, unsigned oid,
                           const char *says)
{
    char why[256] = "";
    cr_expect_not(db_batch_form_fits(single, batch, col, oid, why, sizeof(why)), "%s", says);
    cr_expect(strstr(why, says) != NULL, "'%s' does not say '%s'", why, says);
    PQclear(batch);
}

Test(batch, a_batch_form_must_return_the_statements_columns)
{
    const char *names[] = {"id", "name", "email"};
    const unsigned types[] = {OID_INT8, OID_TEXT, OID_TEXT};
    PGresult *single = described(3, names, types);
    char why[256] = "";
    PGresult *same = described(3, names, types);
    cr_expect(db_batch_form_fits(single, same, 2, OID_TEXT, why, sizeof(why)), "%s", why);
    PQclear(same);

    /* The key column: of the key's type, and there. */
    expect_refused(single, described(3, names, types), 0, OID_TEXT, "key column 0");
    expect_refused(single, described(3, names, types), 3, OID_TEXT, "key column 3");
    expect_refused(single, described(3, names, types), -1, OID_TEXT, "key column -1");
    /* Two text columns in the other order. */
    const char *swapped[] = {"id", "email", "name"};
    expect_refused(single, described(3, swapped, types), 2, OID_TEXT, "column 1 is email");
    const unsigned retyped[] = {OID_INT8, OID_TEXT, OID_INT8};
    expect_refused(single, described(3, names, retyped), 0, OID_INT8, "column 2");
    expect_refused(single, described(2, names, types), 0, OID_INT8, "2 columns");
    /* No RETURNING: no rows to hand out. */
    PGresult *none = described(0, NULL, NULL);
    expect_refused(none, described(0, NULL, NULL), 0, OID_INT8, "no rows");
    PQclear(none);
    expect_refused(single, PQmakeEmptyPGresult(NULL, PGRES_FATAL_ERROR), 2, OID_TEXT,
                   "no description");
    PQclear(single);
}
