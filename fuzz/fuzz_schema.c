/* fuzz_schema.c - fuzz target for JSON Schema to GBNF (server/schema.h).
 *
 * Input: JSON text (any value). It is loaded with jansson and converted; the
 * converter's promises (a broken one calls abort()):
 *  - a refusal has a message and one of the documented codes, and no output;
 *  - every grammar it returns parses with lamina's GBNF parser, has a `root`
 *    rule and builds (lm_grammar_from_gbnf), within LM_SCHEMA_MAX_GBNF bytes;
 *  - the built grammar takes text without crashing: the input itself is fed
 *    to it (a schema is JSON, so for permissive schemas this goes deep).
 * Corpus files named "ok-*" must convert, "bad-*" must be refused
 * (lm_fuzz_expect, checked by the replay). Built only where lm_server exists
 * (libmicrohttpd and jansson found): fuzz/CMakeLists.txt.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sampling/grammar.h"
#include "server/schema.h"

#define REQUIRE(c)                                                                                                     \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_schema: %s:%d: broken promise: %s\n", __FILE__, __LINE__, #c);                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static lm_status last_status; /* for lm_fuzz_expect (the replay runs one input at a time) */

static void quiet(enum lm_log_level level, const char *text, void *user) { (void)level, (void)text, (void)user; }

static void check_grammar(const char *gbnf, const uint8_t *data, size_t size)
{
    REQUIRE(strlen(gbnf) < LM_SCHEMA_MAX_GBNF);
    struct lm_gbnf *p = NULL;
    char err[256] = "";
    REQUIRE(lm_gbnf_parse(gbnf, &p, err, sizeof err) == LM_OK);
    size_t root;
    REQUIRE(lm_gbnf_rule_id(p, "root", &root) == LM_OK);
    lm_gbnf_free(p);
    struct lm_grammar *g = NULL;
    REQUIRE(lm_grammar_from_gbnf(gbnf, "root", &g, err, sizeof err) == LM_OK && g);
    const lm_status st = lm_grammar_accept_bytes(g, (const char *)data, size);
    REQUIRE(st == LM_OK || st == LM_ERR_INVALID_ARG || st == LM_ERR_FULL);
    lm_grammar_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        lm_log_set(quiet, NULL);
        once = 1;
    }
    json_error_t jerr;
    json_t *schema = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    last_status = LM_ERR_CORRUPT;
    if (!schema)
        return 0;
    char *gbnf = NULL, err[256] = "";
    const lm_status st = lm_schema_to_gbnf(schema, &gbnf, err, sizeof err);
    last_status = st;
    if (st == LM_OK) {
        REQUIRE(gbnf != NULL);
        check_grammar(gbnf, data, size);
    } else {
        REQUIRE(gbnf == NULL && err[0] != 0);
        REQUIRE(st == LM_ERR_CORRUPT || st == LM_ERR_UNSUPPORTED || st == LM_ERR_NOMEM);
    }
    free(gbnf);
    json_decref(schema);
    return 0;
}

bool lm_fuzz_expect(const char *base, const uint8_t *data, size_t size)
{
    (void)data, (void)size;
    if (!strncmp(base, "ok-", 3) && last_status != LM_OK) {
        fprintf(stderr, "fuzz_schema: %s should convert (status %d)\n", base, (int)last_status);
        return false;
    }
    if (!strncmp(base, "bad-", 4) && last_status == LM_OK) {
        fprintf(stderr, "fuzz_schema: %s should be refused\n", base);
        return false;
    }
    return true;
}
