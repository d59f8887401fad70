/* schema.h - JSON Schema to GBNF, for the server's `response_format`.
 *
 * The server enforces {"type": "json_object"} and {"type": "json_schema", ...}
 * by sampling under a GBNF grammar (sampling/grammar.h). This converts a schema
 * into such a grammar: its `root` rule accepts only JSON texts valid under the
 * schema (a subset of them where noted in docs/server.md, "JSON schemas"; never
 * a text the schema rejects, except for the documented unenforced keywords).
 *
 * Schemas come from HTTP clients: recursion depth, schema size and grammar size
 * are bounded, unsupported keywords are refused with a message, and every
 * grammar returned has been parsed and built by lamina's grammar engine.
 * Thread-safe: no global state.
 */
#ifndef LM_SERVER_SCHEMA_H
#define LM_SERVER_SCHEMA_H

#include <stddef.h>

#include <jansson.h>

#include "core/status.h"

/* Limits on what one conversion may cost. */
#define LM_SCHEMA_MAX_DEPTH 64        /* nesting of subschemas (and of $ref / allOf resolution) */
#define LM_SCHEMA_MAX_NODES 10000     /* subschemas converted */
#define LM_SCHEMA_MAX_REPEAT 4096     /* largest minLength/maxLength/minItems/maxItems honoured */
#define LM_SCHEMA_MAX_GBNF (1u << 20) /* bytes of grammar text */

/* Convert schema to GBNF text whose `root` rule accepts the JSON texts valid under
 * it; schema NULL means "any JSON object" (json_object mode). On success *out is
 * a NUL-terminated string the caller frees with free(). On failure *out is not
 * written and a message goes to err (if errlen > 0):
 *   LM_ERR_CORRUPT      the schema is malformed (not an object, bad keyword value,
 *                       `$ref` to nowhere, unsatisfiable constraints);
 *   LM_ERR_UNSUPPORTED  a keyword or form outside the supported subset, or a limit
 *                       above exceeded, or a recursion with no finite instance;
 *   LM_ERR_INVALID_ARG  out is NULL;
 *   LM_ERR_NOMEM        allocation failed.
 * Thread-safe. */
lm_status lm_schema_to_gbnf(const json_t *schema, char **out, char *err, size_t errlen);

#endif
