/* status.c - names of the status codes. */
#include "core/status.h"

static const char *const names[LM_STATUS_COUNT] = {
    [LM_OK] = "ok",
    [LM_ERR_INVALID_ARG] = "invalid argument",
    [LM_ERR_CORRUPT] = "corrupt input",
    [LM_ERR_IO] = "I/O error",
    [LM_ERR_NOMEM] = "out of memory",
    [LM_ERR_UNSUPPORTED] = "unsupported",
    [LM_ERR_SHAPE] = "shape or type mismatch",
    [LM_ERR_NOT_FOUND] = "not found",
    [LM_ERR_FULL] = "no space left",
    [LM_ERR_ABORTED] = "aborted",
    [LM_ERR_DEVICE] = "device error",
};

const char *lm_status_str(lm_status st)
{
    if ((unsigned)st >= LM_STATUS_COUNT)
        return "unknown status";
    return names[st];
}
