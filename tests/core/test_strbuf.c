/* test_strbuf.c - the growable string of core/strbuf.h: appends of every
 * size keep the bytes and the NUL, printf of long text, the size limit
 * refuses without changing the buffer. */
#include <stdio.h>
#include <string.h>

#include "core/strbuf.h"
#include "lm_test.h"

int main(void)
{
    struct lm_strbuf b = {0};
    char expect[5000];
    size_t n = 0;
    for (int i = 0; i < 200; i++) { /* pieces of 0..24 bytes, through several growths */
        char piece[32];
        const size_t k = (size_t)(i % 25);
        for (size_t j = 0; j < k; j++)
            piece[j] = (char)('a' + (i + (int)j) % 26);
        CHECK(lm_strbuf_put(&b, piece, k) == LM_OK);
        memcpy(expect + n, piece, k);
        n += k;
    }
    CHECK(b.n == n && b.cap > n && b.p[n] == 0 && !memcmp(b.p, expect, n));

    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(lm_strbuf_printf(&b, "<%s|%d>", big, 42) == LM_OK);
    CHECK(b.n == n + 2 + strlen(big) + 3 && !strcmp(b.p + b.n - 4, "|42>") && b.p[n] == '<');
    lm_strbuf_free(&b);
    CHECK(b.p == NULL && b.n == 0 && b.cap == 0);

    struct lm_strbuf lim = {.max = 10};
    CHECK(lm_strbuf_puts(&lim, "0123456789") == LM_OK);
    CHECK(lm_strbuf_put(&lim, "a", 1) == LM_ERR_FULL && lim.n == 10 && !strcmp(lim.p, "0123456789"));
    CHECK(lm_strbuf_printf(&lim, "%d", 7) == LM_ERR_FULL && lim.n == 10);
    CHECK(lm_strbuf_put(&lim, "", 0) == LM_OK && lim.n == 10);
    CHECK(lm_strbuf_put(&lim, "x", (size_t)-1) == LM_ERR_NOMEM && lim.n == 10);
    lm_strbuf_free(&lim);

    struct lm_strbuf e = {0};
    CHECK(lm_strbuf_put(&e, NULL, 0) == LM_OK && e.p && e.p[0] == 0 && e.n == 0);
    lm_strbuf_free(&e);
    return lm_test_summary();
}
