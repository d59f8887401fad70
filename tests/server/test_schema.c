/* test_schema.c - JSON Schema to GBNF (server/schema.h), tested by behaviour.
 *
 * Each case converts a schema, builds the grammar with lamina's GBNF parser and
 * engine (sampling/grammar.h), and feeds JSON texts to it code point by code
 * point (lm_grammar_accept_bytes): every text in `ok` must be taken whole and
 * leave the grammar complete; every text in `bad` must be refused somewhere or
 * leave it incomplete. Grammar text itself is never compared. Then: bad schemas
 * (not an object, unknown type, $ref to nowhere, too deep, unsupported keyword,
 * a recursion with no finite instance, oversized output) give the documented
 * codes and a message.
 */
#include <string.h>

#include "lm_test.h"
#include "sampling/grammar.h"
#include "server/schema.h"

#define MAX_TEXTS 16

struct schema_case {
    const char *schema; /* NULL: json_object mode */
    const char *ok[MAX_TEXTS], *bad[MAX_TEXTS];
};

/* 1 when the grammar takes text whole and is then complete, 0 otherwise */
static int accepts(const struct lm_grammar *proto, const char *text)
{
    struct lm_grammar *g = NULL;
    if (lm_grammar_copy(proto, &g) != LM_OK)
        return -1;
    int ok = lm_grammar_accept_bytes(g, text, strlen(text)) == LM_OK && lm_grammar_is_complete(g);
    lm_grammar_free(g);
    return ok;
}

static char *convert(const char *schema_text, lm_status *st, char *err, size_t errlen)
{
    json_t *schema = NULL;
    char *gbnf = NULL;
    if (schema_text) {
        json_error_t jerr;
        schema = json_loads(schema_text, JSON_DECODE_ANY, &jerr);
        if (!schema) {
            fprintf(stderr, "test schema does not load: %s: %s\n", jerr.text, schema_text);
            *st = LM_ERR_CORRUPT;
            return NULL;
        }
    }
    *st = lm_schema_to_gbnf(schema, &gbnf, err, errlen);
    json_decref(schema);
    return gbnf;
}

static void run_case(const struct schema_case *c)
{
    char err[256] = "";
    lm_status st;
    char *gbnf = convert(c->schema, &st, err, sizeof err);
    CHECKF(st == LM_OK && gbnf, "%s: %s", c->schema ? c->schema : "(json_object)", err);
    if (!gbnf)
        return;
    struct lm_grammar *g = NULL;
    char gerr[256] = "";
    st = lm_grammar_from_gbnf(gbnf, "root", &g, gerr, sizeof gerr);
    CHECKF(st == LM_OK, "%s: %s\n%s", c->schema, gerr, gbnf);
    for (int i = 0; g && i < MAX_TEXTS && c->ok[i]; i++)
        CHECKF(accepts(g, c->ok[i]) == 1, "schema %s should accept %s", c->schema, c->ok[i]);
    for (int i = 0; g && i < MAX_TEXTS && c->bad[i]; i++)
        CHECKF(accepts(g, c->bad[i]) == 0, "schema %s should reject %s", c->schema, c->bad[i]);
    lm_grammar_free(g);
    free(gbnf);
}

static const struct schema_case CASES[] = {
    /* json_object mode: any object, nothing else */
    {NULL,
     {"{}", "{ }", "{\"a\":1}", "{\"a\": [1, 2.5e-3, \"x\", null, true, false, {\"b\": {}}]}",
      "{\n  \"k\": \"v\",\n  \"l\": -0.5\n}"},
     {"[]", "1", "\"x\"", "{", "{\"a\"}", "{\"a\":}", "{a:1}", "{\"a\":1,}", "{\"a\":01}", " {}"}},
    /* nested objects, required vs optional, declaration order */
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
     "\"address\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\"}},"
     "\"required\":[\"city\"]}},\"required\":[\"name\",\"address\"]}",
     {"{\"name\":\"Ann\",\"address\":{\"city\":\"Oslo\"}}",
      "{\"name\":\"Ann\",\"age\":41,\"address\":{\"city\":\"O\"}}",
      "{ \"name\" : \"A\" , \"address\" : { \"city\" : \"O\" , \"zip\" : \"0150\" } }"},
     {"{\"address\":{\"city\":\"Oslo\"}}", "{\"name\":\"Ann\"}", "{\"name\":\"Ann\",\"address\":{}}",
      "{\"name\":\"Ann\",\"address\":{\"city\":\"O\"},\"x\":1}", "{\"name\":1,\"address\":{\"city\":\"O\"}}",
      "{\"name\":\"A\",\"age\":1.5,\"address\":{\"city\":\"O\"}}", "{\"address\":{\"city\":\"O\"},\"name\":\"A\"}",
      "{\"name\":\"A\",\"address\":{\"city\":\"O\"},\"age\":4}"}},
    /* all optional: any subset in order, and {} */
    {"{\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},\"c\":{\"type\":\"number\"}}}",
     {"{}", "{\"a\":true}", "{\"b\":null}", "{\"c\":1}", "{\"a\":false,\"c\":2}", "{\"a\":true,\"b\":null,\"c\":3}"},
     {"{\"d\":1}", "{\"a\":1}", "{,}", "{\"a\":true,}", "{\"b\":null,\"a\":true}", "{\"a\":true,\"a\":true}"}},
    /* additionalProperties: true / a schema: extra keys after the listed ones, never a listed key */
    {"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"idx\":{\"type\":\"string\"}},"
     "\"additionalProperties\":true}",
     {"{}", "{\"id\":1}", "{\"id\":1,\"other\":[1]}", "{\"i\":0}", "{\"idxx\":0}", "{\"\":0}", "{\"x\":{},\"y\":2}",
      "{\"id\":1,\"idx\":\"s\",\"\xc3\xa9\":1}"},
     {"{\"id\":\"s\"}", "{\"x\":1,\"id\":\"s\"}", "{\"idx\":1}", "{\"id\":1,\"id\":2}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}"
     "}",
     {"{\"a\":1,\"b\":\"x\"}", "{\"b\":\"x\",\"c\":\"y\"}"},
     {"{\"a\":1,\"b\":2}", "{\"a\":\"x\"}"}},
    /* additionalProperties: false, no properties: only {} */
    {"{\"type\":\"object\",\"additionalProperties\":false}", {"{}", "{ }"}, {"{\"a\":1}"}},
    /* enums with strings needing escapes, unicode, mixed types */
    {"{\"enum\":[\"red\",\"say \\\"hi\\\"\",\"back\\\\slash\",\"tab\\t\",\"caf\\u00e9\",\"\\u65e5\\u672c\",1,null,"
     "true,[1,2],{\"k\":\"v\"}]}",
     {"\"red\"", "\"say \\\"hi\\\"\"", "\"back\\\\slash\"", "\"tab\\t\"", "\"caf\xc3\xa9\"",
      "\"\xe6\x97\xa5\xe6\x9c\xac\"", "1", "null", "true", "[1,2]", "{\"k\":\"v\"}"},
     {"\"blue\"", "\"say \"hi\"\"", "\"tab\t\"", "2", "false", "\"red\" ", "red"}},
    /* const; enum filtered by type */
    {"{\"const\":\"fixed\"}", {"\"fixed\""}, {"\"fixe\"", "\"fixedd\""}},
    {"{\"type\":\"string\",\"enum\":[\"a\",1]}", {"\"a\""}, {"1"}},
    /* arrays: items, minItems/maxItems */
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":4}",
     {"[1,2]", "[1, 2, 3]", "[ 1 , 2 , 3 , 4 ]", "[-1,0]"},
     {"[]", "[1]", "[1,2,3,4,5]", "[1,\"a\"]", "[1,2,]", "[1.5,2]"}},
    {"{\"type\":\"array\",\"maxItems\":1}", {"[]", "[{}]", "[\"x\"]"}, {"[1,2]"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"string\"}}",
     {"[]", "[\"a\"]", "[\"a\",\"b\",\"c\"]"},
     {"[1]", "[\"a\",]"}},
    /* prefixItems; items false closes the tuple */
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false,"
     "\"minItems\":1}",
     {"[\"a\"]", "[\"a\",1]"},
     {"[]", "[1]", "[\"a\",\"b\"]", "[\"a\",1,2]"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"boolean\"}],\"items\":{\"type\":\"null\"}}",
     {"[]", "[true]", "[true,null,null]"},
     {"[null]", "[true,false]"}},
    /* anyOf / oneOf and type lists */
    {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\"}},"
     "\"required\":[\"n\"]}]}",
     {"\"s\"", "{\"n\":1e5}"},
     {"1", "{}", "null"}},
    {"{\"oneOf\":[{\"type\":\"null\"},{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}}]}",
     {"null", "[true]"},
     {"[1]", "true"}},
    {"{\"type\":[\"string\",\"null\"]}", {"\"x\"", "null"}, {"1", "{}"}},
    /* $ref recursion: a tree */
    {"{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":"
     "\"integer\"},\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/"
     "node\"}}},\"required\":[\"value\"]}}}",
     {"{\"value\":1}", "{\"value\":1,\"children\":[]}",
      "{\"value\":1,\"children\":[{\"value\":2},{\"value\":3,\"children\":[{\"value\":4}]}]}"},
     {"{\"value\":1,\"children\":[{}]}", "{\"children\":[]}", "{\"value\":1,\"children\":[{\"value\":\"x\"}]}"}},
    /* definitions, and a recursion through the root ("#") with an optional linked list */
    {"{\"definitions\":{\"my prop!\":{\"type\":\"string\",\"maxLength\":3}},\"type\":\"object\",\"properties\":"
     "{\"s\":{\"$ref\":\"#/definitions/my prop!\"},\"next\":{\"$ref\":\"#\"}}}",
     {"{}", "{\"s\":\"abc\"}", "{\"s\":\"a\",\"next\":{\"next\":{}}}"},
     {"{\"s\":\"abcd\"}", "{\"next\":1}"}},
    /* strings: escapes, unicode, lengths (an escape is one character) */
    {"{\"type\":\"string\"}",
     {"\"\"", "\"a\\\"b\"", "\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\u00e9\\uD83D\\uDE00\"", "\"\xc3\xa9\xf0\x9f\x98\x80\""},
     {"\"a", "\"\\x\"", "\"\\u12\"", "\"tab\there\"", "\"nl\nx\"", "'a'"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
     {"\"ab\"", "\"abc\"", "\"\\n\\t\"", "\"\xc3\xa9\xc3\xa9\""},
     {"\"a\"", "\"abcd\"", "\"\""}},
    /* numbers */
    {"{\"type\":\"number\"}",
     {"0", "-0", "12", "-3.25", "1e10", "1E+2", "-2.5e-3", "0.5"},
     {"01", "1.", ".5", "-", "1e", "+1", "NaN", "\"1\""}},
    {"{\"type\":\"integer\"}", {"0", "-7", "42"}, {"1.0", "1e2", "-", "007"}},
    /* allOf of objects merges; allOf of one schema is that schema */
    {"{\"$defs\":{\"base\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"]}},"
     "\"allOf\":[{\"$ref\":\"#/$defs/base\"},{\"properties\":{\"tag\":{\"type\":\"string\"}},\"required\":[\"tag\"]}]}",
     {"{\"id\":1,\"tag\":\"t\"}"},
     {"{\"id\":1}", "{\"tag\":\"t\"}", "{\"id\":1,\"tag\":\"t\",\"x\":0}"}},
    {"{\"allOf\":[{\"type\":\"boolean\"}],\"description\":\"d\"}", {"true"}, {"1"}},
    /* property names that are no GBNF identifiers */
    {"{\"type\":\"object\",\"properties\":{\"a "
     "b\":{\"type\":\"integer\"},\"\\u00fcber-\\\"q\\\"\":{\"type\":\"integer\"},"
     "\"\":{\"type\":\"integer\"},\"root\":{\"type\":\"integer\"},\"ws\":{\"type\":\"integer\"}},"
     "\"required\":[\"a b\",\"\\u00fcber-\\\"q\\\"\",\"\",\"root\",\"ws\"]}",
     {"{\"a b\":1,\"\xc3\xbc"
      "ber-\\\"q\\\"\":2,\"\":3,\"root\":4,\"ws\":5}"},
     {"{\"a b\":1}"}},
    /* required keys not among the properties of an open object take any value */
    {"{\"type\":\"object\",\"required\":[\"a\"]}", {"{\"a\":[1]}", "{\"a\":1,\"b\":2}"}, {"{}", "{\"b\":2}"}},
    /* true and {} are any value; format and annotations are ignored */
    {"true", {"1", "\"x\"", "[]", "{\"a\":null}"}, {"", "x"}},
    {"{\"title\":\"t\",\"format\":\"date-time\",\"type\":\"string\"}", {"\"2024-01-01\""}, {"1"}},
};

struct bad_case {
    const char *schema;
    lm_status st;
};

static const struct bad_case BAD[] = {
    {"[]", LM_ERR_CORRUPT},
    {"3", LM_ERR_CORRUPT},
    {"false", LM_ERR_UNSUPPORTED},
    {"{\"type\":\"strnig\"}", LM_ERR_CORRUPT},
    {"{\"type\":[]}", LM_ERR_CORRUPT},
    {"{\"type\":7}", LM_ERR_CORRUPT},
    {"{\"$ref\":\"#/$defs/missing\"}", LM_ERR_CORRUPT},
    {"{\"$ref\":\"http://example.com/s.json\"}", LM_ERR_UNSUPPORTED},
    {"{\"type\":\"string\",\"pattern\":\"^a+$\"}", LM_ERR_UNSUPPORTED},
    {"{\"type\":\"array\",\"uniqueItems\":true}", LM_ERR_UNSUPPORTED},
    {"{\"not\":{}}", LM_ERR_UNSUPPORTED},
    {"{\"enum\":[]}", LM_ERR_CORRUPT},
    {"{\"type\":\"integer\",\"enum\":[\"a\"]}", LM_ERR_CORRUPT},
    {"{\"anyOf\":[]}", LM_ERR_CORRUPT},
    {"{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", LM_ERR_CORRUPT},
    {"{\"type\":\"array\",\"minItems\":-1}", LM_ERR_CORRUPT},
    {"{\"type\":\"string\",\"maxLength\":100000}", LM_ERR_UNSUPPORTED},
    {"{\"type\":\"string\",\"minLength\":5,\"maxLength\":4}", LM_ERR_CORRUPT},
    {"{\"properties\":{\"a\":{}},\"required\":[\"b\"],\"additionalProperties\":false}", LM_ERR_CORRUPT},
    {"{\"properties\":7}", LM_ERR_CORRUPT},
    {"{\"allOf\":[{\"type\":\"string\"},{\"type\":\"object\"}]}", LM_ERR_UNSUPPORTED},
    /* $ref cycles: pure aliases, left recursion, no finite instance, allOf through itself */
    {"{\"$ref\":\"#\"}", LM_ERR_UNSUPPORTED},
    {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}",
     LM_ERR_UNSUPPORTED},
    {"{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}", LM_ERR_UNSUPPORTED},
    {"{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#\"}},\"required\":[\"x\"]}", LM_ERR_UNSUPPORTED},
    {"{\"allOf\":[{\"$ref\":\"#\"},{\"type\":\"object\"}]}", LM_ERR_UNSUPPORTED},
};

static void test_bad_schemas(void)
{
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        char err[256] = "", *gbnf = NULL;
        lm_status st;
        gbnf = convert(BAD[i].schema, &st, err, sizeof err);
        CHECKF(st == BAD[i].st && !gbnf && err[0], "%s: got %d (%s), want %d", BAD[i].schema, (int)st, err,
               (int)BAD[i].st);
        free(gbnf);
    }
}

/* nesting past LM_SCHEMA_MAX_DEPTH is refused; just below it works */
static void test_depth(void)
{
    for (int levels = LM_SCHEMA_MAX_DEPTH - 2; levels <= LM_SCHEMA_MAX_DEPTH + 40; levels += 42) {
        char *text = malloc((size_t)levels * 20 + 32), *gbnf = NULL, err[256] = "";
        size_t n = 0;
        if (!text)
            break;
        for (int i = 0; i < levels; i++)
            n += (size_t)sprintf(text + n, "{\"items\":");
        n += (size_t)sprintf(text + n, "{\"type\":\"null\"}");
        for (int i = 0; i < levels; i++)
            text[n++] = '}';
        text[n] = 0;
        lm_status st;
        gbnf = convert(text, &st, err, sizeof err);
        if (levels < LM_SCHEMA_MAX_DEPTH)
            CHECKF(st == LM_OK && gbnf, "%d levels: %s", levels, err);
        else
            CHECKF(st == LM_ERR_UNSUPPORTED && !gbnf && strstr(err, "deeper"), "%d levels: %s", levels, err);
        free(gbnf);
        free(text);
    }
}

/* an enum too large for the output cap is refused, not truncated */
static void test_output_cap(void)
{
    json_t *e = json_array();
    char word[64];
    for (int i = 0; i < 40000; i++) {
        snprintf(word, sizeof word, "a-fairly-long-enum-value-number-%d", i);
        json_array_append_new(e, json_string(word));
    }
    json_t *s = json_pack("{s:o}", "enum", e);
    char *gbnf = NULL, err[256] = "";
    const lm_status st = lm_schema_to_gbnf(s, &gbnf, err, sizeof err);
    CHECKF(st == LM_ERR_UNSUPPORTED && !gbnf && strstr(err, "exceed"), "%d %s", (int)st, err);
    json_decref(s);
    CHECK(lm_schema_to_gbnf(NULL, NULL, err, sizeof err) == LM_ERR_INVALID_ARG);
}

/* 300 optional properties and extra keys: every subset in order, within the engine's stack limit */
static void test_many_properties(void)
{
    json_t *props = json_object();
    for (int i = 0; i < 300; i++) {
        char key[16];
        snprintf(key, sizeof key, "p%d", i);
        json_object_set_new(props, key, json_pack("{s:s}", "type", "integer"));
    }
    json_t *s = json_pack("{s:s,s:o,s:b}", "type", "object", "properties", props, "additionalProperties", 1);
    char *gbnf = NULL, err[256] = "";
    CHECKF(lm_schema_to_gbnf(s, &gbnf, err, sizeof err) == LM_OK, "%s", err);
    struct lm_grammar *g = NULL;
    if (gbnf && lm_grammar_from_gbnf(gbnf, "root", &g, err, sizeof err) == LM_OK) {
        CHECK(accepts(g, "{\"p0\":1, \"p150\":2,\n \"p299\":3, \"p3000\":[], \"p\":0}") == 1);
        CHECK(accepts(g, "{\"p299\":3,\"p0\":1}") == 0);
        CHECK(accepts(g, "{\"p7\":\"x\"}") == 0);
    }
    CHECK(g != NULL);
    lm_grammar_free(g);
    free(gbnf);
    json_decref(s);
}

int main(void)
{
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        run_case(&CASES[i]);
    test_bad_schemas();
    test_depth();
    test_output_cap();
    test_many_properties();
    return lm_test_summary();
}
