/* cli.h - the lamina command-line tool: one binary, one file per subcommand.
 * Each subcommand takes argc/argv after its name and returns the exit code
 * (0 success, 1 runtime error, 2 usage error). Errors go to stderr. */
#ifndef LM_CLI_H
#define LM_CLI_H

#include <stdbool.h>
#include <stdint.h>

int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_quantize(int argc, char **argv);

/* Argument helpers: the value of option argv[*i] (advancing *i), or NULL with
 * a message when it is missing. */
const char *cli_value(int argc, char **argv, int *i);
/* Parse an integer / float option value; false (with a message) if malformed. */
bool cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
bool cli_float(const char *opt, const char *s, float *out);
/* Process escapes (\n \t \r \\ \' \" \xHH) in place. */
void cli_unescape(char *s);
/* Read a whole text file (NUL-terminated, caller frees); NULL with a message. */
char *cli_read_file(const char *path, size_t *len);

#endif
