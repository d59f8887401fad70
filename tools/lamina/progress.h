/* progress.h - progress of long steps (model load, quantize) on a terminal.
 *
 * Progress is drawn on stderr, one line redrawn in place with "\r", and only
 * when stderr is a terminal: in pipes and log files the tools stay quiet, so
 * their logs hold no carriage returns. Not thread-safe (the tools draw from
 * one thread). */
#ifndef LM_CLI_PROGRESS_H
#define LM_CLI_PROGRESS_H

#include <stdbool.h>

/* True when stderr is a terminal (and TERM is not "dumb"): progress is shown. */
bool cli_progress_enabled(void);

/* State of one progress line: what is shown and the last percentage drawn. */
struct cli_progress {
    const char *what;
    int last_pct;
};

/* A llama_progress_callback: draws "WHAT  42%" when the percentage changes
 * and clears the line at 1.0. user is a struct cli_progress (its last_pct
 * starts at -1). Always returns true (never aborts). */
bool cli_progress_load(float progress, void *user);

/* Redraw the line with text (truncated to the terminal's 80 columns) / clear it. */
void cli_progress_text(const char *text);
void cli_progress_clear(void);

#endif
