/*
 * A sampled request's traceparent as a sqlcommenter comment on its query
 * (sqlcomment.h).
 */
#include "sqlcomment.h"

#include <string.h>

#define PREFIX "/*traceparent='"
#define SUFFIX "'*/"
/* " " PREFIX, the traceparent (55 bytes), SUFFIX */
#define COMMENT_BYTES (1 + sizeof(PREFIX) - 1 + 55 + sizeof(SUFFIX) - 1)

size_t db_sqlcomment_size(size_t sql_len)
{
    return sql_len + COMMENT_BYTES + 1;
}

char *db_sqlcomment_write(char *dst, const char *sql, size_t sql_len,
                          const cr_trace_context *trace)
{
    static const char hex[] = "0123456789abcdef";
    while (sql_len && (sql[sql_len - 1] == ';' || sql[sql_len - 1] == ' ' ||
                       sql[sql_len - 1] == '\n' || sql[sql_len - 1] == '\t'))
        sql_len--;
    char *p = dst;
    memcpy(p, sql, sql_len);
    p += sql_len;
    *p++ = ' ';
    memcpy(p, PREFIX, sizeof(PREFIX) - 1);
    p += sizeof(PREFIX) - 1;
    *p++ = '0', *p++ = '0', *p++ = '-';
    memcpy(p, trace->trace_id, 32);
    p += 32;
    *p++ = '-';
    memcpy(p, trace->span_id, 16);
    p += 16;
    *p++ = '-';
    *p++ = hex[(trace->flags >> 4) & 15];
    *p++ = hex[trace->flags & 15];
    memcpy(p, SUFFIX, sizeof(SUFFIX));
    return dst;
}
