/* modules.h - device backends beyond cpu and ref, as llama_backend_init
 * registers them (modules.c): linked in, or loaded as modules
 * liblamina-<name>.so (backend/module.h; docs/architecture.md "Backend
 * modules"). Which of the two a build does is its flavour (builtin/builtin.c,
 * compiled once per flavour).
 */
#ifndef LM_API_MODULES_H
#define LM_API_MODULES_H

#include <stdbool.h>

#include "backend/module.h"

/* A backend linked into this flavour: its name and module init. */
struct lm_linked_module {
    const char *name;
    lm_module_init_fn init;
};

struct lm_api_flavour {
    const struct lm_linked_module *linked; /* n_linked entries */
    int n_linked;
    bool load_modules;  /* look for liblamina-<name>.so (liblamina.so only) */
    const char *libdir; /* the install libdir, searched after the library's own folder; NULL: none */
};

/* This build's flavour (static). */
const struct lm_api_flavour *lm_api_flavour(void);

/* Register the linked backends, then (liblamina.so) the modules found, each
 * device after the CPU in registry order. The first call does the work;
 * later calls return at once. A module that is missing is a debug line, one
 * that does not load or finds no device an info line, one of another build
 * a warning; none of these fails. Not thread-safe: call at start-up. */
void lm_api_modules_init(void);

#endif
