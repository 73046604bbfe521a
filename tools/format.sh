#!/bin/sh
# The tree's C++ style is .clang-format (Debian 12's clang-format 14). Usage:
#   tools/format.sh                  format every tracked C++ file in place
#   tools/format.sh --check          exit 1 if any tracked C++ file differs from .clang-format (CI)
#   tools/format.sh --check BASE     exit 1 if lines changed since BASE differ (before a commit)
# Generated tables (*.inc) keep their generator's layout.
set -eu
cd "$(dirname "$0")/.."
files() { git ls-files '*.cpp' '*.h' | grep -v '^tools/peers/'; }
if [ "${1:-}" = "--check" ]; then
  if [ -n "${2:-}" ]; then
    out=$(git clang-format --quiet --diff "$2" -- $(files) 2>&1 || true)
    case "$out" in
      "" | "no modified files to format" | "clang-format did not modify any files") exit 0 ;;
    esac
    printf '%s\n' "$out"
    echo "format: the changed lines above differ from .clang-format (run: git clang-format $2)" >&2
    exit 1
  fi
  files | xargs clang-format --dry-run -Werror 2>&1 | head -40 | grep . && {
    echo "format: files differ from .clang-format (run: tools/format.sh)" >&2
    exit 1
  }
  echo "format: every C++ file follows .clang-format"
  exit 0
fi
files | xargs clang-format -i
