#!/usr/bin/env bash
# Checks that every C and C++ file of the project is formatted as .clang-format says (CI runs it
# from scripts/test.sh). With --fix, formats them in place instead.
#   scripts/check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format not found; run scripts/setup.sh" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' | grep -v '^assets/')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/check_format.$$; then
  grep -E '^[^ ].*: (error|warning):' /tmp/check_format.$$ | cut -d: -f1 | sort | uniq -c | sort -rn | head -20 >&2
  echo "check_format: the files above are not formatted; run scripts/check_format.sh --fix" >&2
  rm -f /tmp/check_format.$$
  exit 1
fi
rm -f /tmp/check_format.$$
echo "check_format: ${#files[@]} files formatted as .clang-format says"
