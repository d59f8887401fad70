/* test_rng.c - mt19937, generate_canonical, discrete_distribution, libstdc++ sort
 * order and the state text, all against values made by GCC's libstdc++
 * (gen/gen_reference.cpp writes ref_data.h and the data/ texts), the library llama.cpp b1892 uses.
 */
#include <math.h>
#include <string.h>

#include "lm_test.h"
#include "ref_data.h"
#include "sampling/internal.h"
#include "sampling/sampling.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void test_mt19937(void)
{
    struct lm_rng r;
    /* the C++ standard's check: the 10000th output of a default-seeded mt19937 */
    lm_rng_seed(&r, 5489u);
    uint32_t x = 0;
    for (int i = 0; i < 10000; i++)
        x = lm_rng_next(&r);
    CHECKF(x == 4123659995u, "got %u", x);

    for (size_t s = 0; s < N_OF(ref_mt_seeds); s++) {
        lm_rng_seed(&r, ref_mt_seeds[s]);
        for (int i = 0; i < 8; i++) {
            x = lm_rng_next(&r);
            CHECKF(x == ref_mt_first8[s * 8 + i], "seed %u output %d: %u", ref_mt_seeds[s], i, x);
        }
    }
    /* across the regeneration boundaries (624, 1248) */
    lm_rng_seed(&r, 42);
    size_t k = 0;
    for (int i = 0; i < 1300; i++) {
        x = lm_rng_next(&r);
        if ((i >= 620 && i < 630) || (i >= 1245 && i < 1250)) {
            CHECKF(x == ref_mt42_620_630_1245_1250[k], "output %d", i);
            k++;
        }
    }
    CHECK(k == N_OF(ref_mt42_620_630_1245_1250));
    CHECK(lm_rng_resolve_seed(7) == 7);
    CHECK(lm_rng_resolve_seed(LM_RNG_DEFAULT_SEED) != LM_RNG_DEFAULT_SEED);
}

static void test_canonical(void)
{
    struct lm_rng r;
    lm_rng_seed(&r, 7);
    for (int i = 0; i < 6; i++) {
        double d = lm_rng_canonical(&r);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        CHECKF((uint32_t)(bits >> 32) == ref_canonical_seed7_hi_lo[2 * i] &&
                   (uint32_t)bits == ref_canonical_seed7_hi_lo[2 * i + 1],
               "value %d = %.17g", i, d);
        CHECK(d >= 0.0 && d < 1.0);
    }
}

static void test_discrete(void)
{
    const float w0[] = {0.1f, 0.2f, 0.3f, 0.4f};
    const float w1[] = {0.0f, 1.0f, 0.0f, 2.0f, 0.0f};
    const float w2[] = {1e-8f, 0.5f, 1e-8f, 0.5f, 3e-7f, 0.25f};
    const float w3[] = {1.0f};
    const float *ws[] = {w0, w1, w2, w3};
    const size_t ns[] = {4, 5, 6, 1};
    size_t k = 0;
    for (int s = 0; s < 4; s++) {
        struct lm_rng r;
        lm_rng_seed(&r, 2024u + (uint32_t)s);
        for (int i = 0; i < 25; i++, k++) {
            size_t idx = 99;
            CHECK(lm_rng_discrete(&r, ws[s], ns[s], &idx) == LM_OK);
            CHECKF((int32_t)idx == ref_discrete_draws[k], "weights %d draw %d: %zu vs %d", s, i, idx,
                   ref_discrete_draws[k]);
        }
        /* same number of engine outputs consumed (none for a single weight) */
        CHECK(lm_rng_next(&r) == (uint32_t)ref_discrete_draws[k]);
        k++;
    }
    CHECK(k == N_OF(ref_discrete_draws));

    /* frequencies follow the weights: 40000 draws, expect within 1.5% absolute */
    struct lm_rng r;
    lm_rng_seed(&r, 1);
    size_t hist[4] = {0};
    for (int i = 0; i < 40000; i++) {
        size_t idx;
        lm_rng_discrete(&r, w0, 4, &idx);
        hist[idx]++;
    }
    for (int i = 0; i < 4; i++)
        CHECKF(fabs(hist[i] / 40000.0 - w0[i]) < 0.015, "bin %d: %zu", i, hist[i]);
}

static uint32_t fnv(const struct lm_token_data *d, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint32_t)d[i].id;
        h *= 16777619u;
    }
    return h;
}

static uint32_t lcg(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* the generator's tie-heavy arrays: logits from `levels` values in steps of 0.25 */
static struct lm_token_data *make_cands(size_t n, uint32_t seed, uint32_t levels)
{
    struct lm_token_data *v = malloc(n * sizeof *v);
    uint32_t x = seed;
    for (size_t i = 0; i < n; i++) {
        v[i].id = (int32_t)i;
        v[i].logit = (float)(lcg(&x) % levels) * 0.25f - 3.0f;
        v[i].p = 0.0f;
    }
    return v;
}

static bool same_ids(const struct lm_token_data *d, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (d[i].id != ids[i])
            return false;
    return true;
}

static void test_sort_order(void)
{
    struct lm_token_data *a = make_cands(17, 11u, 4);
    lm_sampling_sort_logit_desc(a, 17);
    CHECK(same_ids(a, ref_sort17, 17));
    free(a);
    a = make_cands(100, 12u, 7);
    lm_sampling_sort_logit_desc(a, 100);
    CHECK(same_ids(a, ref_sort100, 100));
    free(a);
    const size_t sizes[] = {1000, 3000, 20000};
    for (int i = 0; i < 3; i++) {
        a = make_cands(sizes[i], (uint32_t)sizes[i], 13);
        lm_sampling_sort_logit_desc(a, sizes[i]);
        CHECKF(fnv(a, sizes[i]) == ref_sort_hash_1000_3000_20000[i], "size %zu", sizes[i]);
        free(a);
    }
    a = make_cands(1000, 99u, 9);
    lm_sampling_partial_sort_logit_desc(a, 40, 1000);
    CHECK(same_ids(a, ref_partial40_of1000, 40));
    free(a);
    /* through the sampler: top_k on an unsorted array uses partial_sort */
    a = make_cands(100, 5u, 3);
    struct lm_token_data_array c = {a, 100, false};
    lm_sample_top_k(&c, 7, 1);
    CHECK(c.size == 7 && c.sorted && same_ids(a, ref_partial7_of100, 7));
    free(a);

    struct lm_sampling_sort_key keys[300];
    uint32_t x = 77;
    for (uint32_t i = 0; i < 300; i++) {
        keys[i].key = (float)(lcg(&x) % 10) * 0.125f;
        keys[i].index = i;
    }
    lm_sampling_sort_keys_asc(keys, 300);
    bool ok = true;
    for (int i = 0; i < 300; i++)
        ok = ok && (int32_t)keys[i].index == ref_keysort300[i];
    CHECK(ok);

    /* NaN keys break the ordering contract; the guarded scans must stay in bounds */
    struct lm_token_data nan_arr[64];
    for (int i = 0; i < 64; i++)
        nan_arr[i] = (struct lm_token_data){i, (i % 3) ? NAN : (float)(i % 7), 0};
    lm_sampling_sort_logit_desc(nan_arr, 64);
    lm_sampling_partial_sort_logit_desc(nan_arr, 10, 64);
    int seen = 0;
    for (int i = 0; i < 64; i++)
        seen += nan_arr[i].id >= 0 && nan_arr[i].id < 64;
    CHECK(seen == 64);
}

/* same tokens as llama.cpp: sort, float softmax, discrete draw from seed 1234 */
static void test_same_tokens_as_reference(void)
{
    struct lm_token_data *a = make_cands(2000, 31337u, 17);
    struct lm_token_data_array c = {a, 2000, false};
    struct lm_rng r;
    lm_rng_seed(&r, 1234);
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        int32_t tok = -1;
        CHECK(lm_sample_token(&c, &r, &tok) == LM_OK);
        bad += tok != ref_tokens_seed1234[i];
    }
    CHECKF(bad == 0, "%d of 64 tokens differ", bad);
    free(a);
}

static char *read_text(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/sampling/data/%s", LM_SOURCE_DIR, name);
    char *t = lm_test_read_file(path, len);
    CHECKF(t != NULL, "cannot read %s", path);
    return t;
}

static void test_state_text(void)
{
    size_t len = 0;
    char *ref = read_text("mt19937_seed42_after5.txt", &len);
    if (!ref)
        return;
    struct lm_rng r;
    lm_rng_seed(&r, 42);
    for (int i = 0; i < 5; i++)
        lm_rng_next(&r);
    char buf[LM_RNG_STATE_MAX];
    size_t n = lm_rng_state_write(&r, buf, sizeof buf);
    CHECK(n == len && n == ref_state42_len && memcmp(buf, ref, len) == 0 && buf[n] == '\0');
    CHECK(lm_rng_state_write(&r, NULL, 0) == n);
    char small[10];
    CHECK(lm_rng_state_write(&r, small, sizeof small) == n && small[9] == '\0');

    /* libstdc++'s text restores the same stream */
    struct lm_rng q;
    lm_rng_seed(&q, 1);
    CHECK(lm_rng_state_read(&q, ref, len) == LM_OK);
    for (int i = 0; i < 3; i++)
        CHECK(lm_rng_next(&q) == ref_state42_next3[i]);
    free(ref);

    /* a freshly seeded engine (index 624) */
    ref = read_text("mt19937_seed99_fresh.txt", &len);
    if (ref) {
        lm_rng_seed(&r, 99);
        n = lm_rng_state_write(&r, buf, sizeof buf);
        CHECK(n == len && memcmp(buf, ref, len) == 0);
        free(ref);
    }

    /* bad texts are refused and leave the engine alone */
    lm_rng_seed(&q, 5);
    struct lm_rng before = q;
    CHECK(lm_rng_state_read(&q, "1 2 3", 5) == LM_ERR_CORRUPT);
    n = lm_rng_state_write(&r, buf, sizeof buf);
    CHECK(lm_rng_state_read(&q, buf, n - 1) == LM_OK); /* p "624" read as "62" */
    CHECK(q.p == 62);
    buf[n - 1] = '5'; /* p = 625 */
    CHECK(lm_rng_state_read(&q, buf, n) == LM_ERR_CORRUPT);
    q = before;
    memcpy(buf, "4294967296 ", 11); /* a word above 2^32 - 1 */
    CHECK(lm_rng_state_read(&q, buf, n) == LM_ERR_CORRUPT);
    CHECK(memcmp(&q, &before, sizeof q) == 0);
    CHECK(lm_rng_state_read(&q, "", 0) == LM_ERR_CORRUPT);
}

int main(void)
{
    test_mt19937();
    test_canonical();
    test_discrete();
    test_sort_order();
    test_same_tokens_as_reference();
    test_state_text();
    return lm_test_summary();
}
