/* test_grammar_hostile.c - grammars written to cost time, through llama.h, over the
 * 32000-token llama vocabulary of llama-2-tiny-random (issue 21, items 3 and 4).
 *
 *  - root ::= "a": llama_sample_grammar once every stack is empty (inside a
 *    candidate after its "a", and after "a" was accepted) did pointer arithmetic on
 *    a NULL stack pool (clang UBSan). The masks must be the pieces "a", then EOS.
 *  - Exponential grammars (docs/hostile-input.md, "Grammars"): duplicate
 *    nullable alternatives (root ::= x x ... x "z", x ::= "" | "": 30 x's),
 *    ambiguous recursion whose stacks double per token (a ::= "x" a "y" |
 *    "x" a "z" | "w"), ambiguous repetitions of one class (38 bytes). Each
 *    llama_grammar_init / _sample_grammar / _accept_token must take under a
 *    second of CPU, sanitizers included, and give the mask of an unambiguous
 *    grammar with the same language; past LM_GRAMMAR_MAX_STACKS a token is masked
 *    and refused and the grammar goes on from where it was. A watchdog fails a case
 *    that hangs (without the fix these take minutes to hours).
 *  - Refused cleanly (llama_grammar_init returns NULL): a start rule that expands
 *    to more than LM_GRAMMAR_MAX_STACKS stacks, one that takes more than the work
 *    budget, and left recursion (direct, mutual, and through a nullable rule).
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sampling/grammar.h"
#include "util_api.h"

#define MAX_CPU_S 1.0  /* per call, sanitizer builds included */
#define WATCHDOG_S 60u /* per case: a hang fails the test instead of stalling ctest */

static struct llama_model *M;
static struct llama_context *CTX;
static int NV;
static char **PIECE;
static int *PIECE_LEN;
static llama_token EOS;
static const char *CASE = "";
static double CASE_MAX; /* the slowest call of the case, CPU seconds */

static void on_alarm(int sig)
{
    static const char msg[] = "test_grammar_hostile: watchdog: a case ran too long: ";
    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0 || write(2, CASE, strlen(CASE)) < 0 || write(2, "\n", 1) < 0)
        _exit(2);
    _exit(1);
}

static void end_case(void)
{
    if (CASE[0])
        printf("%-48.*s slowest call %7.1f ms\n", (int)strcspn(CASE, "\n"), CASE, CASE_MAX * 1e3);
    CASE = "";
    CASE_MAX = 0;
}

static void start_case(const char *name)
{
    end_case();
    CASE = name;
    alarm(WATCHDOG_S);
}

static void took(double cpu)
{
    CASE_MAX = cpu > CASE_MAX ? cpu : CASE_MAX;
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static llama_token byte_tok(char c)
{
    return 3 + (unsigned char)c; /* <0x00> .. <0xFF> */
}

/* GBNF text -> llama_grammar_init, timed; NULL when refused */
static struct llama_grammar *build(const char *text, double *cpu)
{
    struct lm_gbnf *p = NULL;
    char err[256];
    size_t root = 0;
    CHECKF(lm_gbnf_parse(text, &p, err, sizeof err) == LM_OK, "%s: %s", CASE, err);
    if (!p)
        return NULL;
    CHECK(lm_gbnf_rule_id(p, "root", &root) == LM_OK);
    const double t0 = cpu_now();
    struct llama_grammar *g = llama_grammar_init((const llama_grammar_element **)p->rules, p->n_rules, root);
    *cpu = cpu_now() - t0;
    took(*cpu);
    lm_gbnf_free(p);
    return g;
}

static struct llama_grammar *build_ok(const char *text)
{
    double cpu = 0;
    struct llama_grammar *g = build(text, &cpu);
    CHECKF(g != NULL, "%s: llama_grammar_init refused the grammar", CASE);
    CHECKF(cpu < MAX_CPU_S, "%s: llama_grammar_init took %.2f s", CASE, cpu);
    return g;
}

/* the allowed tokens after llama_sample_grammar over the whole vocabulary */
static void mask(const struct llama_grammar *g, bool *allowed)
{
    float *zeros = calloc((size_t)NV, sizeof *zeros);
    llama_token_data_array c = api_candidates(zeros, NV);
    free(zeros);
    const double t0 = cpu_now();
    llama_sample_grammar(CTX, &c, g);
    const double cpu = cpu_now() - t0;
    took(cpu);
    CHECKF(cpu < MAX_CPU_S, "%s: llama_sample_grammar took %.2f s", CASE, cpu);
    CHECK(c.size == (size_t)NV);
    for (int t = 0; t < NV; t++) {
        CHECK(c.data[t].id == t);
        allowed[t] = isfinite(c.data[t].logit);
        if (!allowed[t])
            CHECK(isinf(c.data[t].logit) && c.data[t].logit < 0);
    }
    free(c.data);
}

static void accept(struct llama_grammar *g, llama_token tok)
{
    const double t0 = cpu_now();
    llama_grammar_accept_token(CTX, g, tok);
    const double cpu = cpu_now() - t0;
    took(cpu);
    CHECKF(cpu < MAX_CPU_S, "%s: llama_grammar_accept_token took %.2f s", CASE, cpu);
}

static int count(const bool *allowed)
{
    int n = 0;
    for (int t = 0; t < NV; t++)
        n += allowed[t];
    return n;
}

/* the two grammars allow the same tokens now */
static void same_mask(const struct llama_grammar *g, const struct llama_grammar *ref, const char *when)
{
    bool *a = malloc((size_t)NV), *b = malloc((size_t)NV);
    mask(g, a);
    mask(ref, b);
    int diff = 0;
    for (int t = 0; t < NV; t++)
        diff += a[t] != b[t];
    CHECKF(diff == 0, "%s (%s): %d tokens differ from the unambiguous grammar", CASE, when, diff);
    free(a);
    free(b);
}

/* ---- item 3 ------------------------------------------------------------------------ */

static void test_all_stacks_empty(void)
{
    start_case("root ::= \"a\"");
    const llama_grammar_element r0[] = {{LLAMA_GRETYPE_CHAR, 'a'}, {LLAMA_GRETYPE_END, 0}};
    const llama_grammar_element *rules[] = {r0};
    struct llama_grammar *g = llama_grammar_init(rules, 1, 0);
    CHECK(g != NULL);
    if (!g)
        return;
    bool *allowed = malloc((size_t)NV);
    mask(g, allowed); /* "ab", "and", ...: after their "a" every stack is empty */
    int n = 0;
    for (int t = 0; t < NV; t++) {
        const bool is_a = PIECE_LEN[t] == 1 && PIECE[t][0] == 'a';
        CHECKF(allowed[t] == is_a, "token %d '%s'", t, PIECE[t]);
        n += is_a;
    }
    CHECK(n >= 1 && allowed[byte_tok('a')] && !allowed[EOS]);
    accept(g, byte_tok('a'));
    mask(g, allowed); /* the grammar's only stack is empty: EOS alone */
    CHECK(count(allowed) == 1 && allowed[EOS]);
    free(allowed);
    llama_grammar_free(g);
}

/* ---- item 4 ------------------------------------------------------------------------ */

static void test_nullable_duplicates(void)
{
    start_case("root ::= x^30 \"z\", x ::= \"\" | \"\"");
    char text[256] = "root ::=";
    for (int i = 0; i < 30; i++)
        strcat(text, " x");
    strcat(text, " \"z\"\nx ::= \"\" | \"\"\n");
    struct llama_grammar *g = build_ok(text), *ref = build_ok("root ::= \"z\"\n");
    if (g && ref) {
        same_mask(g, ref, "start");
        accept(g, byte_tok('z'));
        accept(ref, byte_tok('z'));
        same_mask(g, ref, "after z");
    }
    llama_grammar_free(g);
    llama_grammar_free(ref);

    start_case("root ::= x^30, x ::= \"\" | \"\"");
    text[8] = 0;
    for (int i = 0; i < 30; i++)
        strcat(text, " x");
    strcat(text, "\nx ::= \"\" | \"\"\n");
    g = build_ok(text);
    if (g) {
        bool *allowed = malloc((size_t)NV);
        mask(g, allowed); /* the empty sentence only */
        CHECK(count(allowed) == 1 && allowed[EOS]);
        free(allowed);
    }
    llama_grammar_free(g);
}

/* a ::= "x" a "y" | "x" a "z" | "w": after k x's, 3 * 2^k stacks */
static void test_doubling_stacks(void)
{
    start_case("a ::= \"x\" a \"y\" | \"x\" a \"z\" | \"w\"");
    struct llama_grammar *g = build_ok("root ::= a\na ::= \"x\" a \"y\" | \"x\" a \"z\" | \"w\"\n");
    struct llama_grammar *ref = build_ok("root ::= a\na ::= \"x\" a [yz] | \"w\"\n");
    if (!g || !ref) {
        llama_grammar_free(g);
        llama_grammar_free(ref);
        return;
    }
    int kmax = 0; /* the most x's the stack limit allows */
    while (3L << (kmax + 1) <= LM_GRAMMAR_MAX_STACKS)
        kmax++;
    bool *a = malloc((size_t)NV), *b = malloc((size_t)NV);
    for (int k = 1; k <= kmax + 3; k++) { /* 15 x's with the limit at 16384 */
        accept(g, byte_tok('x'));
        if (k <= kmax)
            accept(ref, byte_tok('x'));
        mask(g, a);
        mask(ref, b);
        /* as the unambiguous grammar, except tokens that would pass the limit */
        for (int t = 0; t < NV; t++) {
            if (!strchr(PIECE[t], 'x'))
                CHECKF(a[t] == b[t], "after %d x: token %d '%s'", k, t, PIECE[t]);
            else if (a[t])
                CHECKF(b[t], "after %d x: token %d '%s'", k, t, PIECE[t]);
        }
        const int had = k < kmax ? k : kmax; /* x's the grammar holds */
        CHECKF(a[byte_tok('x')] == (had < kmax), "after %d x", k);
        CHECK(a[byte_tok('w')] && !a[EOS]);
    }
    /* the grammar took kmax x's, refused the rest, and finishes */
    accept(g, byte_tok('w'));
    for (int k = 0; k < kmax; k++) {
        mask(g, a);
        CHECK(a[byte_tok('y')] && a[byte_tok('z')] && !a[byte_tok('x')] && !a[EOS]);
        accept(g, byte_tok(k % 2 ? 'y' : 'z'));
    }
    mask(g, a);
    CHECK(count(a) == 1 && a[EOS]);
    free(a);
    free(b);
    llama_grammar_free(g);
    llama_grammar_free(ref);
}

/* alternatives of one class, repeated: stacks merge, but b1892's per-stack
 * recursion tried every alternative at every character of every piece */
static void test_ambiguous_classes(void)
{
    static const char *const cases[][2] = {
        {"root ::= ([^z] | [^z] | [^z] | [^z])*\n", "root ::= [^z]*\n"}, /* 38 bytes */
        {"root::=([^z]|[^z]|[^z]|[^z]|[^z]|[^z]|[^z]|[^z])*\n", "root ::= [^z]*\n"},
        {"root ::= (\" \" | \" \" | \" \" | \" \")* \"z\"\n", "root ::= \" \"* \"z\"\n"},
        {"root ::= ([a-z] | [a-y] | [b-z] | [ -~])+\n", "root ::= [ -~]+\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        start_case(cases[i][0]);
        struct llama_grammar *g = build_ok(cases[i][0]), *ref = build_ok(cases[i][1]);
        if (g && ref) {
            same_mask(g, ref, "start");
            for (const char *s = " hello"; *s; s++) {
                accept(g, byte_tok(*s));
                accept(ref, byte_tok(*s));
            }
            same_mask(g, ref, "after ' hello'");
        }
        llama_grammar_free(g);
        llama_grammar_free(ref);
    }
}

/* refused at llama_grammar_init, quickly */
static void refused(const char *name, const char *text, double max_cpu)
{
    double cpu = 0;
    start_case(name);
    struct llama_grammar *g = build(text, &cpu);
    CHECKF(g == NULL, "%s: accepted", name);
    CHECKF(cpu < max_cpu, "%s: llama_grammar_init took %.2f s", name, cpu);
    llama_grammar_free(g);
}

static void test_refused(void)
{
    /* s_i ::= s_i+1 "a" | s_i+1 "b": 2^15 stacks at the start */
    char *text = malloc(1 << 20);
    strcpy(text, "root ::= s0\n");
    for (int i = 0; i < 15; i++)
        sprintf(text + strlen(text), "s%d ::= s%d \"a\" | s%d \"b\"\n", i, i + 1, i + 1);
    strcat(text, "s15 ::= \"c\"\n");
    refused("2^15 stacks at the start", text, MAX_CPU_S);

    /* 2000 nested rules, then 2^13 ambiguous stacks of 2000 positions: past the budget */
    strcpy(text, "root ::= r0\n");
    for (int i = 0; i < 2000; i++)
        sprintf(text + strlen(text), "r%d ::= r%d \"x\"\n", i, i + 1);
    strcat(text, "r2000 ::= s0\n");
    for (int i = 0; i < 13; i++)
        sprintf(text + strlen(text), "s%d ::= s%d \"a\" | s%d \"b\"\n", i, i + 1, i + 1);
    strcat(text, "s13 ::= \"c\"\n");
    refused("work budget at the start", text, 5 * MAX_CPU_S); /* memory-bound: slower under ASan */
    free(text);

    refused("left recursion", "root ::= e\ne ::= e \"+\" \"1\" | \"1\"\n", MAX_CPU_S);
    refused("mutual left recursion", "root ::= e\ne ::= t \"+\" e | t\nt ::= e \"*\" \"1\" | \"1\"\n", MAX_CPU_S);
    refused("left recursion through a nullable rule", "root ::= a\na ::= b a \"x\" | \"y\"\nb ::= \"q\" | \"\"\n",
            MAX_CPU_S);
    refused("left recursion through a repetition", "root ::= (\"a\"? root)* \"b\"\n", MAX_CPU_S);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    M = api_start("models/llama-2-tiny-random.gguf");
    if (!M)
        return lm_test_summary();
    CTX = api_ctx(M, 32, 32, false);
    NV = llama_n_vocab(M);
    EOS = llama_token_eos(M);
    CHECK(NV == 32000 && CTX != NULL);
    PIECE = calloc((size_t)NV, sizeof *PIECE);
    PIECE_LEN = calloc((size_t)NV, sizeof *PIECE_LEN);
    for (int t = 0; t < NV; t++) {
        char buf[256];
        int n = llama_token_to_piece(M, t, buf, (int)sizeof buf - 1);
        n = n > 0 ? n : 0;
        buf[n] = 0;
        PIECE[t] = strdup(buf);
        PIECE_LEN[t] = n;
    }
    CHECK(PIECE_LEN[byte_tok('x')] == 1 && PIECE[byte_tok('x')][0] == 'x'); /* byte tokens */
    test_all_stacks_empty();
    test_nullable_duplicates();
    test_doubling_stacks();
    test_ambiguous_classes();
    test_refused();
    end_case();
    alarm(0);
    for (int t = 0; t < NV; t++)
        free(PIECE[t]);
    free(PIECE);
    free(PIECE_LEN);
    llama_free(CTX);
    llama_free_model(M);
    return lm_test_summary();
}
