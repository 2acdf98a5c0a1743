/*
 * Coalescing (db/src/coalesce.c): which waiting queries ride in one query
 * of their statement's batch form, whether that batch must end its Sync
 * group, and the batch built from them. Statements and queries are set
 * up by hand (no registry, no server).
 */
#include "db/src/coalesce.h"
#include "db/src/statement.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OID_TEXT 25

/* INSERT (name, email), key: the email ($2). */
static db_stmt form, insert, lookup, plain;
static db_pending p[DB_COALESCE_MAX + 2];
static const char *values[DB_COALESCE_MAX + 2][2];
static int lengths[DB_COALESCE_MAX + 2][2];
static char emails[DB_COALESCE_MAX + 2][16];
static db_queue q;
static db_pending *free_list;

static void setup(void)
{
    form = (db_stmt){.def = {.sql = "INSERT ... SELECT * FROM unnest($1, $2)"},
                     .nparams = 2,
                     .oids = {OID_TEXT, OID_TEXT},
                     .name = "coring_t1"};
    insert = (db_stmt){.def = {.sql = "INSERT ...", .writes = true, .batch_key_param = 1},
                       .nparams = 2,
                       .oids = {OID_TEXT, OID_TEXT},
                       .name = "coring_t0",
                       .batch = &form};
    lookup = insert;
    lookup.def.writes = false;
    plain = insert;
    plain.batch = NULL;
    memset(p, 0, sizeof(p));
    q = (db_queue){0};
    free_list = NULL;
}

static void teardown(void)
{
    while (free_list) {
        db_pending *next = free_list->next;
        free(free_list);
        free_list = next;
    }
}

TestSuite(coalesce, .init = setup, .fini = teardown);

/* Queue p[@i] asking @s for @email (NULL: SQL NULL). */
static void ask(int i, const db_stmt *s, const char *email)
{
    snprintf(emails[i], sizeof(emails[i]), "%s", email ? email : "");
    values[i][0] = "Ana";
    lengths[i][0] = 3;
    values[i][1] = email ? emails[i] : NULL;
    lengths[i][1] = email ? (int)strlen(email) : 0;
    p[i].stmt = s;
    p[i].nparams = 2;
    p[i].values = values[i];
    p[i].lengths = lengths[i];
    p[i].writes = s->def.writes;
    db_queue_push(&q, &p[i]);
}

static unsigned pick(db_pending **taken, bool *ends_group)
{
    *ends_group = false;
    return db_coalesce_pick(&q, taken, ends_group);
}

Test(coalesce, distinct_keys_ride_together_in_queue_order)
{
    ask(0, &insert, "a@x");
    ask(1, &insert, "b@x");
    ask(2, &insert, "c@x");
    db_pending *taken[DB_COALESCE_MAX];
    bool ends;
    cr_assert_eq(pick(taken, &ends), 3);
    cr_expect(taken[0] == &p[0] && taken[1] == &p[1] && taken[2] == &p[2]);
    cr_expect_not(ends, "nothing left out");
}

Test(coalesce, a_duplicate_key_stays_out_and_a_writing_batch_ends_its_group)
{
    ask(0, &insert, "a@x");
    ask(1, &insert, "a@x");
    ask(2, &insert, "b@x");
    db_pending *taken[DB_COALESCE_MAX];
    bool ends;
    cr_assert_eq(pick(taken, &ends), 2);
    cr_expect(taken[0] == &p[0] && taken[1] == &p[2]);
    cr_expect(ends, "the duplicate must not share the batch's transaction");
    /* Reads: the duplicate stays out, but nothing to roll back. */
    setup();
    ask(0, &lookup, "a@x");
    ask(1, &lookup, "a@x");
    ask(2, &lookup, "b@x");
    cr_assert_eq(pick(taken, &ends), 2);
    cr_expect_not(ends);
}

Test(coalesce, keys_are_compared_byte_for_byte)
{
    ask(0, &insert, "a@x");
    ask(1, &insert, "A@x");
    ask(2, &insert, "a@x2");
    db_pending *taken[DB_COALESCE_MAX];
    bool ends;
    cr_expect_eq(pick(taken, &ends), 3);
    cr_expect_not(ends);
}

Test(coalesce, a_null_key_or_a_query_sent_before_or_another_statement_stays_out)
{
    ask(0, &insert, "a@x");
    ask(1, &insert, NULL);
    ask(2, &plain, "b@x");
    ask(3, &insert, "c@x");
    p[3].attempts = 1; /* rolled back once: goes as it was asked */
    ask(4, &insert, "d@x");
    db_pending *taken[DB_COALESCE_MAX];
    bool ends;
    cr_assert_eq(pick(taken, &ends), 2);
    cr_expect(taken[0] == &p[0] && taken[1] == &p[4]);
    cr_expect_not(ends, "no key left out for being taken");
}

Test(coalesce, no_batch_unless_the_first_waiting_query_leads_it)
{
    db_pending *taken[DB_COALESCE_MAX];
    bool ends;
    cr_expect_eq(pick(taken, &ends), 0, "nothing waits");
    ask(0, &insert, "a@x");
    cr_expect_eq(pick(taken, &ends), 0, "one alone is no batch");
    setup();
    ask(0, &insert, NULL);
    ask(1, &insert, "a@x");
    ask(2, &insert, "b@x");
    cr_expect_eq(pick(taken, &ends), 0, "the first has no key: it goes first, alone");
    setup();
    ask(0, &plain, "a@x");
    ask(1, &plain, "b@x");
    cr_expect_eq(pick(taken, &ends), 0, "no batch form");
}

Test(coalesce, a_refused_batch_form_is_not_used)
{
    ask(0, &insert, "a@x");
    ask(1, &insert, "b@x");
    /* As db_stmt_refuse_batch marks a registered statement's. */
    atomic_store(&insert.batch_refused, true);
    db_pending *taken[DB_COALESCE_MAX];
    bool ends;
    cr_expect_eq(pick(taken, &ends), 0);
}

Test(coalesce, a_full_batch_leaves_the_rest_for_the_next_and_ends_its_group)
{
    for (int i = 0; i < DB_COALESCE_MAX + 1; i++) {
        char email[16];
        snprintf(email, sizeof(email), "%d@x", i);
        ask(i, &insert, email);
    }
    db_pending *taken[DB_COALESCE_MAX];
    bool ends;
    cr_assert_eq(pick(taken, &ends), DB_COALESCE_MAX);
    cr_expect_eq(taken[DB_COALESCE_MAX - 1], &p[DB_COALESCE_MAX - 1]);
    cr_expect(ends, "the one left out, its key unchecked, must not share the transaction");
}

Test(coalesce, the_batch_replaces_its_members_at_the_head_of_the_queue)
{
    ask(0, &insert, "a@x");
    ask(1, &plain, "z@x");
    ask(2, &insert, "bb@x");
    cr_assert_not(db_coalesce(&q, &free_list), "nothing left out: the group goes on");
    db_pending *b = q.queued_head;
    cr_assert_not_null(b);
    cr_expect_str_eq(b->name, "coring_t1", "the batch form's prepared statement");
    cr_expect_eq(b->stmt, &form);
    cr_expect(b->writes);
    cr_expect_eq(b->nmembers, 2);
    cr_expect(b->members == &p[0] && p[0].next == &p[2] && !p[2].next);
    cr_expect_eq(q.queued, 2, "the batch and the other statement's query");
    cr_expect_eq(b->next, &p[1]);
    cr_expect_eq(b->nparams, 2);
    cr_expect_eq(b->formats[0], 1, "binary");
    /* $2 as a text[] of the two emails (codec.h, db_encode_array):
     * 20 bytes of header, then per element a length and its bytes. */
    cr_assert_eq(b->lengths[1], 20 + 4 + 3 + 4 + 4);
    cr_expect_eq(memcmp(b->values[1] + 24, "a@x", 3), 0);
    cr_expect_eq(memcmp(b->values[1] + 31, "bb@x", 4), 0);
    free(b->owned);
    free(b);
}

Test(coalesce, a_duplicate_makes_the_writing_batch_end_its_group)
{
    ask(0, &insert, "a@x");
    ask(1, &insert, "b@x");
    ask(2, &insert, "a@x");
    cr_expect(db_coalesce(&q, &free_list));
    cr_expect_eq(q.queued_head->nmembers, 2);
    cr_expect_eq(q.queued_head->next, &p[2], "the duplicate waits behind it");
    free(q.queued_head->owned);
    free(q.queued_head);
}
