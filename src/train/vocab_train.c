/* vocab_train.c - BPE tokenizer training (SentencePiece-style pieces with
 * byte fallback) and its GGUF output; the contract is in vocab_train.h.
 *
 * Steps: (1) cut the documents into words as the SPM tokenizer sees them and
 * count the distinct words in a string table; (2) split each word into
 * characters exactly as src/vocab/spm.c does (lm_vocab_utf8_decode: one
 * symbol per valid UTF-8 character, one per stray byte), keep the frequent
 * characters as symbols and mark the rest as barriers (-1) no pair crosses;
 * (3) BPE: a hash map of adjacent pairs with their count and the list of
 * words that hold them, a max-heap of (count, pair) with lazy entries (an
 * entry is checked against the pair's count when popped); merging a pair
 * rewrites only the words on its list and updates the pair counts of those
 * words. Old pairs only ever lose count in a merge, so a stale entry is
 * never below the true count; the pairs of the new symbol are pushed afresh.
 * Cost per merge: the lengths of the words holding the pair.
 *
 * Invariants: symbol strings are unique (two merges that make one text share
 * one symbol and one token); a pair is tracked only when both sides are
 * symbols and the joined text fits max_piece_chars.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "gguf/gguf.h"
#include "train/vocab_train.h"
#include "vocab/unicode.h" /* the tokenizer's own character split (vocab/ internal, used read-only) */
#include "vocab/vocab.h"

#define MAX_WORD_BYTES 256 /* longer words are cut (at a character start) for training */
#define N_FIXED LM_VOCAB_TRAIN_FIRST_PIECE

static const char SPACE[] = "\xe2\x96\x81"; /* U+2581 */

/* ---- a table of unique byte strings with ids 0..n-1 ---- */
struct strtab {
    char *pool;
    size_t pool_n, pool_cap;
    size_t *off;
    uint32_t *len;
    int32_t n, cap;
    int32_t *slots; /* -1 empty; capacity mask + 1, at most half full */
    uint32_t mask;
};


static const char *strtab_str(const struct strtab *t, int32_t id) { return t->pool + t->off[id]; }

static void strtab_free(struct strtab *t)
{
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

static bool strtab_rehash(struct strtab *t, uint32_t cap)
{
    int32_t *slots = malloc((size_t)cap * sizeof(*slots));
    if (!slots) {
        return false;
    }
    memset(slots, 0xff, (size_t)cap * sizeof(*slots));
    for (int32_t id = 0; id < t->n; id++) {
        uint32_t i = lm_fnv1a32(strtab_str(t, id), t->len[id]) & (cap - 1);
        while (slots[i] >= 0) {
            i = (i + 1) & (cap - 1);
        }
        slots[i] = id;
    }
    free(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return true;
}

/* The id of s[0..len), or -1. */
static int32_t strtab_find(const struct strtab *t, const char *s, uint32_t len, uint32_t *slot)
{
    if (!t->slots) {
        return -1;
    }
    uint32_t i = lm_fnv1a32(s, len) & t->mask;
    for (; t->slots[i] >= 0; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (t->len[id] == len && memcmp(strtab_str(t, id), s, len) == 0) {
            return id;
        }
    }
    *slot = i;
    return -1;
}

/* The id of s[0..len), added when new (*added set). -1: out of memory.
 * s must not point into the table's pool. */
static int32_t strtab_intern(struct strtab *t, const char *s, uint32_t len, bool *added)
{
    *added = false;
    if (!t->slots && !strtab_rehash(t, 1024)) {
        return -1;
    }
    uint32_t i = 0;
    int32_t found = strtab_find(t, s, len, &i);
    if (found >= 0) {
        return found;
    }
    if (t->n == INT32_MAX / 4) {
        return -1;
    }
    if (t->n == t->cap) {
        int32_t nc = t->cap ? t->cap * 2 : 1024;
        size_t *off = realloc(t->off, (size_t)nc * sizeof(*off));
        if (off) {
            t->off = off;
        }
        uint32_t *ln = realloc(t->len, (size_t)nc * sizeof(*ln));
        if (ln) {
            t->len = ln;
        }
        if (!off || !ln) {
            return -1;
        }
        t->cap = nc;
    }
    if (t->pool_n + len + 1 > t->pool_cap) {
        size_t nc = t->pool_cap ? t->pool_cap * 2 : 65536;
        while (nc < t->pool_n + len + 1) {
            nc *= 2;
        }
        char *p = realloc(t->pool, nc);
        if (!p) {
            return -1;
        }
        t->pool = p;
        t->pool_cap = nc;
    }
    memcpy(t->pool + t->pool_n, s, len);
    t->pool[t->pool_n + len] = '\0';
    int32_t id = t->n++;
    t->off[id] = t->pool_n;
    t->len[id] = len;
    t->pool_n += len + 1;
    t->slots[i] = id;
    *added = true;
    if ((uint32_t)t->n * 2 > t->mask && !strtab_rehash(t, (t->mask + 1) * 2)) {
        return -1;
    }
    return id;
}

/* ---- growable arrays ---- */
static bool grow(void **a, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap) {
        return true;
    }
    int64_t nc = *cap ? *cap : 16;
    while (nc < need) {
        nc *= 2;
    }
    if (nc > INT32_MAX) {
        return false;
    }
    void *p = realloc(*a, (size_t)nc * elem);
    if (!p) {
        return false;
    }
    *a = p;
    *cap = (int32_t)nc;
    return true;
}

/* ---- training state ---- */
struct word {
    int64_t count;
    int32_t *syms; /* n symbols (-1: a barrier character) */
    int32_t n;
    int32_t stamp; /* the last merge that rewrote it */
};

struct pair {
    int32_t a, b; /* symbols */
    int64_t count;
    int32_t *words; /* words that held the pair when added (may repeat or be stale) */
    int32_t n_words, cap_words;
    int32_t stamp; /* the last merge that gave it new count */
    bool banned;   /* its text would copy a special or byte token's text */
};

struct heap_entry {
    int64_t count;
    int32_t pair;
};

struct trainer {
    const struct lm_vocab_train_params *p;
    struct strtab words; /* word texts; counts in wd[] */
    int64_t *word_count;
    int32_t word_cap;
    struct word *wd;
    int32_t n_words;

    struct strtab syms; /* symbol texts */
    int32_t *sym_chars; /* characters in each symbol */
    int32_t sym_chars_cap;
    int32_t n_chars; /* symbols 0..n_chars-1 are the kept characters */

    struct pair *pairs;
    int32_t n_pairs, cap_pairs;
    uint64_t *pmap_key; /* open addressing: key (a << 32 | b) + 1, 0 empty */
    int32_t *pmap_val;
    uint32_t pmap_mask;

    struct heap_entry *heap;
    int32_t n_heap, cap_heap;

    int32_t (*merges)[3]; /* a, b, result (symbols) */
    int32_t n_merges, cap_merges;
    int32_t *touched; /* pairs of the new symbol, this merge */
    int32_t n_touched, cap_touched;
    bool oom;
};

/* ---- step 1: words ---- */
static void add_word(struct trainer *t, const char *s, size_t n)
{
    if (n == 0 || t->oom) {
        return;
    }
    bool added;
    int32_t id = strtab_intern(&t->words, s, (uint32_t)n, &added);
    if (id < 0 || !grow((void **)&t->word_count, &t->word_cap, t->words.n, sizeof(*t->word_count))) {
        t->oom = true;
        return;
    }
    if (added) {
        t->word_count[id] = 0;
    }
    t->word_count[id]++;
}

/* Cut one document as the tokenizer sees it: "▁" first, ' ' -> "▁" starting a
 * word, a run of '\n' a word of its own. */
static void add_doc(struct trainer *t, const char *s, size_t n)
{
    char cur[MAX_WORD_BYTES + 8];
    size_t k = 3;
    memcpy(cur, SPACE, 3);
    for (size_t i = 0; i < n;) {
        char c = s[i];
        /* a long word is cut before a character's first byte (never inside a
         * valid character), or anyhow 4 bytes later (stray continuations) */
        bool cut = k >= MAX_WORD_BYTES && (((unsigned char)c & 0xC0) != 0x80 || k >= MAX_WORD_BYTES + 4);
        if (c == ' ' || c == '\n' || cut) {
            add_word(t, cur, k);
            k = 0;
        }
        if (c == ' ') {
            memcpy(cur, SPACE, 3);
            k = 3;
            i++;
        } else if (c == '\n') {
            size_t j = i;
            while (j < n && s[j] == '\n' && j - i < MAX_WORD_BYTES) {
                j++;
            }
            add_word(t, s + i, j - i);
            i = j;
        } else {
            cur[k++] = c;
            i++;
        }
    }
    add_word(t, cur, k);
}

/* ---- step 2: characters ---- */
struct char_count {
    int32_t id; /* in a temporary table */
    uint32_t len;
    const char *s; /* its text, set once the table is complete */
    int64_t count;
};

/* most frequent first; ties: smaller bytes first */
static int cmp_char(const void *x, const void *y)
{
    const struct char_count *a = x, *b = y;
    if (a->count != b->count) {
        return a->count > b->count ? -1 : 1;
    }
    int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

/* A valid character that may be a piece (U+0000 would end a C string). */
static int unit_len(const char *s, size_t n, bool *ok)
{
    uint32_t cp;
    int len = lm_vocab_utf8_decode(s, n, &cp);
    *ok = cp != LM_UNI_INVALID && cp != 0;
    return len;
}

/* Count the characters of all words; the kept ones become symbols 0..n-1. */
static lm_status count_chars(struct trainer *t, int32_t room)
{
    struct strtab ct = {0};
    struct char_count *cc = NULL;
    int32_t cap = 0;
    lm_status st = LM_ERR_NOMEM;
    for (int32_t w = 0; w < t->words.n; w++) {
        const char *s = strtab_str(&t->words, w);
        for (uint32_t i = 0, n = t->words.len[w]; i < n;) {
            bool ok, added;
            int len = unit_len(s + i, n - i, &ok);
            if (ok) {
                int32_t id = strtab_intern(&ct, s + i, (uint32_t)len, &added);
                if (id < 0 || !grow((void **)&cc, &cap, ct.n, sizeof(*cc))) {
                    goto out;
                }
                if (added) {
                    cc[id] = (struct char_count){.id = id};
                }
                cc[id].count += t->word_count[w];
            }
            i += (uint32_t)len;
        }
    }
    for (int32_t i = 0; i < ct.n; i++) {
        cc[i].s = strtab_str(&ct, cc[i].id);
        cc[i].len = ct.len[cc[i].id];
    }
    qsort(cc, (size_t)ct.n, sizeof(*cc), cmp_char);
    int32_t n = 0;
    while (n < ct.n && n < room && cc[n].count >= t->p->min_char_count) {
        bool added;
        if (strtab_intern(&t->syms, cc[n].s, cc[n].len, &added) < 0 ||
            !grow((void **)&t->sym_chars, &t->sym_chars_cap, n + 1, sizeof(*t->sym_chars))) {
            goto out;
        }
        t->sym_chars[n++] = 1;
    }
    t->n_chars = n;
    st = LM_OK;
out:
    strtab_free(&ct);
    free(cc);
    return st;
}

/* Each word as its symbols. */
static lm_status split_words(struct trainer *t)
{
    t->wd = calloc((size_t)t->words.n + 1, sizeof(*t->wd));
    if (!t->wd) {
        return LM_ERR_NOMEM;
    }
    t->n_words = t->words.n;
    for (int32_t w = 0; w < t->n_words; w++) {
        const char *s = strtab_str(&t->words, w);
        uint32_t n = t->words.len[w];
        struct word *wd = &t->wd[w];
        wd->count = t->word_count[w];
        wd->stamp = -1;
        wd->syms = malloc((size_t)n * sizeof(*wd->syms));
        if (!wd->syms) {
            return LM_ERR_NOMEM;
        }
        for (uint32_t i = 0; i < n;) {
            bool ok;
            uint32_t slot;
            int len = unit_len(s + i, n - i, &ok);
            /* -1 for a stray byte or a rare character: a barrier */
            wd->syms[wd->n++] = ok ? strtab_find(&t->syms, s + i, (uint32_t)len, &slot) : -1;
            i += (uint32_t)len;
        }
    }
    return LM_OK;
}

/* ---- step 3: pairs, the heap, merges ---- */

/* Symbol texts compared byte-wise (a prefix first), like strcmp. */
static int cmp_sym(const struct trainer *t, int32_t x, int32_t y)
{
    uint32_t lx = t->syms.len[x], ly = t->syms.len[y];
    int c = memcmp(strtab_str(&t->syms, x), strtab_str(&t->syms, y), lx < ly ? lx : ly);
    return c ? c : (lx < ly ? -1 : lx > ly);
}

/* x pops before y: higher count; ties: the smaller pair of texts */
static bool heap_before(const struct trainer *t, const struct heap_entry *x, const struct heap_entry *y)
{
    if (x->count != y->count) {
        return x->count > y->count;
    }
    const struct pair *p = &t->pairs[x->pair], *q = &t->pairs[y->pair];
    int c = cmp_sym(t, p->a, q->a);
    return c ? c < 0 : cmp_sym(t, p->b, q->b) < 0;
}

static void heap_push(struct trainer *t, int64_t count, int32_t pair)
{
    if (!grow((void **)&t->heap, &t->cap_heap, t->n_heap + 1, sizeof(*t->heap))) {
        t->oom = true;
        return;
    }
    struct heap_entry e = {.count = count, .pair = pair};
    int32_t i = t->n_heap++;
    while (i > 0 && heap_before(t, &e, &t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = e;
}

static struct heap_entry heap_pop(struct trainer *t)
{
    struct heap_entry top = t->heap[0], last = t->heap[--t->n_heap];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= t->n_heap) {
            break;
        }
        if (c + 1 < t->n_heap && heap_before(t, &t->heap[c + 1], &t->heap[c])) {
            c++;
        }
        if (!heap_before(t, &t->heap[c], &last)) {
            break;
        }
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (t->n_heap > 0) {
        t->heap[i] = last;
    }
    return top;
}

static uint32_t pair_hash(uint64_t key) { return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32); }

static bool pmap_grow(struct trainer *t)
{
    uint32_t cap = t->pmap_key ? (t->pmap_mask + 1) * 2 : 4096;
    uint64_t *keys = calloc(cap, sizeof(*keys));
    int32_t *vals = malloc((size_t)cap * sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (int32_t p = 0; p < t->n_pairs; p++) {
        uint64_t k = ((uint64_t)(uint32_t)t->pairs[p].a << 32 | (uint32_t)t->pairs[p].b) + 1;
        uint32_t i = pair_hash(k) & (cap - 1);
        while (keys[i]) {
            i = (i + 1) & (cap - 1);
        }
        keys[i] = k;
        vals[i] = p;
    }
    free(t->pmap_key);
    free(t->pmap_val);
    t->pmap_key = keys;
    t->pmap_val = vals;
    t->pmap_mask = cap - 1;
    return true;
}

/* Would a + b copy the text of <unk>, <s>, </s> or a <0xNN> token? Such a
 * piece would shadow the special or byte token in text lookups. */
static bool reserved_text(const struct trainer *t, int32_t a, int32_t b)
{
    uint32_t la = t->syms.len[a], lb = t->syms.len[b];
    char s[8];
    if (la + lb > 6) {
        return false;
    }
    memcpy(s, strtab_str(&t->syms, a), la);
    memcpy(s + la, strtab_str(&t->syms, b), lb);
    s[la + lb] = '\0';
    bool hex = la + lb == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && strchr("0123456789ABCDEF", s[3]) &&
               strchr("0123456789ABCDEF", s[4]);
    return hex || !strcmp(s, "<unk>") || !strcmp(s, "<s>") || !strcmp(s, "</s>");
}

/* The pair (a, b), created when `create`; -1 when absent, not eligible or
 * out of memory. */
static int32_t pair_get(struct trainer *t, int32_t a, int32_t b, bool create)
{
    if (a < 0 || b < 0 || t->sym_chars[a] + t->sym_chars[b] > t->p->max_piece_chars) {
        return -1;
    }
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t i = pair_hash(k) & t->pmap_mask;
    for (; t->pmap_key[i]; i = (i + 1) & t->pmap_mask) {
        if (t->pmap_key[i] == k) {
            return t->pmap_val[i];
        }
    }
    if (!create) {
        return -1;
    }
    if (!grow((void **)&t->pairs, &t->cap_pairs, t->n_pairs + 1, sizeof(*t->pairs))) {
        t->oom = true;
        return -1;
    }
    int32_t p = t->n_pairs++;
    t->pairs[p] = (struct pair){.a = a, .b = b, .stamp = -1, .banned = reserved_text(t, a, b)};
    t->pmap_key[i] = k;
    t->pmap_val[i] = p;
    if ((uint32_t)t->n_pairs * 2 > t->pmap_mask && !pmap_grow(t)) {
        t->oom = true;
    }
    return p;
}

/* Add delta to the count of (a, b); with w >= 0 also note that word w holds
 * it, and (merge m) that the pair gained count. */
static void pair_add(struct trainer *t, int32_t a, int32_t b, int64_t delta, int32_t w, int32_t m)
{
    int32_t p = pair_get(t, a, b, delta > 0);
    if (p < 0) {
        return;
    }
    struct pair *pr = &t->pairs[p];
    pr->count += delta;
    if (w < 0) {
        return;
    }
    if (pr->n_words == 0 || pr->words[pr->n_words - 1] != w) {
        if (!grow((void **)&pr->words, &pr->cap_words, pr->n_words + 1, sizeof(*pr->words))) {
            t->oom = true;
            return;
        }
        pr->words[pr->n_words++] = w;
    }
    if (m >= 0 && pr->stamp != m) {
        pr->stamp = m;
        if (!grow((void **)&t->touched, &t->cap_touched, t->n_touched + 1, sizeof(*t->touched))) {
            t->oom = true;
            return;
        }
        t->touched[t->n_touched++] = p;
    }
}

static lm_status count_pairs(struct trainer *t)
{
    if (!pmap_grow(t)) {
        return LM_ERR_NOMEM;
    }
    for (int32_t w = 0; w < t->n_words; w++) {
        const struct word *wd = &t->wd[w];
        for (int32_t i = 0; i + 1 < wd->n; i++) {
            pair_add(t, wd->syms[i], wd->syms[i + 1], wd->count, w, -1);
        }
    }
    for (int32_t p = 0; p < t->n_pairs; p++) {
        if (t->pairs[p].count > 0 && !t->pairs[p].banned) {
            heap_push(t, t->pairs[p].count, p);
        }
    }
    return t->oom ? LM_ERR_NOMEM : LM_OK;
}

/* Replace every (a, b) in word w by c, left to right, and move the pair
 * counts along. */
static void rewrite_word(struct trainer *t, int32_t w, int32_t a, int32_t b, int32_t c, int32_t m)
{
    struct word *wd = &t->wd[w];
    int32_t *s = wd->syms, n = wd->n, j = 0;
    int32_t i = 0;
    while (i + 1 < n && !(s[i] == a && s[i + 1] == b)) {
        i++;
    }
    if (i + 1 >= n) {
        return; /* a stale list entry */
    }
    for (i = 0; i + 1 < n; i++) {
        pair_add(t, s[i], s[i + 1], -wd->count, -1, -1);
    }
    for (i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            s[j++] = c;
            i += 2;
        } else {
            s[j++] = s[i++];
        }
    }
    wd->n = n = j;
    for (i = 0; i + 1 < n; i++) {
        bool new_pair = s[i] == c || s[i + 1] == c;
        pair_add(t, s[i], s[i + 1], wd->count, new_pair ? w : -1, new_pair ? m : -1);
    }
}

/* Pop the best live pair; LM_ERR_NOT_FOUND when none is left. */
static lm_status pop_best(struct trainer *t, int32_t *pair)
{
    while (t->n_heap > 0) {
        struct heap_entry e = heap_pop(t);
        const struct pair *p = &t->pairs[e.pair];
        if (p->count <= 0) {
            continue;
        }
        if (e.count != p->count) { /* stale: its count fell since */
            heap_push(t, p->count, e.pair);
            continue;
        }
        *pair = e.pair;
        return LM_OK;
    }
    return LM_ERR_NOT_FOUND;
}

/* Learn one merge. *made_piece: it made a new symbol (not a second split of
 * an existing one). */
static lm_status merge_once(struct trainer *t, bool *made_piece)
{
    int32_t best;
    lm_status st = pop_best(t, &best);
    if (st) {
        return st;
    }
    int32_t a = t->pairs[best].a, b = t->pairs[best].b;
    uint32_t la = t->syms.len[a], lb = t->syms.len[b];
    char *text = malloc(la + lb);
    if (!text) {
        return LM_ERR_NOMEM;
    }
    memcpy(text, strtab_str(&t->syms, a), la);
    memcpy(text + la, strtab_str(&t->syms, b), lb);
    int32_t c = strtab_intern(&t->syms, text, la + lb, made_piece);
    free(text);
    if (c < 0 || !grow((void **)&t->sym_chars, &t->sym_chars_cap, t->syms.n, sizeof(*t->sym_chars)) ||
        !grow((void **)&t->merges, &t->cap_merges, t->n_merges + 1, sizeof(*t->merges))) {
        return LM_ERR_NOMEM;
    }
    t->sym_chars[c] = t->sym_chars[a] + t->sym_chars[b];
    int32_t m = t->n_merges++;
    t->merges[m][0] = a;
    t->merges[m][1] = b;
    t->merges[m][2] = c;
    t->n_touched = 0;
    /* the list of `best` does not change meanwhile: only pairs with c gain words */
    for (int32_t k = 0; k < t->pairs[best].n_words; k++) {
        int32_t w = t->pairs[best].words[k];
        if (t->wd[w].stamp != m) {
            t->wd[w].stamp = m;
            rewrite_word(t, w, a, b, c, m);
        }
    }
    free(t->pairs[best].words);
    t->pairs[best].words = NULL;
    t->pairs[best].n_words = t->pairs[best].cap_words = 0;
    for (int32_t k = 0; k < t->n_touched; k++) {
        const struct pair *p = &t->pairs[t->touched[k]];
        if (p->count > 0 && !p->banned) {
            heap_push(t, p->count, t->touched[k]);
        }
    }
    return t->oom ? LM_ERR_NOMEM : LM_OK;
}

static void trainer_free(struct trainer *t)
{
    strtab_free(&t->words);
    strtab_free(&t->syms);
    free(t->word_count);
    for (int32_t w = 0; w < t->n_words; w++) {
        free(t->wd[w].syms);
    }
    free(t->wd);
    free(t->sym_chars);
    for (int32_t p = 0; p < t->n_pairs; p++) {
        free(t->pairs[p].words);
    }
    free(t->pairs);
    free(t->pmap_key);
    free(t->pmap_val);
    free(t->heap);
    free(t->merges);
    free(t->touched);
}

/* ---- step 4: the vocab ---- */
struct lm_trained_vocab {
    int32_t n;
    char *pool;        /* every text, NUL-terminated */
    const char **text; /* n pointers into pool */
    size_t *len;
    float *score;
    int32_t *type;
    int32_t n_merges;
    int32_t (*merges)[3]; /* token ids: left, right, result */
};

void lm_trained_vocab_free(struct lm_trained_vocab *v)
{
    if (!v) {
        return;
    }
    free(v->pool);
    free(v->text);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->merges);
    free(v);
}

static lm_status vocab_alloc(int32_t n, size_t pool_size, int32_t n_merges, struct lm_trained_vocab **out)
{
    struct lm_trained_vocab *v = calloc(1, sizeof(*v));
    if (!v) {
        return LM_ERR_NOMEM;
    }
    v->n = n;
    v->n_merges = n_merges;
    v->pool = malloc(pool_size);
    v->text = malloc((size_t)n * sizeof(*v->text));
    v->len = malloc((size_t)n * sizeof(*v->len));
    v->score = malloc((size_t)n * sizeof(*v->score));
    v->type = malloc((size_t)n * sizeof(*v->type));
    v->merges = malloc(((size_t)n_merges + 1) * sizeof(*v->merges));
    if (!v->pool || !v->text || !v->len || !v->score || !v->type || !v->merges) {
        lm_trained_vocab_free(v);
        return LM_ERR_NOMEM;
    }
    *out = v;
    return LM_OK;
}

/* Token id of symbol s: merge pieces from 259 on, characters after them. */
static int32_t sym_token(const struct trainer *t, int32_t s, int32_t n_merge_pieces)
{
    return s >= t->n_chars ? N_FIXED + (s - t->n_chars) : N_FIXED + n_merge_pieces + s;
}

static lm_status build_vocab(const struct trainer *t, struct lm_trained_vocab **out)
{
    int32_t n_merge_pieces = t->syms.n - t->n_chars, n = N_FIXED + t->syms.n;
    struct lm_trained_vocab *v;
    lm_status st = vocab_alloc(n, t->syms.pool_n + N_FIXED * 8, t->n_merges, &v);
    if (st) {
        return st;
    }
    char *pool = v->pool;
    for (int32_t id = 0; id < n; id++) {
        int32_t k = id - N_FIXED; /* piece index: merge pieces, then characters */
        int32_t s = k < 0 ? -1 : k < n_merge_pieces ? t->n_chars + k : k - n_merge_pieces;
        if (id < N_FIXED) {
            static const char *const special[3] = {"<unk>", "<s>", "</s>"};
            if (id < 3) {
                strcpy(pool, special[id]);
            } else {
                snprintf(pool, 8, "<0x%02X>", id - LM_VOCAB_TRAIN_BYTE0);
            }
            v->len[id] = strlen(pool);
            v->score[id] = 0.0f;
            v->type[id] = id == LM_VOCAB_TRAIN_UNK ? LM_TOKEN_UNKNOWN : id < 3 ? LM_TOKEN_CONTROL : LM_TOKEN_BYTE;
        } else {
            v->len[id] = t->syms.len[s];
            memcpy(pool, strtab_str(&t->syms, s), v->len[id] + 1);
            v->score[id] = -(float)(id - N_FIXED);
            v->type[id] = LM_TOKEN_NORMAL;
        }
        v->text[id] = pool;
        pool += v->len[id] + 1;
    }
    for (int32_t m = 0; m < t->n_merges; m++) {
        for (int k = 0; k < 3; k++) {
            v->merges[m][k] = sym_token(t, t->merges[m][k], n_merge_pieces);
        }
    }
    *out = v;
    return LM_OK;
}

/* ---- public ---- */
struct lm_vocab_train_params lm_vocab_train_default_params(void)
{
    return (struct lm_vocab_train_params){.n_vocab = 4096, .min_char_count = 2, .max_piece_chars = 16};
}

_Static_assert(LM_VOCAB_TRAIN_MIN_VOCAB == 260 && LM_VOCAB_TRAIN_MAX_VOCAB == 32000, "check_args' message");

static lm_status check_args(const char *const *docs, size_t n_docs, const struct lm_vocab_train_params *p,
                            struct lm_trained_vocab **out, char *err, size_t err_size)
{
    const char *why = NULL;
    if (!p || !out || (n_docs > 0 && !docs)) {
        why = "a NULL argument";
    } else if (p->n_vocab < LM_VOCAB_TRAIN_MIN_VOCAB || p->n_vocab > LM_VOCAB_TRAIN_MAX_VOCAB) {
        why = "n_vocab must be 260..32000";
    } else if (p->min_char_count < 1) {
        why = "min_char_count must be at least 1";
    } else if (p->max_piece_chars < 2 || p->max_piece_chars > 256) {
        why = "max_piece_chars must be 2..256";
    }
    if (why) {
        snprintf(err, err ? err_size : 0, "vocab_train: %s (n_vocab %d)", why, p ? p->n_vocab : 0);
        return LM_ERR_INVALID_ARG;
    }
    return LM_OK;
}

/* Steps 1 and 2; LM_ERR_INVALID_ARG when there is no text. */
static lm_status read_text(struct trainer *t, const char *const *docs, const size_t *lens, size_t n_docs, char *err,
                           size_t err_size)
{
    uint64_t total = 0;
    for (size_t d = 0; d < n_docs && !t->oom; d++) {
        size_t n = !docs[d] ? 0 : lens ? lens[d] : strlen(docs[d]);
        if (n > 0) {
            add_doc(t, docs[d], n);
            total += n;
        }
    }
    if (t->oom) {
        return LM_ERR_NOMEM;
    }
    if (total == 0) {
        snprintf(err, err ? err_size : 0, "vocab_train: no training text");
        return LM_ERR_INVALID_ARG;
    }
    lm_status st = count_chars(t, t->p->n_vocab - N_FIXED);
    return st ? st : split_words(t);
}

lm_status lm_vocab_train(const char *const *docs, const size_t *lens, size_t n_docs,
                         const struct lm_vocab_train_params *p, struct lm_trained_vocab **out, char *err,
                         size_t err_size)
{
    lm_status st = check_args(docs, n_docs, p, out, err, err_size);
    if (st) {
        return st;
    }
    struct trainer t = {.p = p};
    if ((st = read_text(&t, docs, lens, n_docs, err, err_size)) || (st = count_pairs(&t))) {
        goto out_free;
    }
    int32_t room = p->n_vocab - N_FIXED;
    while (t.syms.n < room) {
        bool made;
        st = merge_once(&t, &made);
        if (st == LM_ERR_NOT_FOUND) {
            snprintf(err, err ? err_size : 0,
                     "vocab_train: the text gives only %d tokens (%d characters, %d merges), fewer than n_vocab %d",
                     N_FIXED + t.syms.n, t.n_chars, t.syms.n - t.n_chars, p->n_vocab);
            st = LM_ERR_INVALID_ARG;
        }
        if (st) {
            goto out_free;
        }
    }
    st = build_vocab(&t, out);
out_free:
    if (st == LM_ERR_NOMEM) {
        snprintf(err, err ? err_size : 0, "vocab_train: out of memory");
    }
    trainer_free(&t);
    return st;
}

int32_t lm_trained_vocab_n_vocab(const struct lm_trained_vocab *v) { return v ? v->n : 0; }

const char *lm_trained_vocab_text(const struct lm_trained_vocab *v, int32_t id, size_t *len)
{
    bool ok = v && id >= 0 && id < v->n;
    if (len) {
        *len = ok ? v->len[id] : 0;
    }
    return ok ? v->text[id] : "";
}

float lm_trained_vocab_score(const struct lm_trained_vocab *v, int32_t id)
{
    return v && id >= 0 && id < v->n ? v->score[id] : 0.0f;
}

int32_t lm_trained_vocab_type(const struct lm_trained_vocab *v, int32_t id)
{
    return v && id >= 0 && id < v->n ? v->type[id] : LM_TOKEN_UNDEFINED;
}

int32_t lm_trained_vocab_n_merges(const struct lm_trained_vocab *v) { return v ? v->n_merges : 0; }

int lm_trained_vocab_merge(const struct lm_trained_vocab *v, int32_t r, int32_t *left, int32_t *right, int32_t *result)
{
    if (!v || r < 0 || r >= v->n_merges) {
        return -1;
    }
    *left = v->merges[r][0];
    *right = v->merges[r][1];
    *result = v->merges[r][2];
    return 0;
}

lm_status lm_trained_vocab_write_kv(const struct lm_trained_vocab *v, struct lm_gguf_writer *w)
{
    if (!v || !w) {
        return LM_ERR_INVALID_ARG;
    }
    lm_status st;
    if ((st = lm_gguf_set_str(w, "tokenizer.ggml.model", "llama")) ||
        (st = lm_gguf_set_str(w, "tokenizer.ggml.pre", "default")) ||
        (st = lm_gguf_set_arr_str(w, "tokenizer.ggml.tokens", v->text, (uint64_t)v->n)) ||
        (st = lm_gguf_set_arr_data(w, "tokenizer.ggml.scores", LM_GGUF_FLOAT32, v->score, (uint64_t)v->n)) ||
        (st = lm_gguf_set_arr_data(w, "tokenizer.ggml.token_type", LM_GGUF_INT32, v->type, (uint64_t)v->n)) ||
        (st = lm_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", LM_VOCAB_TRAIN_BOS)) ||
        (st = lm_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", LM_VOCAB_TRAIN_EOS)) ||
        (st = lm_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", LM_VOCAB_TRAIN_UNK)) ||
        (st = lm_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true)) ||
        (st = lm_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", false))) {
        return st;
    }
    return LM_OK;
}

lm_status lm_trained_vocab_write_file(const struct lm_trained_vocab *v, const char *name, const char *path)
{
    struct lm_gguf_writer *w;
    if (!v || !path) {
        return LM_ERR_INVALID_ARG;
    }
    lm_status st = lm_gguf_writer_new(&w);
    if (st) {
        return st;
    }
    if (!(st = lm_gguf_set_str(w, "general.architecture", "llama")) &&
        !(st = lm_gguf_set_str(w, "general.name", name ? name : "lamina-vocab")) &&
        !(st = lm_trained_vocab_write_kv(v, w))) {
        st = lm_gguf_write_file(w, path);
    }
    lm_gguf_writer_free(w);
    return st;
}

lm_status lm_trained_vocab_to_vocab(const struct lm_trained_vocab *v, struct lm_vocab **out, char *err, size_t err_size)
{
    if (!v || !out) {
        return LM_ERR_INVALID_ARG;
    }
    struct lm_vocab_desc d = lm_vocab_desc_default();
    d.type = LM_VOCAB_SPM;
    d.n_tokens = v->n;
    d.tokens = v->text;
    d.token_lens = v->len;
    d.scores = v->score;
    d.types = v->type;
    d.bos = LM_VOCAB_TRAIN_BOS;
    d.eos = LM_VOCAB_TRAIN_EOS;
    d.unk = LM_VOCAB_TRAIN_UNK;
    d.add_bos = 1;
    d.add_eos = 0;
    return lm_vocab_build(&d, out, err, err_size);
}
