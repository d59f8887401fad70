CMakeFiles/lm_core.dir/src/core/status.c.o: /work/main/src/core/status.c \
 /usr/include/stdc-predef.h /work/main/src/core/status.h
