#!/usr/bin/env bash
# Checks the style rules machines can check (docs/STYLE.md is the rest):
#   - clang-format (Debian 12's, version 14, with .clang-format) on every C++ and CUDA file of the
#     tree, in check mode: prints the files that differ and fails;
#   - with --tidy BASE: clang-tidy (.clang-tidy's small profile) on the C++ files changed since
#     BASE, with the compile database of BUILD (default build/release), when that build has been
#     configured; CUDA files are left to nvcc. The compile database must list files one by one:
#     the presets (unity builds) list their batches, so configure a tree without unity first
#     (`cmake --preset asan -B build/tidy -DCMAKE_UNITY_BUILD=OFF`, then BUILD=build/tidy). About
#     10-20 s a file on the 2-core VM: CI (scripts/test.sh) runs it on the files of the commit
#     under test (--tidy HEAD~1 --no-format).
# `--fix` rewrites the files clang-format flags instead of failing; `--no-format` (after --tidy
# BASE) skips the format check.
# Usage: scripts/check-style.sh [--fix | --tidy BASE [--no-format]]   (anywhere in the tree)
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
base=""
format_check=1
case "${1:-}" in
  --fix) fix=1 ;;
  --tidy) base=${2:?--tidy needs the commit to compare with, e.g. HEAD~1}
          [ "${3:-}" != --no-format ] || format_check=0 ;;
  "") ;;
  *) echo "usage: scripts/check-style.sh [--fix | --tidy BASE [--no-format]]" >&2; exit 2 ;;
esac
build=${BUILD:-build/release}
format=${CLANG_FORMAT:-clang-format}
tidy=${CLANG_TIDY:-clang-tidy}

command -v "$format" > /dev/null || { echo "check-style: $format not found (apt install clang-format)" >&2; exit 2; }

mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
if [ "$fix" = 1 ]; then
  "$format" -i "${sources[@]}"
  echo "check-style: formatted ${#sources[@]} files"
  exit 0
fi

status=0
if [ "$format_check" = 1 ]; then
  mapfile -t unformatted < <(for f in "${sources[@]}"; do
    # The whole report, not `| grep -q`: under pipefail grep's early exit fails the pipeline
    # (clang-format's SIGPIPE) and the file went unreported.
    [ -z "$("$format" --dry-run "$f" 2>&1)" ] || echo "$f"
  done)
  if [ "${#unformatted[@]}" -gt 0 ]; then
    echo "check-style: clang-format would change ${#unformatted[@]} files (scripts/check-style.sh --fix):"
    printf '  %s\n' "${unformatted[@]}"
    status=1
  else
    echo "check-style: clang-format: ${#sources[@]} files formatted"
  fi
fi

if [ -z "$base" ]; then
  :
elif ! command -v "$tidy" > /dev/null; then
  echo "check-style: $tidy not found, clang-tidy skipped (apt install clang-tidy)"
elif [ ! -f "$build/compile_commands.json" ]; then
  echo "check-style: no $build/compile_commands.json, clang-tidy skipped (configure that build)"
elif ! git rev-parse -q --verify "$base^{commit}" > /dev/null; then
  echo "check-style: no commit $base, clang-tidy skipped"
else
  mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- '*.cc' |
    while read -r f; do grep -q "\"file\": \".*/$f\"" "$build/compile_commands.json" && echo "$f"; done)
  if [ "${#changed[@]}" -eq 0 ]; then
    echo "check-style: clang-tidy: no C++ file changed since $base"
  else
    out=$("$tidy" -p "$build" --quiet --warnings-as-errors='*' --extra-arg=-Wno-unknown-warning-option \
      "${changed[@]}" 2>&1) || status=1
    printf '%s\n' "$out" | grep -vE "warnings? generated|^Suppressed|^Use -header-filter" || true
  fi
  [ "${#changed[@]}" -eq 0 ] || echo "check-style: clang-tidy on ${#changed[@]} files changed since $base"
fi
exit $status
