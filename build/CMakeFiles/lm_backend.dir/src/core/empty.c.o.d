CMakeFiles/lm_backend.dir/src/core/empty.c.o: /work/main/src/core/empty.c \
 /usr/include/stdc-predef.h
