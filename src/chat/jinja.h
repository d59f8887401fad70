/* jinja.h - internal interface of the chat-template engine: values, the
 * render arena, tokens, the syntax tree and the render context.
 *
 * Invariants: every object of one render (tokens, nodes, values, buffers)
 * lives in one arena freed at the end, so an error anywhere simply unwinds
 * and frees everything; nothing is reference counted and cycles (a namespace
 * holding itself) cannot leak. Values are small structs passed by value;
 * strings, lists and dicts are immutable once built (namespaces excepted).
 * Workload: templates of a few KB over conversations of up to some MB. */
#ifndef LM_CHAT_JINJA_H
#define LM_CHAT_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/chat.h"

/* ---- arena ---- */
struct jblock;
struct jarena {
    struct jblock *head;
    size_t used;   /* bytes handed out so far (all blocks) */
    size_t budget; /* refuse past this */
};

/* ---- values ---- */
enum jv_kind {
    JV_UNDEF, /* s: the message an access of it gives (may be empty) */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_NS,     /* namespace(): a dict whose attributes `set` may change */
    JV_LOOP,   /* the `loop` variable of a for */
    JV_MACRO,  /* a macro defined in the template */
    JV_FUNC,   /* a global function (fn) */
    JV_METHOD, /* a method bound to its receiver (m) */
};

struct jlist;
struct jdict;
struct jloop;
struct jmethod;
struct jnode;

struct jv {
    int kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct jlist *l;
        struct jdict *d;
        struct jloop *loop;
        const struct jnode *macro;
        int fn;
        struct jmethod *m;
    } u;
};

struct jlist {
    size_t n;
    bool tuple; /* printed as (a, b) */
    struct jv *v;
};

struct jdict {
    size_t n, cap;
    struct jv *k, *v;
};

struct jloop {
    int64_t index0, length, depth0;
    struct jlist *items;
};

struct jmethod {
    struct jv self;
    const char *name;
};

/* ---- tokens ---- */
enum jtok_kind {
    T_EOF,
    T_DATA,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_VAR_BEGIN,
    T_VAR_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP, /* p/n: the operator text */
};

struct jtok {
    int kind;
    int line;
    const char *p; /* source text (T_STRING: the decoded value) */
    size_t n;
    int64_t i;
    double f;
};

/* ---- syntax tree ---- */
enum jnode_kind {
    /* expressions */
    N_LIT,    /* val */
    N_NAME,   /* name */
    N_LIST,   /* kids */
    N_TUPLE,  /* kids */
    N_DICT,   /* kids: key, value, key, value, ... */
    N_ATTR,   /* a.name */
    N_ITEM,   /* a[b] */
    N_SLICE,  /* a[b:c:d], any of b, c, d may be NULL */
    N_CALL,   /* a(kids): N_KWARG kids are keyword arguments */
    N_KWARG,  /* name=a */
    N_FILTER, /* a | name(kids); op: filter id */
    N_TEST,   /* a is [not] name(kids); op: test id, neg */
    N_BIN,    /* a op b; op: enum jop */
    N_NEG,    /* -a (op '-') or +a (op '+') */
    N_NOT,
    N_AND,
    N_OR,
    N_CMP,   /* a (ops[i] kids[i])...: chained comparison */
    N_COND,  /* a if b else c (c may be NULL) */
    /* statements */
    S_DATA,     /* name: the text */
    S_OUTPUT,   /* {{ a }} */
    S_IF,       /* if a: kids else kids2 */
    S_FOR,      /* for a in b if c: kids else kids2 */
    S_SET,      /* set a = b */
    S_SETBLOCK, /* set a: kids */
    S_MACRO,    /* macro name(kids2: N_NAME or N_KWARG with default): kids */
    S_BREAK,
    S_CONTINUE,
};

enum jop {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
};

struct jnode {
    int kind;
    int line;
    int op;
    bool neg;
    const char *name; /* NUL-terminated (arena) */
    size_t name_len;
    struct jv val;
    struct jnode *a, *b, *c, *d;
    struct jnode **kids, **kids2;
    size_t n_kids, n_kids2;
    int *ops; /* N_CMP: n_kids operators */
};

/* ---- render context ---- */
struct jscope;
struct jbuf {
    char *p;
    size_t n, cap;
};

struct jctx {
    struct jarena ar;
    char *err;
    size_t errlen;
    bool failed;
    lm_status status;
    int line;              /* line of the node being run, for messages */
    uint64_t steps, max_steps;
    int depth, max_depth;
    size_t max_output;
    struct jscope *scope;  /* innermost */
    struct jscope *root;   /* the template's top level (macros run over it) */
    struct jbuf *out;      /* where output goes now */
    long long now;         /* strftime_now's clock (0: the current time) */
    const char *now_string;
};

#define J_MAX_DEPTH 400         /* nesting of expressions, statements and macro calls */
#define J_MAX_PARSE_DEPTH 200   /* nesting in the source */
#define J_MAX_RANGE 100000      /* as jinja2's sandbox */

/* arena (jinja_value.c) */
void *j_alloc(struct jctx *c, size_t bytes);              /* zeroed; NULL + error past the budget */
void j_arena_free(struct jarena *a);
char *j_strdup(struct jctx *c, const char *p, size_t n); /* NUL-terminated copy */

/* errors: the first one wins; returns -1 so callers can `return j_fail(...)` */
int j_fail(struct jctx *c, lm_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int j_step(struct jctx *c); /* count a step; -1 past the limit */

/* buffers in the arena */
int j_buf_put(struct jctx *c, struct jbuf *b, const char *p, size_t n);
int j_buf_putc(struct jctx *c, struct jbuf *b, char ch);
int j_buf_printf(struct jctx *c, struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* value constructors */
struct jv jv_undef(const char *hint);
struct jv jv_none(void);
struct jv jv_bool(bool b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_str(const char *p, size_t n);
struct jv jv_cstr(const char *s);
struct jlist *jl_new(struct jctx *c, size_t n); /* n items, all undefined */
struct jdict *jd_new(struct jctx *c);
int jd_set(struct jctx *c, struct jdict *d, struct jv k, struct jv v);
const struct jv *jd_get(const struct jdict *d, struct jv k);
const struct jv *jd_get_str(const struct jdict *d, const char *k, size_t n);

/* value operations (jinja_value.c) */
const char *jv_type_name(struct jv v);
bool jv_truthy(struct jv v);
bool jv_equal(struct jv a, struct jv b);
int jv_compare(struct jctx *c, struct jv a, struct jv b, int *out); /* <0, 0, >0; -1 on type error */
int jv_to_str(struct jctx *c, struct jv v, struct jv *out);        /* str(v) */
int jv_write(struct jctx *c, struct jbuf *b, struct jv v, bool repr);
int jv_tojson(struct jctx *c, struct jbuf *b, struct jv v, const char *indent, bool ensure_ascii,
              bool sort_keys, const char *item_sep, const char *key_sep, int level);
bool jv_is_str(struct jv v, const char *s);
bool j_isspace_at(const char *p, size_t n, size_t i, size_t *len); /* Python str.isspace() on a code point */
size_t j_utf8_len(const char *p, size_t n);                        /* code points */
size_t j_utf8_offset(const char *p, size_t n, size_t cp);          /* byte offset of code point cp */

/* lexer and parser (jinja_lex.c, jinja_parse.c) */
int j_lex(struct jctx *c, const char *src, struct jtok **toks, size_t *n_toks);
int j_parse(struct jctx *c, const struct jtok *toks, size_t n_toks, struct jnode **root);

/* evaluation (jinja_eval.c) */
int j_eval(struct jctx *c, const struct jnode *e, struct jv *out);
int j_exec_body(struct jctx *c, struct jnode *const *kids, size_t n);
int j_call(struct jctx *c, struct jv fn, const struct jv *args, size_t n_args, const char *const *kw_names,
           const struct jv *kw_vals, size_t n_kw, struct jv *out);
int j_getattr(struct jctx *c, struct jv obj, const char *name, size_t n, struct jv *out);
int j_getitem(struct jctx *c, struct jv obj, struct jv key, struct jv *out);
int j_iterate(struct jctx *c, struct jv v, struct jlist **out); /* the items a for sees */
int j_set_var(struct jctx *c, const char *name, size_t n, struct jv v);

/* built-ins (jinja_builtins.c, jinja_filters.c) */
struct jargs { /* the arguments after the value of a filter, method or function */
    const struct jv *pos;
    size_t n_pos;
    const char *const *kw_names;
    const struct jv *kw_vals;
    size_t n_kw;
};
struct jv j_arg(const struct jargs *a, size_t i, const char *name, struct jv def); /* positional i or name= */
int j_need_str(struct jctx *c, struct jv v, const char *what);
int j_need_int(struct jctx *c, struct jv v, const char *what, int64_t *out);
int j_attr_path(struct jctx *c, struct jv item, struct jv path, struct jv *out); /* item.a.b or item[0] */
int j_filter_id(const char *name);
int j_test_id(const char *name);
int j_global_id(const char *name, size_t n);
int j_apply_filter(struct jctx *c, int id, struct jv v, const struct jv *args, size_t n_args,
                   const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out);
int j_apply_test(struct jctx *c, int id, struct jv v, const struct jv *args, size_t n_args, bool *out);
int j_call_global(struct jctx *c, int id, const struct jv *args, size_t n_args, const char *const *kw_names,
                  const struct jv *kw_vals, size_t n_kw, struct jv *out);
int j_call_method(struct jctx *c, const struct jmethod *m, const struct jv *args, size_t n_args,
                  const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out);
bool j_has_method(struct jv self, const char *name, size_t n);
int j_binop(struct jctx *c, int op, struct jv a, struct jv b, struct jv *out);

/* string helpers (jinja_str.c) */
int j_str_method(struct jctx *c, struct jv self, const char *name, const struct jv *args, size_t n_args,
                 const char *const *kw_names, const struct jv *kw_vals, size_t n_kw, struct jv *out);
bool j_str_has_method(const char *name, size_t n);
size_t j_line_break_at(const char *p, size_t n, size_t i); /* length of a line break at p[i] (str.splitlines), or 0 */
int j_strip(struct jctx *c, struct jv s, struct jv chars, bool left, bool right, struct jv *out);
int j_str_format_pct(struct jctx *c, struct jv fmt, struct jv args, struct jv *out);
int j_case(struct jctx *c, struct jv s, int mode, struct jv *out); /* 0 lower 1 upper 2 title 3 capitalize */

#endif
