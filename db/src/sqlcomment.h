/*
 * Internal to db/: a sampled request's trace context carried to
 * PostgreSQL as a SQL comment in the sqlcommenter format
 * (https://google.github.io/sqlcommenter/spec/), so that the request's
 * query can be found in pg_stat_activity and the server log by its trace
 * id. Such a query goes as an unnamed statement (PQsendQueryParams) with
 * the comment appended to its registered SQL; docs/tracing.md says why
 * this and not application_name, and what it costs.
 */
#ifndef CORING_DB_SQLCOMMENT_H
#define CORING_DB_SQLCOMMENT_H

#include <stddef.h>

#include "coring/core/trace_context.h"

/*
 * db_sqlcomment_size - bytes db_sqlcomment_write needs for @sql_len bytes
 * of SQL (the NUL included). Pure.
 */
size_t db_sqlcomment_size(size_t sql_len);

/*
 * db_sqlcomment_write - @sql (@sql_len bytes) and a space, then a
 * comment of @trace in sqlcommenter's form (slash-star,
 * `traceparent='00-TRACE-SPAN-FF'`, star-slash), into @dst; a trailing
 * ';' and white space of @sql are dropped first. @dst holds
 * db_sqlcomment_size(@sql_len) bytes; the result is NUL-terminated. The span is
 * coring's span for the request (the `span_id` of its log lines). The
 * value needs no URL encoding: lowercase hex and '-' only. Pure. Returns
 * @dst.
 */
char *db_sqlcomment_write(char *dst, const char *sql, size_t sql_len,
                          const cr_trace_context *trace);

#endif
