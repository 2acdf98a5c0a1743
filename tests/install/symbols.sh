#!/usr/bin/env bash
# tests/install/symbols.sh LIBCORING_SO INCLUDE_DIR...: libcoring.so exports
# the public API and nothing else, checked with the compiler rather than
# with the generator of the version script (cmake/public_symbols.py):
#   1. its SONAME is libcoring.so.N;
#   2. every symbol `nm -D --defined-only` lists is declared by a public
#      header: a C file that includes them all and takes each symbol's
#      address compiles (an undeclared name is an error), so neither the
#      layers' internals nor the C++ wrapper, simdjson or double-conversion
#      leak;
#   3. every function the public headers declare (gcc -aux-info: not static
#      inline) is exported, so that a program that includes a header links.
# INCLUDE_DIR...: the folders holding coring/LAYER/*.h (the layers' include/
# and the build folder's generated ones, or an install's include/).
set -euo pipefail
lib=$1
shift
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/coring-symbols.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ $soname =~ ^libcoring\.so\.[0-9]+$ ]] || fail "SONAME is '$soname', not libcoring.so.N"
echo "ok: SONAME $soname"


includes=() headers=()
for dir in "$@"; do
  includes+=(-I "$dir")
  while IFS= read -r h; do headers+=("${h#"$dir"/}"); done < <(find "$dir/coring" -name '*.h' | sort)
done
((${#headers[@]} > 20)) || fail "only ${#headers[@]} public headers found in $*"

# Every defined dynamic symbol (the version node, an absolute symbol, aside).
nm -D --defined-only "$lib" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort -u >"$tmp/exported"
{
  for h in "${headers[@]}"; do echo "#include \"$h\""; done
  echo "void coring_exported(void (*use)(const void *));"
  echo "void coring_exported(void (*use)(const void *))"
  echo "{"
  sed 's/.*/    use(\&&);/' "$tmp/exported"
  echo "}"
} >"$tmp/exported.c"
if ! "$cc" -std=gnu17 -D_GNU_SOURCE -fsyntax-only "${includes[@]}" "$tmp/exported.c" 2>"$tmp/err"; then
  grep -oE "[‘'][A-Za-z_0-9]+[’'] undeclared" "$tmp/err" | sort -u | sed 's/^/  /' >&2 || cat "$tmp/err" >&2
  fail "libcoring.so exports symbols that no public header declares (above)"
fi
echo "ok: each of the $(wc -l <"$tmp/exported") exported symbols is declared by a public header"

# Every function a public header declares, from the compiler's own list.
for h in "${headers[@]}"; do echo "#include \"$h\""; done >"$tmp/all.c"
"$cc" -std=gnu17 -D_GNU_SOURCE -c -o "$tmp/all.o" -aux-info "$tmp/aux" "${includes[@]}" "$tmp/all.c"
dirs=$(printf '%s|' "$@")
grep -E "^/\* (${dirs%|})/coring/" "$tmp/aux" | grep -v ' static ' |
  sed -E 's/^\/\*[^*]*\*\/ *//; s/ *\(.*//; s/.*[ *]//' | sort -u >"$tmp/declared"
(($(wc -l <"$tmp/declared") > 100)) || fail "only $(wc -l <"$tmp/declared") functions found in the headers"
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
[[ -z $missing ]] || fail "functions declared in public headers but not exported: $(echo $missing)"
echo "ok: each of the $(wc -l <"$tmp/declared") functions the public headers declare is exported"
