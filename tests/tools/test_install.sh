#!/usr/bin/env bash
# test_install.sh LAMINA SHARED - lamina installs like a C library:
#  - `cmake --install BUILD --prefix P` (BUILD: the build dir, LAMINA's
#    directory's parent) puts liblamina.a, liblamina.so (with a SONAME),
#    libllama.so, the headers, lamina.pc and bin/lamina under P;
#  - pkg-config finds lamina there with P's paths;
#  - install_prog.c builds with `pkg-config --cflags --libs lamina` against
#    the shared library (run with LD_LIBRARY_PATH) and with `--static` against
#    liblamina.a (no liblamina.so needed), and both generate the reference ids;
#  - liblamina.so needs no CUDA library; a CUDA build installs
#    liblamina-cuda.so beside it (docs/architecture.md "Backend modules").
# In a sanitizer build the client is compiled with the same compiler and
# sanitizer flags (the installed library needs their runtime).
. "$(dirname "$0")/lib.sh"
BUILD=$(cd "$(dirname "$LAMINA")/.." && pwd)
M=$SHARED/models/stories260K.gguf

command -v pkg-config >/dev/null || { echo "FAIL: pkg-config not found (scripts/deps.sh installs it)" >&2; exit 1; }
P=$tmp/prefix
if ! cmake --install "$BUILD" --prefix "$P" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  echo "FAIL: cmake --install $BUILD" >&2
  exit 1
fi
LIBDIR=$(dirname "$(find "$P" -name liblamina.a | head -n 1)")
for f in "$LIBDIR/liblamina.a" "$LIBDIR/liblamina.so" "$LIBDIR/libllama.so" "$LIBDIR/pkgconfig/lamina.pc" \
  "$P/include/llama.h" "$P/include/ggml.h" "$P/bin/lamina"; do
  [ -e "$f" ] && ok || bad "not installed: ${f#"$P"/}"
done
[ -d "$P/include" ] && [ ! -L "$P/include" ] && [ ! -L "$P/include/llama.h" ] && ok || bad "headers are not copied"
soname=$(objdump -p "$LIBDIR/liblamina.so" 2>/dev/null | awk '/SONAME/ {print $2}')
case "$soname" in liblamina.so.[0-9]*) ok ;; *) bad "liblamina.so SONAME is '$soname'" ;; esac
[ "$(readlink -f "$LIBDIR/libllama.so")" = "$(readlink -f "$LIBDIR/liblamina.so")" ] && ok ||
  bad "libllama.so is not liblamina.so"
"$P/bin/lamina" --help >/dev/null && ok || bad "installed lamina --help"
# liblamina.so maps no CUDA library itself; a CUDA build installs its module beside it
objdump -p "$LIBDIR/liblamina.so" | grep -q "NEEDED.*libcu" && bad "liblamina.so needs a CUDA library" || ok
if [ -e "$BUILD/liblamina-cuda.so" ]; then
  [ -e "$LIBDIR/liblamina-cuda.so" ] && ok || bad "not installed: liblamina-cuda.so"
  objdump -p "$LIBDIR/liblamina-cuda.so" | grep -q "NEEDED.*liblamina.so" && ok ||
    bad "liblamina-cuda.so does not need liblamina.so"
fi

export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
[ "$(pkg-config --variable=prefix lamina)" = "$P" ] && ok || bad "pkg-config prefix: $(pkg-config --variable=prefix lamina)"
[ "$(pkg-config --variable=includedir lamina)" = "$P/include" ] && ok || bad "pkg-config includedir"
pkg-config --static --libs lamina | grep -q -- "-lm" && ok || bad "no -lm in pkg-config --static --libs"

# the compiler and sanitizer flags of the build
CC=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
[ -n "$CC" ] || CC=cc
SAN=""
grep -q '^LM_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" && SAN="-fsanitize=address,undefined"
want=$(cut -d' ' -f1-8 "$SHARED/models/stories260K.greedy200.ids" | tr -s ' \n' ' ' | sed 's/ $//')

# shellcheck disable=SC2046,SC2086
if "$CC" -std=c11 -Wall -Wextra -Werror $SAN -o "$tmp/prog_shared" "$HERE/install_prog.c" \
  $(pkg-config --cflags --libs lamina) 2>"$tmp/cc.txt"; then
  got=$(LD_LIBRARY_PATH=$LIBDIR "$tmp/prog_shared" "$M" 8)
  [ "$got" = "$want" ] && ok || bad "shared client generated '$got', want '$want'"
  objdump -p "$tmp/prog_shared" | grep -q "NEEDED.*liblamina.so" && ok || bad "shared client does not need liblamina.so"
else
  cat "$tmp/cc.txt" >&2
  bad "cannot build the client against the shared library"
fi

libs=$(pkg-config --static --libs lamina | sed 's/-llamina/-Wl,-Bstatic -llamina -Wl,-Bdynamic/')
# shellcheck disable=SC2046,SC2086
if "$CC" -std=c11 -Wall -Wextra -Werror $SAN -o "$tmp/prog_static" "$HERE/install_prog.c" \
  $(pkg-config --static --cflags lamina) $libs 2>"$tmp/cc.txt"; then
  got=$("$tmp/prog_static" "$M" 8)
  [ "$got" = "$want" ] && ok || bad "static client generated '$got', want '$want'"
  objdump -p "$tmp/prog_static" | grep -q "NEEDED.*liblamina" && bad "static client needs liblamina.so" || ok
else
  cat "$tmp/cc.txt" >&2
  bad "cannot build the client against the static library"
fi

finish
