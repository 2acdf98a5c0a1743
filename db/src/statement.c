/*
 * The typed statements' registry: see statement.h and db_register in
 * coring/db/db.h.
 */
#include "statement.h"

#include "codec.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static db_stmt **list;
static size_t count, capacity;
static atomic_bool closed;

/* Append @s to the list, named after its place. 0 or -ENOMEM. */
static int add(db_stmt *s)
{
    if (count == capacity) {
        size_t cap = capacity ? 2 * capacity : 16;
        db_stmt **grown = realloc(list, cap * sizeof(*list));
        if (!grown)
            return -ENOMEM;
        list = grown;
        capacity = cap;
    }
    snprintf(s->name, sizeof(s->name), "coring_t%zu", count);
    s->index = count;
    list[count++] = s;
    return 0;
}

int db_register(const db_statement *def, const db_stmt **out)
{
    if (!def || !def->sql || !out)
        return -EINVAL;
    if (atomic_load_explicit(&closed, memory_order_relaxed))
        return -EBUSY;
    int n = 0;
    while (n < DB_MAX_PARAMS && def->types[n] != DB_TYPE_NONE) {
        if (!db_type_known(def->types[n]))
            return -EINVAL;
        n++;
    }
    for (int i = n; i < DB_MAX_PARAMS; i++)
        if (def->types[i] != DB_TYPE_NONE)
            return -EINVAL; /* a gap in the list */
    if (def->batch_sql &&
        (def->batch_key_param < 0 || def->batch_key_param >= n || def->batch_key_column < 0))
        return -EINVAL;
    db_stmt *s = calloc(1, sizeof(*s));
    db_stmt *b = def->batch_sql ? calloc(1, sizeof(*b)) : NULL;
    if (!s || (def->batch_sql && !b)) {
        free(s);
        free(b);
        return -ENOMEM;
    }
    s->def = *def;
    s->nparams = n;
    for (int i = 0; i < n; i++)
        s->oids[i] = (unsigned)def->types[i];
    if (b) {
        b->def = *def;
        b->def.sql = def->batch_sql;
        b->def.batch_sql = NULL;
        b->nparams = n;
        for (int i = 0; i < n; i++)
            b->oids[i] = db_array_oid(def->types[i]);
    }
    if (add(s) < 0) {
        free(s);
        free(b);
        return -ENOMEM;
    }
    if (b && add(b) < 0) {
        count--; /* @s, just added: both or neither */
        free(s);
        free(b);
        return -ENOMEM;
    }
    s->batch = b;
    *out = s;
    return 0;
}

const db_stmt *const *db_statements(size_t *n)
{
    *n = count;
    return (const db_stmt *const *)list;
}

bool db_stmt_refuse_batch(const db_stmt *s)
{
    /* The registry's own, writable entry: the handle is const for callers. */
    db_stmt *own = s->index < count && list[s->index] == s ? list[s->index] : NULL;
    return own && !atomic_exchange_explicit(&own->batch_refused, true, memory_order_relaxed);
}

void db_statements_close(void)
{
    atomic_store_explicit(&closed, true, memory_order_relaxed);
}
