/* progress.c - the one-line progress display of progress.h: "\r", the text,
 * "erase to end of line". Draws only on a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "progress.h"

bool cli_progress_enabled(void)
{
    const char *term = getenv("TERM");
    return isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"));
}

void cli_progress_text(const char *text)
{
    fprintf(stderr, "\r%.79s\033[K", text);
    fflush(stderr);
}

void cli_progress_clear(void)
{
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

bool cli_progress_load(float progress, void *user)
{
    struct cli_progress *p = user;
    int pct = (int)(progress * 100.0f + 0.5f);
    if (pct < 0)
        pct = 0;
    if (pct >= 100) {
        cli_progress_clear();
        p->last_pct = 100;
        return true;
    }
    if (pct != p->last_pct) {
        char line[96];
        snprintf(line, sizeof line, "%s %3d%%", p->what ? p->what : "loading", pct);
        cli_progress_text(line);
        p->last_pct = pct;
    }
    return true;
}
