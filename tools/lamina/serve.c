/* serve.c - placeholder while `lamina serve` is written (replace this file). */
#include <stdio.h>

#include "cli.h"

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "lamina serve: not built yet\n");
    return 1;
}
