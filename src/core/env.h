/* env.h - the LAMINA_* environment switches: one table, one parser.
 *
 * Every LAMINA_* variable the library reads is a row of the table in env.c
 * (name, kind, default, accepted words, meaning, when it is read), and env.c
 * holds the library's only getenv() of them. Configuration is read at the
 * edge: only src/api/ calls these accessors (llama_backend_init for the
 * process-wide switches, model load, context creation) and passes the values
 * down as parameters (lm_model_params, lm_context_params, backend options)
 * or through a setter called once. tests/core/test_env.c checks that no
 * other file in src/ calls lm_env_* or passes a LAMINA_* name to getenv(),
 * and that every row is documented in docs/architecture.md ("Environment
 * switches").
 *
 * The accessors parse the variable at each call: they cache nothing.
 *
 * Kinds:
 *   LM_ENV_FLAG   exactly "0" is off, exactly "1" is on; unset or anything
 *                 else is the default (which may be LM_ENV_AUTO: the reader
 *                 decides).
 *   LM_ENV_WORD   one of the row's words (exact, case-sensitive): its index;
 *                 unset or anything else is the default index (LM_ENV_AUTO:
 *                 none).
 *   LM_ENV_LEVEL  like WORD, but each word stands for a number (the row's
 *                 levels) and the result is that number.
 *   LM_ENV_PATH   the value as it is (a path or a list of paths); NULL when
 *                 unset. def is 0.
 * Values outside a switch's accepted set are ignored silently (the default
 * applies).
 */
#ifndef LM_CORE_ENV_H
#define LM_CORE_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

enum lm_env_id {
    LM_ENV_LOG,         /* LAMINA_LOG: the default log sink's level */
    LM_ENV_ISA,         /* LAMINA_ISA: start the CPU kernels at a lower level */
    LM_ENV_PREFETCH,    /* LAMINA_PREFETCH: AVX-512 software prefetch on/off */
    LM_ENV_HUGEPAGES,   /* LAMINA_HUGEPAGES: huge-page advice for large buffers */
    LM_ENV_NO_REPACK,   /* LAMINA_NO_REPACK: load CPU weights plain */
    LM_ENV_NO_FUSE,     /* LAMINA_NO_FUSE: no fused node pairs (CPU, CUDA) */
    LM_ENV_ATTN,        /* LAMINA_ATTN: fused ATTN op or the unfused graph */
    LM_ENV_CUDA_GRAPHS, /* LAMINA_CUDA_GRAPHS: decode through CUDA graphs */
    LM_ENV_CUDA_MMQ,    /* LAMINA_CUDA_MMQ: quantized small batches through the MMQ kernels */
    LM_ENV_GRAPH_REUSE, /* LAMINA_GRAPH_REUSE: a context keeps its last graph for the next decode */
    LM_ENV_MODULE_PATH, /* LAMINA_MODULE_PATH: where liblamina.so looks for backend modules */
    LM_ENV_COUNT
};

enum lm_env_kind {
    LM_ENV_FLAG,
    LM_ENV_WORD,
    LM_ENV_LEVEL,
    LM_ENV_PATH,
};

#define LM_ENV_AUTO (-1) /* a default that leaves the choice to the reader */
#define LM_ENV_MAX_WORDS 4

/* One switch. words/levels end at the first NULL word (WORD, LEVEL only). */
struct lm_env_switch {
    const char *name; /* "LAMINA_ATTN" */
    enum lm_env_kind kind;
    int def;                             /* flag: 0, 1 or LM_ENV_AUTO; WORD: index or LM_ENV_AUTO; LEVEL: number */
    const char *words[LM_ENV_MAX_WORDS]; /* WORD, LEVEL: the accepted values */
    int levels[LM_ENV_MAX_WORDS];        /* LEVEL: the number of each word */
    const char *meaning;                 /* one line */
    const char *when;                    /* where in src/api/ it is read, and what it sets */
};

/* The row of a switch, or NULL when id is out of range. Static; thread-safe. */
const struct lm_env_switch *lm_env_switch(enum lm_env_id id);

/* A flag switch (kind LM_ENV_FLAG) now: 1 on, 0 off, or the row's default
 * (LM_ENV_AUTO for LAMINA_PREFETCH) when unset or not an accepted value.
 * Thread-safe as getenv() is (not against a concurrent setenv). */
int lm_env_flag(enum lm_env_id id);

/* A WORD switch now: the index of its value in the row's words, or the
 * row's default (LM_ENV_AUTO: none) when unset or not one of them.
 * Thread-safe as getenv() is. */
int lm_env_word(enum lm_env_id id);

/* A WORD switch's value now as the row's word (static), or NULL when it is
 * unset or not one of them and the default is LM_ENV_AUTO. */
const char *lm_env_word_name(enum lm_env_id id);

/* A LEVEL switch now: the number of its word, or the row's default when
 * unset or not one of them. Thread-safe as getenv() is. */
int lm_env_level(enum lm_env_id id);

/* A PATH switch now: its value (the environment's string: valid until the
 * next setenv of it), or NULL when unset. Thread-safe as getenv() is. */
const char *lm_env_path(enum lm_env_id id);

#ifdef __cplusplus
}
#endif

#endif
