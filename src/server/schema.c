/* schema.c - JSON Schema to GBNF: the walk over the schema (see schema.h and
 * docs/server.md, "JSON schemas"; the grammar text side is schema_gbnf.c).
 *
 * One pass over the schema writes one GBNF rule per subschema, named
 * "r<counter>-<hint>" (the counter makes names unique; the hint is the property
 * or definition name cut to [a-zA-Z0-9-]). Shared rules have fixed names (ws,
 * value, object, array, string, char, number, integer, boolean, null, xtail) and
 * are written once, on first use; bounded repetitions are chains of rules
 * "<item>-upto-<k>" (lamina's GBNF has no {m,n}), also written once per item.
 *
 * Invariants of the grammar, so that it stays deterministic enough for the
 * engine's stack limit: no value rule starts or ends with whitespace; `ws` (at
 * most 20 of [ \t\n]) follows every opening bracket, key, colon, comma and value;
 * object members keep the schema's property order; keys of additional properties
 * cannot spell a listed key (a trie of the listed keys, complemented).
 *
 * Every grammar produced is parsed back, checked for rules that can never end
 * (a $ref cycle with no finite instance) and built by the grammar engine (which
 * refuses left recursion) before it is returned. Work is linear in the schema
 * size; the limits in schema.h bound it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/schema_int.h"

/* type bits */
enum { T_OBJECT = 1, T_ARRAY = 2, T_STRING = 4, T_NUMBER = 8, T_INTEGER = 16, T_BOOLEAN = 32, T_NULL = 64 };
static const char *const TYPE_NAMES[] = {"object", "array", "string", "number", "integer", "boolean", "null"};

/* keywords that constrain a value (others are annotations or unknown, and ignored) */
static const char *const CONSTRAINING[] = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "minLength",
    "maxLength",
    NULL,
};

/* keywords refused: the grammar could not enforce them */
static const char *const REFUSED[] = {
    "pattern",
    "patternProperties",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
    NULL,
};

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (!strcmp(*list, s))
            return true;
    return false;
}

/* a count keyword (minLength, maxItems...): *out = def when absent */
static void get_count(struct gen *g, const json_t *s, const char *key, int64_t def, int64_t *out)
{
    const json_t *v = json_object_get(s, key);
    *out = def;
    if (!v)
        return;
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (d < 0 || d != (double)(int64_t)d) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: '%s' must be a non-negative integer", key);
    } else if (d > LM_SCHEMA_MAX_REPEAT) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: '%s' above %d is not supported", key, LM_SCHEMA_MAX_REPEAT);
    } else {
        *out = (int64_t)d;
    }
}

/* ---- schema walking ---------------------------------------------------------- */

static void gen_into(struct gen *g, const json_t *s, int depth, const char *name);

/* first constraining keyword of s other than `except` (NULL if none) */
static const char *constraining_sibling(const json_t *s, const char *except)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (strcmp(key, except) && in_list(CONSTRAINING, key))
            return key;
    }
    return NULL;
}

/* refuse unsupported keywords; true if s is fine to walk */
static bool check_keywords(struct gen *g, const json_t *s)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (in_list(REFUSED, key)) {
            lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: keyword '%s' is not supported", key);
            return false;
        }
    }
    return g->st == LM_OK;
}

/* the shared rule a simple schema is (true, {}, {"type": "string"}...), or NULL */
static const char *plain_rule(struct gen *g, const json_t *s)
{
    if (json_is_true(s))
        return lm_schema_prim(g, P_VALUE);
    if (!json_is_object(s) || !check_keywords(g, s))
        return NULL;
    const char *other = constraining_sibling(s, "type");
    const json_t *t = json_object_get(s, "type");
    if (other)
        return NULL;
    if (!t)
        return lm_schema_prim(g, P_VALUE);
    static const int IDS[] = {-1, -1, P_STRING, P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL};
    for (int i = 2; i < 7; i++)
        if (json_is_string(t) && !strcmp(json_string_value(t), TYPE_NAMES[i]))
            return lm_schema_prim(g, IDS[i]);
    return NULL;
}

/* convert subschema s into a rule; its name goes to name */
static void gen_sub(struct gen *g, const json_t *s, int depth, const char *hint, char name[NAME_LEN])
{
    const char *p = plain_rule(g, s);
    if (p) {
        snprintf(name, NAME_LEN, "%s", p);
        return;
    }
    lm_schema_new_name(g, hint, name);
    gen_into(g, s, depth + 1, name);
}

/* bits of the `type` keyword (0 when absent) */
static unsigned type_mask(struct gen *g, const json_t *s)
{
    const json_t *t = json_object_get(s, "type");
    if (!t)
        return 0;
    const size_t n = json_is_array(t) ? json_array_size(t) : 1;
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(t) ? json_array_get(t, i) : t;
        const char *name = json_string_value(e);
        unsigned bit = 0;
        for (int k = 0; k < 7 && name; k++)
            if (!strcmp(name, TYPE_NAMES[k]))
                bit = 1u << k;
        if (!bit) {
            lm_schema_fail(g, LM_ERR_CORRUPT, "schema: unknown type %s%.40s%s", name ? "'" : "",
                           name ? name : "(not a string)", name ? "'" : "");
            return 0;
        }
        mask |= bit;
    }
    if (!mask)
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: 'type' is an empty list");
    return mask;
}

/* resolve a local JSON pointer ("#", "#/$defs/A", "#/definitions/A/properties/b") */
static const json_t *resolve(struct gen *g, const char *ref)
{
    if (ref[0] != '#') {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: only local $ref ('#/...') is supported, not '%.60s'", ref);
        return NULL;
    }
    const json_t *cur = g->root;
    const char *p = ref + 1;
    char seg[256];
    while (*p == '/' && cur) {
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~' && (p[1] == '0' || p[1] == '1'))
                c = *++p == '0' ? '~' : '/';
            if (n + 1 >= sizeof seg)
                return NULL;
            seg[n++] = c;
        }
        seg[n] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, seg);
        } else if (json_is_array(cur)) {
            char *end;
            const unsigned long i = strtoul(seg, &end, 10);
            cur = (n > 0 && *end == 0) ? json_array_get(cur, i) : NULL;
        } else {
            cur = NULL;
        }
    }
    return *p ? NULL : cur;
}

/* the rule of $ref target (converted once, on first use) */
static void gen_ref(struct gen *g, const json_t *s, int depth, struct lm_strbuf *b)
{
    const char *ref = json_string_value(json_object_get(s, "$ref"));
    const char *other = constraining_sibling(s, "$ref");
    if (!ref) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: '$ref' must be a string");
        return;
    }
    if (other) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: '$ref' with a sibling '%s' is not supported", other);
        return;
    }
    for (size_t i = 0; i < g->n_refs; i++)
        if (!strcmp(g->refs[i].ref, ref)) {
            lm_schema_puts(g, b, g->refs[i].name);
            return;
        }
    const json_t *target = resolve(g, ref);
    if (!target) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: $ref '%.80s' points to nothing", ref);
        return;
    }
    if (g->n_refs == g->cap_refs) {
        const size_t cap = g->cap_refs ? 2 * g->cap_refs : 16;
        struct ref_memo *r = realloc(g->refs, cap * sizeof *r);
        if (!r) {
            lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
            return;
        }
        g->refs = r;
        g->cap_refs = cap;
    }
    char name[NAME_LEN];
    const char *slash = strrchr(ref, '/');
    lm_schema_new_name(g, slash ? slash + 1 : "self", name);
    char *copy = strdup(ref);
    if (!copy) {
        lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
        return;
    }
    g->refs[g->n_refs].ref = copy;
    memcpy(g->refs[g->n_refs++].name, name, NAME_LEN);
    gen_into(g, target, depth + 1, name); /* may grow g->refs: use the local copy */
    lm_schema_puts(g, b, name);
}

/* type bits a literal value satisfies */
static unsigned value_types(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return T_OBJECT;
    case JSON_ARRAY: return T_ARRAY;
    case JSON_STRING: return T_STRING;
    case JSON_INTEGER: return T_NUMBER | T_INTEGER;
    case JSON_REAL: {
        const double d = json_real_value(v);
        return T_NUMBER | (d == (double)(long long)d ? T_INTEGER : 0);
    }
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOLEAN;
    default: return T_NULL;
    }
}

/* const or enum: the values' compact JSON texts, filtered by `type` */
static void gen_enum(struct gen *g, const json_t *s, struct lm_strbuf *b)
{
    const json_t *c = json_object_get(s, "const"), *e = json_object_get(s, "enum");
    if (c && e) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: 'const' and 'enum' together are not supported");
        return;
    }
    if (e && (!json_is_array(e) || json_array_size(e) == 0)) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: 'enum' must be a non-empty array");
        return;
    }
    const unsigned mask = type_mask(g, s);
    const size_t n = c ? 1 : json_array_size(e);
    size_t n_alt = 0;
    for (size_t i = 0; i < n && g->st == LM_OK; i++) {
        const json_t *v = c ? c : json_array_get(e, i);
        if (mask && !(mask & value_types(v)))
            continue;
        char *text = lm_schema_json_text(g, v);
        if (!text)
            return;
        if (n_alt++)
            lm_schema_puts(g, b, " | ");
        lm_schema_literal(g, b, text, strlen(text));
        free(text);
    }
    if (n_alt == 0)
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: no value of '%s' has the schema's type", c ? "const" : "enum");
}

/* anyOf / oneOf: alternatives (oneOf's exclusivity is not enforced) */
static void gen_any(struct gen *g, const json_t *s, int depth, struct lm_strbuf *b)
{
    const char *key = json_object_get(s, "anyOf") ? "anyOf" : "oneOf";
    const json_t *a = json_object_get(s, key);
    const char *other = constraining_sibling(s, key);
    if (other) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: '%s' with a sibling '%s' is not supported", key, other);
        return;
    }
    if (!json_is_array(a) || json_array_size(a) == 0) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: '%s' must be a non-empty array", key);
        return;
    }
    for (size_t i = 0; i < json_array_size(a) && g->st == LM_OK; i++) {
        char name[NAME_LEN];
        gen_sub(g, json_array_get(a, i), depth, key, name);
        lm_schema_printf(g, b, "%s%s", i ? " | " : "", name);
    }
}

/* ---- objects ------------------------------------------------------------------- */

enum extras { X_NONE, X_ANY, X_SCHEMA };

/* an object's members: listed properties in order, and what else is allowed */
struct obj_spec {
    const char **keys;
    const json_t **schemas; /* NULL: any value */
    bool *req;
    size_t n, cap;
    enum extras extras;
    const json_t *extra_schema;
    bool closed; /* additionalProperties: false somewhere (allOf) */
    bool open;   /* additionalProperties: true somewhere (allOf) */
};

static void spec_free(struct obj_spec *o)
{
    free(o->keys);
    free(o->schemas);
    free(o->req);
}

/* add a property (or check it against an earlier one of the same name) */
static void spec_add(struct gen *g, struct obj_spec *o, const char *key, const json_t *schema, bool req)
{
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) {
            if (schema && o->schemas[i] && !json_equal((json_t *)schema, (json_t *)o->schemas[i]))
                lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: property '%.60s' is defined twice, differently", key);
            if (schema && !o->schemas[i])
                o->schemas[i] = schema;
            o->req[i] |= req;
            return;
        }
    if (o->n == o->cap) {
        const size_t cap = o->cap ? 2 * o->cap : 8;
        const char **k = realloc(o->keys, cap * sizeof *k);
        if (k)
            o->keys = k;
        const json_t **s = realloc(o->schemas, cap * sizeof *s);
        if (s)
            o->schemas = s;
        bool *r = realloc(o->req, cap * sizeof *r);
        if (r)
            o->req = r;
        if (!k || !s || !r) {
            lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
            return;
        }
        o->cap = cap;
    }
    o->keys[o->n] = key;
    o->schemas[o->n] = schema;
    o->req[o->n++] = req;
}

/* properties, required and additionalProperties of one object schema into o */
static void spec_read(struct gen *g, const json_t *s, struct obj_spec *o)
{
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    const json_t *add = json_object_get(s, "additionalProperties"), *v;
    const char *key;
    if ((props && !json_is_object(props)) || (req && !json_is_array(req)) ||
        (add && !json_is_boolean(add) && !json_is_object(add))) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: bad 'properties', 'required' or 'additionalProperties'");
        return;
    }
    json_object_foreach((json_t *)props, key, v) spec_add(g, o, key, v, false);
    for (size_t i = 0; i < json_array_size(req) && g->st == LM_OK; i++) {
        const char *name = json_string_value(json_array_get(req, i));
        if (!name)
            lm_schema_fail(g, LM_ERR_CORRUPT, "schema: 'required' must list strings");
        else
            spec_add(g, o, name, NULL, true);
    }
    if (json_is_false(add))
        o->closed = true;
    else if (json_is_true(add) || (json_is_object(add) && json_object_size(add) == 0))
        o->open = true;
    else if (json_is_object(add))
        o->extra_schema = add;
}

/* allOf part (recursively: $ref, nested allOf) merged into o */
static void spec_merge(struct gen *g, const json_t *s, int depth, struct obj_spec *o)
{
    if (depth > LM_SCHEMA_MAX_DEPTH) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: allOf/$ref nested deeper than %d (or a $ref cycle)",
                       LM_SCHEMA_MAX_DEPTH);
        return;
    }
    if (++g->n_nodes > LM_SCHEMA_MAX_NODES) { /* parts reached twice through $ref count twice */
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: more than %d subschemas", LM_SCHEMA_MAX_NODES);
        return;
    }
    if (!json_is_object(s) || !check_keywords(g, s)) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: an allOf part must be an object schema");
        return;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        if (!strcmp(key, "$ref")) {
            const json_t *t = json_is_string(v) ? resolve(g, json_string_value(v)) : NULL;
            if (!t)
                lm_schema_fail(g, LM_ERR_CORRUPT, "schema: $ref '%.80s' points to nothing", json_string_value(v));
            else
                spec_merge(g, t, depth + 1, o);
        } else if (!strcmp(key, "allOf")) {
            for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++)
                spec_merge(g, json_array_get(v, i), depth + 1, o);
            if (!json_is_array(v))
                lm_schema_fail(g, LM_ERR_CORRUPT, "schema: 'allOf' must be an array");
        } else if (!strcmp(key, "type")) {
            if (type_mask(g, s) != T_OBJECT)
                lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: allOf merges object schemas only");
        } else if (in_list(CONSTRAINING, key) && strcmp(key, "properties") && strcmp(key, "required") &&
                   strcmp(key, "additionalProperties")) {
            lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: allOf merges object schemas only, not '%s'", key);
        }
    }
    spec_read(g, s, o);
}

/* the rule for keys of additional properties: any plain string but a listed key
 * (extra keys have no escapes, so a listed key can only be spelled one way) */
static void gen_extra_key(struct gen *g, const struct obj_spec *o, char name[NAME_LEN])
{
    struct node {
        uint32_t cp;
        uint32_t child, next; /* first child, next sibling (0: none; node 0 is the root) */
        bool terminal;
    } *t = calloc(1, sizeof *t);
    size_t n = 1;
    for (size_t k = 0; k < o->n && t && g->st == LM_OK; k++) {
        json_t *js = json_string(o->keys[k]);
        char *text = js ? lm_schema_json_text(g, js) : NULL;
        json_decref(js);
        uint32_t at = 0;
        const size_t len = text ? strlen(text) : 0;
        for (size_t i = 1; i + 1 < len && t && !strchr(text, '\\');) {
            /* decode one UTF-8 code point (jansson's output is valid UTF-8) */
            const unsigned char c = (unsigned char)text[i];
            const int extra = c < 0x80 ? 0 : c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3;
            uint32_t cp = extra ? c & (0x3f >> extra) : c;
            for (int e = 1; e <= extra && i + (size_t)e < len; e++)
                cp = cp << 6 | ((unsigned char)text[i + (size_t)e] & 0x3f);
            i += (size_t)extra + 1;
            uint32_t ch = t[at].child;
            while (ch && t[ch].cp != cp)
                ch = t[ch].next;
            if (!ch) {
                struct node *nt = n & (n - 1) ? t : realloc(t, 2 * n * sizeof *t); /* doubling at powers of 2 */
                if (!nt) {
                    free(t);
                    t = NULL;
                    break;
                }
                t = nt;
                t[n] = (struct node){cp, 0, t[at].child, false};
                t[at].child = (uint32_t)n;
                ch = (uint32_t)n++;
            }
            at = ch;
        }
        if (t && text && !strchr(text, '\\'))
            t[at].terminal = true;
        free(text);
    }
    if (!t) {
        lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
        return;
    }
    char base[NAME_LEN];
    lm_schema_new_name(g, "xkey", base);
    const char *tail = lm_schema_prim(g, P_XTAIL);
    for (size_t i = 0; i < n && g->st == LM_OK; i++) {
        lm_schema_printf(g, &g->out, "%s-%zu ::= %s[^\"\\\\\\x00-\\x1F", base, i, t[i].terminal ? "" : "\"\\\"\" | ");
        for (uint32_t ch = t[i].child; ch; ch = t[ch].next)
            lm_schema_printf(g, &g->out, "\\U%08X", (unsigned)t[ch].cp);
        lm_schema_printf(g, &g->out, "] %s", tail);
        for (uint32_t ch = t[i].child; ch; ch = t[ch].next)
            lm_schema_printf(g, &g->out, " | [\\U%08X] %s-%u", (unsigned)t[ch].cp, base, (unsigned)ch);
        lm_schema_puts(g, &g->out, "\n");
    }
    free(t);
    snprintf(name, NAME_LEN, "%.60s-0", base);
}

/* the rules of the extra members: "<x>-star"-like rule of `"," ws key ws ":" ws value ws` */
static void gen_extras(struct gen *g, const struct obj_spec *o, int depth, char member[NAME_LEN], char more[NAME_LEN])
{
    char key[NAME_LEN], val[NAME_LEN], xkey[NAME_LEN + 8];
    struct lm_strbuf b = {0};
    const char *ws = lm_schema_prim(g, P_WS);
    if (o->extra_schema)
        gen_sub(g, o->extra_schema, depth, "xval", val);
    else
        snprintf(val, NAME_LEN, "%s", lm_schema_prim(g, P_VALUE));
    if (o->n) { /* `"` then the trie of the listed keys, complemented */
        gen_extra_key(g, o, key);
        snprintf(xkey, sizeof xkey, "\"\\\"\" %s", key);
    } else {
        snprintf(xkey, sizeof xkey, "%s", lm_schema_prim(g, P_STRING));
    }
    lm_schema_new_name(g, "xmember", member);
    lm_schema_printf(g, &b, "%s %s \":\" %s %s", xkey, ws, ws, val);
    lm_schema_emit(g, member, &b);
    lm_schema_new_name(g, "xmore", more);
    b.n = 0;
    lm_schema_printf(g, &b, "| \",\" %s %s %s %s", ws, member, ws, more);
    lm_schema_emit(g, more, &b);
    lm_strbuf_free(&b);
}

/* the member rules of o; names[i] for property i */
static void gen_members(struct gen *g, const struct obj_spec *o, int depth, char (*names)[NAME_LEN])
{
    struct lm_strbuf b = {0};
    const char *ws = lm_schema_prim(g, P_WS);
    for (size_t i = 0; i < o->n && g->st == LM_OK; i++) {
        char val[NAME_LEN];
        if (o->schemas[i])
            gen_sub(g, o->schemas[i], depth, o->keys[i], val);
        else
            snprintf(val, NAME_LEN, "%s", lm_schema_prim(g, P_VALUE));
        json_t *js = json_string(o->keys[i]);
        char *text = js ? lm_schema_json_text(g, js) : NULL;
        json_decref(js);
        if (!text) {
            lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
            break;
        }
        b.n = 0;
        lm_schema_literal(g, &b, text, strlen(text));
        lm_schema_printf(g, &b, " %s \":\" %s %s", ws, ws, val);
        free(text);
        lm_schema_new_name(g, o->keys[i], names[i]);
        lm_schema_emit(g, names[i], &b);
    }
    lm_strbuf_free(&b);
}

/* `"{" ws F "}"` for o: members in order, optional ones omissible, extras last */
static void gen_object_spec(struct gen *g, const struct obj_spec *o, int depth, struct lm_strbuf *b)
{
    char(*mem)[NAME_LEN] = calloc(o->n + 1, NAME_LEN), (*rest)[NAME_LEN] = calloc(o->n + 1, NAME_LEN);
    char xmember[NAME_LEN] = "", xmore[NAME_LEN] = "", first[NAME_LEN];
    struct lm_strbuf rb = {0};
    const char *ws = lm_schema_prim(g, P_WS);
    if (!mem || !rest) {
        lm_schema_fail(g, LM_ERR_NOMEM, "schema: out of memory");
        goto out_free;
    }
    gen_members(g, o, depth, mem);
    if (o->extras != X_NONE)
        gen_extras(g, o, depth, xmember, xmore);
    snprintf(rest[o->n], NAME_LEN, "%s", xmore); /* rest[i]: members from i on, after a first one */
    for (size_t i = o->n; i-- > 1 && g->st == LM_OK;) {
        rb.n = 0;
        if (!o->req[i])
            lm_schema_printf(g, &rb, "%s | ", rest[i + 1]); /* rest[i + 1] may be empty: first */
        lm_schema_printf(g, &rb, "\",\" %s %s %s %s", ws, mem[i], ws, rest[i + 1]);
        lm_schema_new_name(g, "rest", rest[i]);
        lm_schema_emit(g, rest[i], &rb);
    }
    rb.n = 0;
    bool any_req = false;
    for (size_t i = 0; i < o->n && !any_req; i++)
        any_req = o->req[i];
    if (!any_req) /* the empty alternative, as `""`: a trailing `|` would join the next line */
        lm_schema_puts(g, &rb, "\"\"");
    for (size_t i = 0; i < o->n; i++) {
        lm_schema_printf(g, &rb, "%s%s %s %s", i || !any_req ? " | " : "", mem[i], ws, rest[i + 1]);
        if (o->req[i])
            break;
    }
    if (!any_req && o->extras != X_NONE)
        lm_schema_printf(g, &rb, " | %s %s %s", xmember, ws, xmore);
    lm_schema_new_name(g, "members", first);
    lm_schema_emit(g, first, &rb);
    lm_schema_printf(g, b, "\"{\" %s %s \"}\"", ws, first);
out_free:
    lm_strbuf_free(&rb);
    free(mem);
    free(rest);
}

/* an object schema (its allOf merged in) */
static void gen_object(struct gen *g, const json_t *s, int depth, struct lm_strbuf *b)
{
    struct obj_spec o = {0};
    const bool merge = json_object_get(s, "allOf") != NULL;
    if (merge)
        spec_merge(g, s, depth, &o);
    else
        spec_read(g, s, &o);
    const bool listed = json_object_get(s, "properties") || (merge && o.n > 0);
    if (o.extra_schema && !merge)
        o.extras = X_SCHEMA;
    else if (merge ? (o.open && !o.closed && !o.extra_schema) : (o.open || (!o.closed && !listed)))
        o.extras = X_ANY;
    /* a required key not among the properties: any value, unless extras are refused */
    for (size_t i = 0; i < o.n && g->st == LM_OK; i++)
        if (!o.schemas[i] && o.closed)
            lm_schema_fail(g, LM_ERR_CORRUPT, "schema: required property '%.60s' is not allowed by the schema",
                           o.keys[i]);
    if (g->st == LM_OK)
        gen_object_spec(g, &o, depth, b);
    spec_free(&o);
}

/* ---- arrays, strings, types -------------------------------------------------- */

/* `"[" ws S0 "]"`: prefixItems in order, then items, minItems..maxItems of them */
static void gen_array(struct gen *g, const json_t *s, int depth, struct lm_strbuf *b)
{
    const json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items");
    if (json_is_array(items) && !prefix) { /* draft 4-7 tuples */
        prefix = items;
        items = json_object_get(s, "additionalItems");
    }
    if ((prefix && !json_is_array(prefix)) || (items && !json_is_object(items) && !json_is_boolean(items))) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: bad 'prefixItems' or 'items'");
        return;
    }
    const int64_t p = (int64_t)json_array_size(prefix);
    int64_t lo, hi, max;
    get_count(g, s, "minItems", 0, &lo);
    get_count(g, s, "maxItems", -1, &hi);
    max = json_is_false(items) && (hi < 0 || hi > p) ? p : hi; /* most items possible (-1: no limit) */
    if (g->st == LM_OK && max >= 0 && lo > max)
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: minItems is more than the array can hold");
    if (g->st != LM_OK || p > LM_SCHEMA_MAX_REPEAT) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: too many prefixItems");
        return;
    }
    const int64_t kp = max >= 0 && max < p ? max : p; /* prefix positions used */
    const char *ws = lm_schema_prim(g, P_WS);
    char next[NAME_LEN] = "", item[NAME_LEN], sep[NAME_LEN];
    struct lm_strbuf rb = {0};
    if (kp == p && (max < 0 || max > p)) { /* the tail of `items` */
        if (items && !json_is_true(items))
            gen_sub(g, items, depth, "item", item);
        else
            snprintf(item, NAME_LEN, "%s", lm_schema_prim(g, P_VALUE));
        lm_schema_new_name(g, "sep", sep);
        lm_schema_printf(g, &rb, "\",\" %s %s %s", ws, item, ws);
        lm_schema_emit(g, sep, &rb);
        rb.n = 0;
        if (p == 0) {
            lm_schema_printf(g, &rb, "%s%s %s", lo == 0 ? "| " : "", item, ws);
            lm_schema_repeat(g, &rb, sep, lo > 0 ? lo - 1 : 0, max < 0 ? -1 : max - 1);
        } else {
            lm_schema_repeat(g, &rb, sep, lo > p ? lo - p : 0, max < 0 ? -1 : max - p);
        }
        lm_schema_new_name(g, "tail", next);
        lm_schema_emit(g, next, &rb);
    }
    for (int64_t k = kp; k-- > 0 && g->st == LM_OK;) {
        char elem[NAME_LEN], name[NAME_LEN];
        gen_sub(g, json_array_get(prefix, (size_t)k), depth, "prefix", elem);
        rb.n = 0;
        lm_schema_printf(g, &rb, "%s%s%s %s %s %s", k >= lo ? "| " : "", k ? "\",\" " : "", k ? ws : "", elem, ws,
                         next);
        lm_schema_new_name(g, "at", name);
        lm_schema_emit(g, name, &rb);
        memcpy(next, name, NAME_LEN);
    }
    lm_schema_printf(g, b, "\"[\" %s %s \"]\"", ws, next);
    lm_strbuf_free(&rb);
}

/* a string, minLength..maxLength characters (an escape is one) */
static void gen_string(struct gen *g, const json_t *s, struct lm_strbuf *b)
{
    int64_t lo, hi;
    get_count(g, s, "minLength", 0, &lo);
    get_count(g, s, "maxLength", -1, &hi);
    if (g->st == LM_OK && hi >= 0 && lo > hi)
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: minLength is more than maxLength");
    if (lo == 0 && hi < 0) {
        lm_schema_puts(g, b, lm_schema_prim(g, P_STRING));
        return;
    }
    lm_schema_puts(g, b, "\"\\\"\"");
    lm_schema_repeat(g, b, lm_schema_prim(g, P_CHAR), lo, hi);
    lm_schema_puts(g, b, " \"\\\"\"");
}

/* by `type` (or the keywords present when it is absent) */
static void gen_types(struct gen *g, const json_t *s, int depth, struct lm_strbuf *b)
{
    unsigned mask = type_mask(g, s);
    if (!mask) {
        static const char *const OBJ[] = {"properties", "required", "additionalProperties", NULL};
        static const char *const ARR[] = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", NULL};
        static const char *const STR[] = {"minLength", "maxLength", NULL};
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)s, key, v)
        {
            mask |= in_list(OBJ, key) ? T_OBJECT : in_list(ARR, key) ? T_ARRAY : in_list(STR, key) ? T_STRING : 0;
        }
    }
    if (!mask) {
        lm_schema_puts(g, b, lm_schema_prim(g, P_VALUE));
        return;
    }
    if (mask & T_NUMBER)
        mask &= ~(unsigned)T_INTEGER;
    bool first = true;
    for (int k = 0; k < 7 && g->st == LM_OK; k++) {
        if (!(mask & 1u << k))
            continue;
        if (!first)
            lm_schema_puts(g, b, " | ");
        first = false;
        if (k == 0)
            gen_object(g, s, depth, b);
        else if (k == 1)
            gen_array(g, s, depth, b);
        else if (k == 2)
            gen_string(g, s, b);
        else
            lm_schema_puts(g, b, lm_schema_prim(g, (int[]){P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL}[k - 3]));
    }
}

/* write rule `name` for schema s */
static void gen_into(struct gen *g, const json_t *s, int depth, const char *name)
{
    struct lm_strbuf b = {0};
    if (g->st != LM_OK)
        return;
    if (depth > LM_SCHEMA_MAX_DEPTH) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: nested deeper than %d levels", LM_SCHEMA_MAX_DEPTH);
        return;
    }
    if (++g->n_nodes > LM_SCHEMA_MAX_NODES) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: more than %d subschemas", LM_SCHEMA_MAX_NODES);
        return;
    }
    if (json_is_true(s)) {
        lm_schema_puts(g, &b, lm_schema_prim(g, P_VALUE));
    } else if (json_is_false(s)) {
        lm_schema_fail(g, LM_ERR_UNSUPPORTED, "schema: 'false' (no value is valid) is not supported here");
    } else if (!json_is_object(s)) {
        lm_schema_fail(g, LM_ERR_CORRUPT, "schema: a schema must be an object or a boolean");
    } else if (!check_keywords(g, s)) {
        /* refused: the message is set */
    } else if (json_object_get(s, "$ref")) {
        gen_ref(g, s, depth, &b);
    } else if (json_object_get(s, "const") || json_object_get(s, "enum")) {
        gen_enum(g, s, &b);
    } else if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")) {
        gen_any(g, s, depth, &b);
    } else if (json_object_get(s, "allOf")) {
        const json_t *a = json_object_get(s, "allOf");
        char sub[NAME_LEN];
        if (json_is_array(a) && json_array_size(a) == 1 && !constraining_sibling(s, "allOf")) {
            gen_sub(g, json_array_get(a, 0), depth, "all", sub);
            lm_schema_puts(g, &b, sub);
        } else {
            gen_object(g, s, depth, &b);
        }
    } else {
        gen_types(g, s, depth, &b);
    }
    lm_schema_emit(g, name, &b);
    lm_strbuf_free(&b);
}

lm_status lm_schema_to_gbnf(const json_t *schema, char **out, char *err, size_t errlen)
{
    struct gen g = {.root = schema, .err = err, .errlen = errlen};
    if (errlen > 0)
        err[0] = 0;
    if (!out) {
        lm_schema_fail(&g, LM_ERR_INVALID_ARG, "schema: no output pointer");
        return g.st;
    }
    if (!schema) {
        lm_schema_printf(&g, &g.out, "root ::= %s\n", lm_schema_prim(&g, P_OBJECT));
    } else {
        g.refs = malloc(sizeof *g.refs);
        g.cap_refs = g.refs ? 1 : 0;
        if (g.refs && (g.refs[0].ref = strdup("#")) != NULL) {
            snprintf(g.refs[0].name, NAME_LEN, "root");
            g.n_refs = 1;
        }
        if (g.n_refs != 1)
            lm_schema_fail(&g, LM_ERR_NOMEM, "schema: out of memory");
        gen_into(&g, schema, 0, "root");
    }
    if (g.st == LM_OK)
        lm_schema_check(&g, g.out.p);
    for (size_t i = 0; i < g.n_refs; i++)
        free(g.refs[i].ref);
    free(g.refs);
    free(g.reps);
    if (g.st == LM_OK)
        *out = g.out.p;
    else
        free(g.out.p);
    return g.st;
}
