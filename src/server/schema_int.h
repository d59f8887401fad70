/* schema_int.h - internals of the JSON Schema to GBNF converter, shared by
 * schema.c (the walk over the schema) and schema_gbnf.c (grammar text: buffers,
 * rule names, literals, shared rules, repetitions, and the checks of the result).
 *
 * A struct gen carries one conversion: the grammar written so far, counters for
 * rule names and work, memos of $ref targets and repetition chains, and a sticky
 * status: after the first failure every function below does nothing, so callers
 * check g->st once at the end (or before work that would be wasted).
 */
#ifndef LM_SERVER_SCHEMA_INT_H
#define LM_SERVER_SCHEMA_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "server/schema.h"

#define NAME_LEN 96 /* rule names: "r<counter>-<hint>" or "<name>-upto-<k>" */
#define HINT_LEN 24
#define WS_MAX 20


struct ref_memo {
    char *ref;
    char name[NAME_LEN];
};

struct rep_memo {
    char item[NAME_LEN];
    int64_t upto; /* "<item>-upto-k" written for k <= upto */
    bool star;    /* "<item>-star" written */
};

struct gen {
    const json_t *root;
    struct lm_strbuf out;
    size_t n_names, n_nodes;
    struct ref_memo *refs;
    size_t n_refs, cap_refs;
    struct rep_memo *reps;
    size_t n_reps, cap_reps;
    unsigned prims; /* bit set of the shared rules written */
    lm_status st;
    char *err;
    size_t errlen;
};

/* shared rules, written on first use by lm_schema_prim */
enum {
    P_WS,
    P_VALUE,
    P_OBJECT,
    P_MEMBER,
    P_ARRAY,
    P_STRING,
    P_CHAR,
    P_NUMBER,
    P_INTEGER,
    P_BOOLEAN,
    P_NULL,
    P_XTAIL,
    P_WSC,
    P_COUNT
};

#if defined(__GNUC__)
#define LM_SCHEMA_PRINTF __attribute__((format(printf, 3, 4)))
#else
#define LM_SCHEMA_PRINTF
#endif

/* set the status (first failure only) and the message */
void lm_schema_fail(struct gen *g, lm_status st, const char *fmt, ...) LM_SCHEMA_PRINTF;

/* append n bytes / a string / formatted text to b (b stays NUL-terminated); past
 * LM_SCHEMA_MAX_GBNF bytes the conversion fails with LM_ERR_UNSUPPORTED */
void lm_schema_put(struct gen *g, struct lm_strbuf *b, const char *s, size_t n);
void lm_schema_puts(struct gen *g, struct lm_strbuf *b, const char *s);
void lm_schema_printf(struct gen *g, struct lm_strbuf *b, const char *fmt, ...) LM_SCHEMA_PRINTF;

/* append s (n bytes, UTF-8) as a GBNF string literal */
void lm_schema_literal(struct gen *g, struct lm_strbuf *b, const char *s, size_t n);

/* write the rule `name ::= body` (an empty body as `""`) */
void lm_schema_emit(struct gen *g, const char *name, const struct lm_strbuf *body);

/* a fresh rule name "r<counter>-<hint cut to [a-zA-Z0-9-]>" */
void lm_schema_new_name(struct gen *g, const char *hint, char name[NAME_LEN]);

/* compact JSON text of v (caller frees), NULL (and a failure) on error */
char *lm_schema_json_text(struct gen *g, const json_t *v);

/* name of shared rule id (P_*), writing it and what it uses on first use */
const char *lm_schema_prim(struct gen *g, int id);

/* append lo to hi (hi < 0: any number of) copies of rule item */
void lm_schema_repeat(struct gen *g, struct lm_strbuf *b, const char *item, int64_t lo, int64_t hi);

/* parse text back, check that every rule can derive a finite text, build it
 * with the grammar engine; a failure is LM_ERR_UNSUPPORTED with the reason */
void lm_schema_check(struct gen *g, const char *text);

#endif
