/* test_samplers_ref.c - every sampler bit for bit against llama.cpp b1892 itself.
 *
 * data/samplers_b1892.txt holds what b1892's llama_sample_* functions (and b1971's
 * llama_sample_entropy) produced for the cases below, run outside this repository on
 * the same inputs (see data/README.md): for array results the size, the sorted flag and
 * an FNV-1a hash over (id, logit bits, p bits) of every element; for token choices the
 * tokens drawn from one std::mt19937(4242) shared by all draw cases in this order,
 * mirostat's mu after each step, and the RNG's next output at the end. This test
 * recomputes the same lines with lamina and compares them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lm_test.h"
#include "sampling/sampling.h"

#define N 4000

static char out[16384];
static size_t out_len;

static void emit(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + out_len, sizeof out - out_len, fmt, ap);
    va_end(ap);
    if (n > 0 && out_len + (size_t)n < sizeof out)
        out_len += (size_t)n;
}

static uint32_t lcg(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

static uint32_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* logits in [-10, 10] in steps of 0.01: many ties among 4000 tokens */
static struct lm_token_data_array base(struct lm_token_data *v)
{
    uint32_t x = 2024;
    for (size_t i = 0; i < N; i++)
        v[i] = (struct lm_token_data){(int32_t)i, (float)((int)(lcg(&x) % 2001) - 1000) * 0.01f, 0.0f};
    return (struct lm_token_data_array){v, N, false};
}

static void emit_array(const char *name, const struct lm_token_data_array *c)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < c->size; i++) {
        const uint32_t w[3] = {(uint32_t)c->data[i].id, bits(c->data[i].logit), bits(c->data[i].p)};
        for (int k = 0; k < 3; k++) {
            h ^= w[k];
            h *= 16777619u;
        }
    }
    emit("array %s %zu %d %u\n", name, c->size, (int)c->sorted, h);
}

static void array_cases(struct lm_token_data *v)
{
    int32_t last[64];
    uint32_t x = 99;
    for (int i = 0; i < 64; i++)
        last[i] = (int32_t)(lcg(&x) % N);
    struct lm_token_data_array c;
#define CASE(name, body)                                                                                          \
    do {                                                                                                          \
        c = base(v);                                                                                              \
        body;                                                                                                     \
        emit_array(name, &c);                                                                                     \
    } while (0)
    CASE("softmax", lm_sample_softmax(&c));
    CASE("top_k_40", lm_sample_top_k(&c, 40, 1));
    CASE("top_k_all", lm_sample_top_k(&c, N, 1));
    CASE("top_p_0.9", lm_sample_top_p(&c, 0.9f, 1));
    CASE("top_p_0.3_keep50", lm_sample_top_p(&c, 0.3f, 50));
    CASE("min_p_0.05", lm_sample_min_p(&c, 0.05f, 1));
    CASE("tail_free_0.95", lm_sample_tail_free(&c, 0.95f, 1));
    CASE("typical_0.9", CHECK(lm_sample_typical(&c, 0.9f, 1) == LM_OK));
    CASE("typical_0.3_keep0", CHECK(lm_sample_typical(&c, 0.3f, 0) == LM_OK));
    CASE("temp_0.7", {
        lm_sample_temp(&c, 0.7f);
        lm_sample_softmax(&c);
    });
    CASE("penalties", {
        CHECK(lm_sample_repetition_penalties(&c, last, 64, 1.3f, 0.2f, 0.4f) == LM_OK);
        lm_sample_softmax(&c);
    });
    CASE("entropy", lm_sample_entropy(&c, 0.2f, 1.8f, 1.0f));
    CASE("chain", {
        lm_sample_top_k(&c, 200, 1);
        lm_sample_tail_free(&c, 0.97f, 1);
        CHECK(lm_sample_typical(&c, 0.95f, 1) == LM_OK);
        lm_sample_top_p(&c, 0.95f, 1);
        lm_sample_min_p(&c, 0.05f, 1);
        lm_sample_temp(&c, 0.8f);
        lm_sample_softmax(&c);
    });
#undef CASE
    static float l[N], g[N];
    x = 7;
    for (size_t i = 0; i < N; i++) {
        l[i] = (float)((int)(lcg(&x) % 2001) - 1000) * 0.01f;
        g[i] = (float)((int)(lcg(&x) % 2001) - 1000) * 0.01f;
    }
    lm_sample_apply_guidance(l, g, N, 1.5f);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < N; i++) {
        h ^= bits(l[i]);
        h *= 16777619u;
        h ^= bits(g[i]);
        h *= 16777619u;
    }
    emit("floats guidance %u\n", h);
}

static void draw_cases(struct lm_token_data *v)
{
    struct lm_rng rng;
    lm_rng_seed(&rng, 4242);
    int32_t tok = -1;
    emit("tokens chain_sample");
    for (int s = 0; s < 30; s++) {
        struct lm_token_data_array c = base(v);
        lm_sample_top_k(&c, 40, 1);
        lm_sample_top_p(&c, 0.95f, 1);
        lm_sample_temp(&c, 0.8f);
        CHECK(lm_sample_token(&c, &rng, &tok) == LM_OK);
        emit(" %d", tok);
    }
    emit("\ntokens temp_sample");
    for (int s = 0; s < 30; s++) {
        struct lm_token_data_array c = base(v);
        lm_sample_temp(&c, 1.5f);
        CHECK(lm_sample_token(&c, &rng, &tok) == LM_OK);
        emit(" %d", tok);
    }
    emit("\n");
    for (int ver = 1; ver <= 2; ver++) {
        float mu = 10.0f;
        uint32_t mus[30];
        emit("tokens mirostat%d", ver);
        for (int s = 0; s < 30; s++) {
            struct lm_token_data_array c = base(v);
            lm_sample_temp(&c, 0.6f);
            lm_status st = ver == 1 ? lm_sample_mirostat(&c, &rng, 5.0f, 0.1f, 100, N, &mu, &tok)
                                    : lm_sample_mirostat_v2(&c, &rng, 5.0f, 0.1f, &mu, &tok);
            CHECK(st == LM_OK);
            emit(" %d", tok);
            mus[s] = bits(mu);
        }
        emit("\nmu mirostat%d", ver);
        for (int s = 0; s < 30; s++)
            emit(" %u", mus[s]);
        emit("\n");
    }
    struct lm_token_data_array c = base(v);
    CHECK(lm_sample_greedy(&c, &tok) == LM_OK);
    emit("tokens greedy %d\n", tok);
    emit("next rng %u\n", lm_rng_next(&rng));
}

int main(void)
{
    static struct lm_token_data v[N];
    array_cases(v);
    draw_cases(v);

    char path[1024];
    snprintf(path, sizeof path, "%s/tests/sampling/data/samplers_b1892.txt", LM_SOURCE_DIR);
    size_t len = 0;
    char *want = lm_test_read_file(path, &len);
    CHECKF(want != NULL, "cannot read %s", path);
    if (want) {
        CHECKF(len == out_len, "output has %zu bytes, reference %zu", out_len, len);
        /* compare line by line to name the failing case */
        const char *a = out, *b = want;
        while (a < out + out_len && b < want + len) {
            const char *ea = memchr(a, '\n', (size_t)(out + out_len - a));
            const char *eb = memchr(b, '\n', (size_t)(want + len - b));
            if (!ea || !eb)
                break;
            CHECKF(ea - a == eb - b && !memcmp(a, b, (size_t)(ea - a)), "\n  lamina: %.*s\n  b1892:  %.*s",
                   (int)(ea - a), a, (int)(eb - b), b);
            a = ea + 1;
            b = eb + 1;
        }
        free(want);
    }
    return lm_test_summary();
}
