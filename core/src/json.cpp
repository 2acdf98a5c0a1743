/*
 * JSON parsing: simdjson's DOM parser behind the C API of coring/core/json.h.
 *
 * One of coring's two C++ files (with float_format.cpp). It exists so that the rest of the
 * runtime stays C17 while requests are parsed at simdjson's speed. Nothing
 * here throws across the C boundary: simdjson is used through its error-code
 * API, helpers are noexcept, and allocations are nothrow or caught.
 *
 * Memory: a parser starts empty and grows, by powers of two from 4 KiB up to
 * its max_bytes, to fit the largest document it has seen (a high-water mark,
 * never shrunk). simdjson needs about 15 bytes per byte of capacity (tape,
 * string buffer, structural indexes, our padded copy of the input), so a
 * worker thread that only sees small requests keeps about 60 KiB, and one
 * that saw a 1 MiB document keeps about 15 MiB until its parser is destroyed.
 *
 * Iteration: simdjson's tape has no random access into arrays and objects;
 * reaching the i-th child walks i siblings (each step O(1): a nested
 * container is skipped through its matching-brace index). So that a loop
 * over i = 0..n-1 costs O(n) and not O(n^2), which a large array in a
 * request would otherwise turn into a denial of service, each document keeps
 * a small LRU cache of cursors (container, index, tape position); a call for
 * the same or a later index of a cached container resumes from there. The
 * cache is mutable state in the document: read one document from one thread
 * at a time, like the rest of the parser.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "coring/core/json.h"
}

#include <simdjson.h>

#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>

using simdjson::error_code;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::internal::tape_ref;

/* A cr_json_value is a dom::element copied bytewise. dom::element's only
 * member is an internal::tape_ref {document pointer, tape index}; both types
 * are standard-layout, so the bytes are a tape_ref too, which is how the
 * iteration code below reaches the tape. */
static_assert(sizeof(element) <= sizeof(cr_json_value), "dom::element must fit in cr_json_value");
static_assert(std::is_trivially_copyable_v<element>, "dom::element must be trivially copyable");
static_assert(std::is_trivially_copyable_v<tape_ref>, "tape_ref must be trivially copyable");
static_assert(std::is_standard_layout_v<element> && std::is_standard_layout_v<tape_ref>,
              "dom::element and tape_ref must be standard-layout");
static_assert(sizeof(element) == sizeof(tape_ref), "dom::element must be exactly one tape_ref");

namespace
{

constexpr size_t default_max_bytes = 1024 * 1024;
constexpr size_t default_max_depth = 64;
constexpr size_t minimum_capacity = 4096;
constexpr size_t cursor_count = 4; /* containers iterated at once (nesting) */

/* Where the last lookup of the @index-th child of the container at tape
 * index @container landed: @position is the tape index of that child (for
 * objects, of its key). container == 0 marks an empty slot (tape word 0 is
 * the root word, never a container). */
struct cursor {
    size_t container;
    size_t index;
    size_t position;
    unsigned long last_used;
};

/* The document simdjson parses into, with the cursor cache beside it. Values
 * point at the dom::document base; static_cast recovers this type. */
struct cached_document : simdjson::dom::document {
    mutable cursor cursors[cursor_count] = {};
    mutable unsigned long clock = 0;

    void forget_cursors() noexcept
    {
        for (cursor &c : cursors)
            c.container = 0;
    }
};

} // namespace

struct cr_json_parser {
    simdjson::dom::parser parser;
    cached_document doc;
    char *input = nullptr; /* capacity + SIMDJSON_PADDING bytes */
    size_t capacity = 0;   /* bytes of input the buffers above can hold */
    size_t max_bytes;
    size_t max_depth;
    error_code last_error = simdjson::SUCCESS; /* simdjson's, for cr_json_parser_detail */

    cr_json_parser(size_t max_bytes_, size_t simdjson_max, size_t max_depth_) noexcept
        : parser(simdjson_max), max_bytes(max_bytes_), max_depth(max_depth_)
    {
    }
    ~cr_json_parser()
    {
        delete[] input;
    }
    cr_json_parser(const cr_json_parser &) = delete;
    cr_json_parser &operator=(const cr_json_parser &) = delete;
};

namespace
{

cr_json_error from_simdjson(error_code err) noexcept
{
    switch (err) {
    case simdjson::SUCCESS:
        return CR_JSON_OK;
    case simdjson::UTF8_ERROR:
        return CR_JSON_EUTF8;
    case simdjson::DEPTH_ERROR:
        return CR_JSON_EDEPTH;
    case simdjson::CAPACITY:
        return CR_JSON_ETOOBIG;
    case simdjson::MEMALLOC:
        return CR_JSON_ENOMEM;
    case simdjson::INCORRECT_TYPE:
        return CR_JSON_ETYPE;
    case simdjson::NO_SUCH_FIELD:
        return CR_JSON_ENOKEY;
    case simdjson::NUMBER_OUT_OF_RANGE:
    case simdjson::INDEX_OUT_OF_BOUNDS:
        return CR_JSON_ERANGE;
    default:
        return CR_JSON_EINVALID;
    }
}

inline tape_ref ref_of(cr_json_value v) noexcept
{
    tape_ref t;
    std::memcpy(static_cast<void *>(&t), &v, sizeof(t));
    return t;
}

inline element element_of(const tape_ref &t) noexcept
{
    element e;
    std::memcpy(static_cast<void *>(&e), &t, sizeof(e));
    return e;
}

inline cr_json_value value_of(const element &e) noexcept
{
    cr_json_value v = {};
    std::memcpy(&v, &e, sizeof(e));
    return v;
}

inline cr_json_value value_at(const simdjson::dom::document *doc, size_t index) noexcept
{
    tape_ref t(doc, index);
    cr_json_value v = {};
    std::memcpy(&v, &t, sizeof(t));
    return v;
}

/* A zeroed cr_json_value has no document and behaves as JSON null. */
inline element_type type_of(const tape_ref &t) noexcept
{
    return t.doc ? element_of(t).type() : element_type::NULL_VALUE;
}

/* Number of children (array elements, object members) of the container @t,
 * counted by walking when simdjson's 24-bit count saturated. */
size_t child_count(const tape_ref &t, bool is_object) noexcept
{
    size_t n = t.scope_count();
    if (n < simdjson::internal::JSON_COUNT_MASK)
        return n;
    const size_t end = t.matching_brace_index() - 1;
    n = 0;
    for (size_t pos = t.json_index + 1; pos < end; n++)
        pos = tape_ref(t.doc, is_object ? pos + 1 : pos).after_element();
    return n;
}

/* Tape index of the @i-th child of the container @t (for an object, of the
 * @i-th key; its value follows at +1), or 0 when there is none. */
size_t child_position(const tape_ref &t, size_t i, bool is_object) noexcept
{
    if (t.scope_count() < simdjson::internal::JSON_COUNT_MASK && i >= t.scope_count())
        return 0;
    const auto *doc = static_cast<const cached_document *>(t.doc);
    const size_t end = t.matching_brace_index() - 1; /* the closing brace */

    cursor *slot = nullptr;
    for (cursor &c : doc->cursors) {
        if (c.container == t.json_index) {
            slot = &c;
            break;
        }
        if (!slot || c.last_used < slot->last_used)
            slot = &c; /* least recently used, unless a match turns up */
    }
    size_t k = 0;
    size_t pos = t.json_index + 1;
    if (slot->container == t.json_index && slot->index <= i) {
        k = slot->index;
        pos = slot->position;
    }
    while (k < i && pos < end) {
        pos = tape_ref(doc, is_object ? pos + 1 : pos).after_element();
        k++;
    }
    if (pos >= end)
        return 0;
    *slot = cursor{t.json_index, i, pos, ++doc->clock};
    return pos;
}

/* Make the buffers hold a document of @len bytes, growing by powers of two. */
cr_json_error reserve(cr_json_parser *p, size_t len) noexcept
{
    size_t cap = minimum_capacity;
    while (cap < len)
        cap *= 2;
    if (cap > p->parser.max_capacity())
        cap = p->parser.max_capacity();

    p->capacity = 0; /* until every buffer below has the new size */
    char *input = new (std::nothrow) char[cap + simdjson::SIMDJSON_PADDING];
    if (!input)
        return CR_JSON_ENOMEM;
    delete[] p->input;
    p->input = input;
    if (p->doc.allocate(cap) != simdjson::SUCCESS)
        return CR_JSON_ENOMEM;
    /* simdjson counts the root value as 1 deep and each value inside a
     * non-empty array or object one deeper: 64 arrays around 1 put the 1
     * at its depth 65. Ours counts the arrays and objects only. */
    error_code err = p->parser.allocate(cap, p->max_depth + 1);
    if (err != simdjson::SUCCESS)
        return err == simdjson::CAPACITY ? CR_JSON_ETOOBIG : CR_JSON_ENOMEM;
    p->capacity = cap;
    return CR_JSON_OK;
}

} // namespace

/*
 * The C API. json.h is a C header, so these definitions cannot say noexcept
 * (C++17 rejects a redeclaration with a different exception specification);
 * instead they call only non-throwing code (simdjson's error-code API,
 * nothrow new), and the two that allocate also catch everything.
 */
extern "C" {

cr_json_parser *cr_json_parser_create(size_t max_bytes, size_t max_depth)
{
    if (max_bytes == 0)
        max_bytes = default_max_bytes;
    if (max_bytes > simdjson::SIMDJSON_MAXSIZE_BYTES) /* tape indices are 32-bit */
        max_bytes = simdjson::SIMDJSON_MAXSIZE_BYTES;
    if (max_depth == 0)
        max_depth = default_max_depth;
    if (max_depth > max_bytes) /* deeper cannot fit; don't allocate for it */
        max_depth = max_bytes;
    try {
        /* simdjson allocates at least MINIMAL_DOCUMENT_CAPACITY even for a
         * tiny document; max_bytes itself is enforced in cr_json_parse. */
        size_t simdjson_max = max_bytes < simdjson::dom::MINIMAL_DOCUMENT_CAPACITY
                                  ? simdjson::dom::MINIMAL_DOCUMENT_CAPACITY
                                  : max_bytes;
        return new (std::nothrow) cr_json_parser(max_bytes, simdjson_max, max_depth);
    } catch (...) {
        return nullptr;
    }
}

void cr_json_parser_destroy(cr_json_parser *p)
{
    delete p;
}

cr_json_error cr_json_parse(cr_json_parser *p, const char *json, size_t len, cr_json_value *root)
{
    *root = cr_json_value{};
    p->last_error = simdjson::SUCCESS;
    if (len > p->max_bytes)
        return CR_JSON_ETOOBIG;
    try {
        /* A fresh parser has no buffer yet, even for empty input. */
        if (len > p->capacity || !p->input) {
            cr_json_error err = reserve(p, len);
            if (err != CR_JSON_OK)
                return err;
        }
        if (len)
            std::memcpy(p->input, json, len);
        /* simdjson may read the padding; give it defined bytes. */
        std::memset(p->input + len, 0, simdjson::SIMDJSON_PADDING);
        p->doc.forget_cursors();
        element e;
        error_code err = p->parser.parse_into_document(p->doc, p->input, len, false).get(e);
        if (err != simdjson::SUCCESS) {
            p->last_error = err;
            return from_simdjson(err);
        }
        *root = value_of(e);
        return CR_JSON_OK;
    } catch (const std::bad_alloc &) {
        return CR_JSON_ENOMEM;
    } catch (...) {
        return CR_JSON_EINVALID;
    }
}

const char *cr_json_parser_detail(const cr_json_parser *p)
{
    if (p->last_error == simdjson::SUCCESS)
        return nullptr;
    return simdjson::error_message(p->last_error);
}

const char *cr_json_error_message(cr_json_error err)
{
    switch (err) {
    case CR_JSON_OK:
        return "no error";
    case CR_JSON_EINVALID:
        return "invalid JSON";
    case CR_JSON_EUTF8:
        return "invalid UTF-8 in JSON";
    case CR_JSON_EDEPTH:
        return "JSON nested too deep";
    case CR_JSON_ETOOBIG:
        return "JSON document too large";
    case CR_JSON_ENOMEM:
        return "out of memory parsing JSON";
    case CR_JSON_ETYPE:
        return "JSON value has the wrong type";
    case CR_JSON_ENOKEY:
        return "JSON object has no such key";
    case CR_JSON_ERANGE:
        return "JSON number or index out of range";
    }
    return "unknown JSON error";
}

cr_json_type cr_json_type_of(cr_json_value v)
{
    switch (type_of(ref_of(v))) {
    case element_type::ARRAY:
        return CR_JSON_ARRAY;
    case element_type::OBJECT:
        return CR_JSON_OBJECT;
    case element_type::INT64:
        return CR_JSON_INT;
    case element_type::UINT64: /* simdjson uses it only above INT64_MAX */
        return CR_JSON_UINT;
    case element_type::DOUBLE:
        return CR_JSON_DOUBLE;
    case element_type::STRING:
        return CR_JSON_STRING;
    case element_type::BOOL:
        return CR_JSON_BOOL;
    case element_type::NULL_VALUE:
        return CR_JSON_NULL;
    }
    return CR_JSON_NULL;
}

cr_json_error cr_json_object_get(cr_json_value obj, const char *key, size_t key_len,
                                 cr_json_value *out)
{
    *out = cr_json_value{};
    tape_ref t = ref_of(obj);
    if (type_of(t) != element_type::OBJECT)
        return CR_JSON_ETYPE;
    simdjson::dom::object o;
    if (element_of(t).get_object().get(o) != simdjson::SUCCESS)
        return CR_JSON_ETYPE;
    element e;
    error_code err = o.at_key(std::string_view(key_len ? key : "", key_len)).get(e);
    if (err != simdjson::SUCCESS)
        return from_simdjson(err);
    *out = value_of(e);
    return CR_JSON_OK;
}

long cr_json_object_size(cr_json_value obj)
{
    tape_ref t = ref_of(obj);
    if (type_of(t) != element_type::OBJECT)
        return -1;
    return static_cast<long>(child_count(t, true));
}

cr_json_error cr_json_object_at(cr_json_value obj, size_t i, const char **key, size_t *key_len,
                                cr_json_value *value)
{
    *value = cr_json_value{};
    tape_ref t = ref_of(obj);
    if (type_of(t) != element_type::OBJECT)
        return CR_JSON_ETYPE;
    size_t pos = child_position(t, i, true);
    if (!pos)
        return CR_JSON_ERANGE;
    std::string_view k = tape_ref(t.doc, pos).get_string_view();
    *key = k.data();
    *key_len = k.size();
    *value = value_at(t.doc, pos + 1);
    return CR_JSON_OK;
}

long cr_json_array_size(cr_json_value arr)
{
    tape_ref t = ref_of(arr);
    if (type_of(t) != element_type::ARRAY)
        return -1;
    return static_cast<long>(child_count(t, false));
}

cr_json_error cr_json_array_at(cr_json_value arr, size_t i, cr_json_value *out)
{
    *out = cr_json_value{};
    tape_ref t = ref_of(arr);
    if (type_of(t) != element_type::ARRAY)
        return CR_JSON_ETYPE;
    size_t pos = child_position(t, i, false);
    if (!pos)
        return CR_JSON_ERANGE;
    *out = value_at(t.doc, pos);
    return CR_JSON_OK;
}

cr_json_error cr_json_get_bool(cr_json_value v, bool *out)
{
    tape_ref t = ref_of(v);
    if (type_of(t) != element_type::BOOL)
        return CR_JSON_ETYPE;
    *out = t.is_true();
    return CR_JSON_OK;
}

/* Integers: simdjson stores an integer as INT64 when it fits, else UINT64;
 * anything with a fraction or exponent is a DOUBLE. A double is never
 * converted to an integer (not even 2.0): CR_JSON_ERANGE. */
cr_json_error cr_json_get_int64(cr_json_value v, int64_t *out)
{
    tape_ref t = ref_of(v);
    switch (type_of(t)) {
    case element_type::INT64:
        *out = t.next_tape_value<int64_t>();
        return CR_JSON_OK;
    case element_type::UINT64:
    case element_type::DOUBLE:
        return CR_JSON_ERANGE;
    default:
        return CR_JSON_ETYPE;
    }
}

cr_json_error cr_json_get_uint64(cr_json_value v, uint64_t *out)
{
    tape_ref t = ref_of(v);
    switch (type_of(t)) {
    case element_type::INT64: {
        int64_t i = t.next_tape_value<int64_t>();
        if (i < 0)
            return CR_JSON_ERANGE;
        *out = static_cast<uint64_t>(i);
        return CR_JSON_OK;
    }
    case element_type::UINT64:
        *out = t.next_tape_value<uint64_t>();
        return CR_JSON_OK;
    case element_type::DOUBLE:
        return CR_JSON_ERANGE;
    default:
        return CR_JSON_ETYPE;
    }
}

cr_json_error cr_json_get_double(cr_json_value v, double *out)
{
    tape_ref t = ref_of(v);
    if (!t.doc)
        return CR_JSON_ETYPE;
    double d;
    error_code err = element_of(t).get_double().get(d); /* converts integers */
    if (err != simdjson::SUCCESS)
        return from_simdjson(err);
    *out = d;
    return CR_JSON_OK;
}

cr_json_error cr_json_get_string(cr_json_value v, const char **s, size_t *len)
{
    tape_ref t = ref_of(v);
    if (type_of(t) != element_type::STRING)
        return CR_JSON_ETYPE;
    std::string_view sv = t.get_string_view();
    *s = sv.data();
    *len = sv.size();
    return CR_JSON_OK;
}

bool cr_json_is_null(cr_json_value v)
{
    return type_of(ref_of(v)) == element_type::NULL_VALUE;
}

} /* extern "C" */
