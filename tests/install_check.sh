#!/usr/bin/env bash
# The library others link: `cmake --install` into a scratch prefix, then a program outside the
# tree builds against it with `pkg-config --cflags --libs brigade` and with CMake's
# find_package(brigade), and runs. The shared library exports brg_* only and has a soname.
#
#   bash tests/install_check.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: install_check.sh BUILD_DIR}
source "$(dirname "$0")/shell_util.sh"
prefix=$tmp/prefix

# A sanitizer build's library needs its runtime loaded first, which a plain program does not do.
if grep -q '^BRIGADE_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "sanitizer build: the out-of-tree check runs in the plain build"
  exit 77
fi
cmake --install "$build" --prefix "$prefix" >/dev/null 2>"$tmp/err" && ok || { bad "install: $(cat "$tmp/err")"; finish; }
lib=$(ls "$prefix"/lib*/libbrigade.so.*.*.* 2>/dev/null | head -1)
[[ -n $lib ]] && ok || bad "no versioned libbrigade.so in $prefix"
readelf -d "$lib" | grep -q 'SONAME.*libbrigade\.so\.[0-9]*\]' && ok || bad "no soname: $(readelf -d "$lib" | grep SONAME)"
leaked=$(nm -D --defined-only "$lib" | awk '$2 == "T" && $3 !~ /^brg_/ { print $3 }' | head -5)
[[ -z $leaked ]] && ok || bad "internal symbols exported: $leaked"
[[ -f $prefix/include/brigade/brigade.h ]] && ok || bad "headers not installed"
# brigade.h includes every public header.
for h in "$prefix"/include/brigade/*.h; do
  b=${h##*/}
  [[ $b == brigade.h ]] || grep -q "\"brigade/$b\"" "$prefix/include/brigade/brigade.h" || bad "brigade.h does not include $b"
done

mkdir -p "$tmp/app"
cat >"$tmp/app/app.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <brigade/brigade.h>

int main(void) {
    brg_ipu_config cfg;
    brg_ipu_config_init(&cfg);
    if (brg_ipu_config_from_json("{\"layers_per_ipu\": [1, 1]}", "app", &cfg) != BRG_OK) return 1;
    printf("brigade %s, ipus_per_replica %lld\n", brg_version(), (long long)cfg.ipus_per_replica);
    return strlen(brg_version()) ? 0 : 1;
}
C
pcdir=$(dirname "$(ls "$prefix"/lib*/pkgconfig/brigade.pc)")
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs brigade) && ok || bad "pkg-config does not know brigade"
cc "$tmp/app/app.c" $flags -o "$tmp/app/app-pc" 2>"$tmp/err" && ok || bad "build with pkg-config: $(cat "$tmp/err")"
out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/app/app-pc") && [[ $out == "brigade "*", ipus_per_replica 2" ]] && ok ||
  bad "the pkg-config build runs: '$out'"

cat >"$tmp/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(brigade REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE brigade::brigade)
CM
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null 2>"$tmp/err" &&
  cmake --build "$tmp/app/build" >/dev/null 2>"$tmp/err" && ok || bad "build with find_package: $(tail -5 "$tmp/err")"
out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/app/build/app") && [[ $out == "brigade "* ]] && ok || bad "the CMake build runs: '$out'"

finish
