#!/usr/bin/env bash
# tests/package/check.sh PREFIX MODEL: checks an installed onnxforge (an install prefix such as
# <root>/usr, from `cmake --install` or a .deb extracted with dpkg-deb -x) without anything from
# the build tree: the command and its man page, `import onnxforge` with Debian's python3
# (PYTHONPATH into the prefix), and a C++ consumer project built with find_package(onnxforge).
set -euo pipefail
prefix=$(realpath "$1")
model=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$prefix/bin/onnxforge" --help | grep -q "optimize"
"$prefix/bin/onnxforge" --version
if readelf -d "$prefix/bin/onnxforge" | grep -qiE "rpath|runpath"; then
  echo "check: $prefix/bin/onnxforge carries an RPATH" >&2
  exit 1
fi
"$prefix/bin/onnxforge" optimize "$model" -o "$work/cli.onnx" --verify-seeds 2 >/dev/null
gzip -dc "$prefix/share/man/man1/onnxforge.1.gz" | grep -q '^\.SS optimize'

site="$prefix/lib/python3/dist-packages"
PYTHONPATH="$site" /usr/bin/python3 - "$model" "$site" <<'PY'
import sys, onnxforge
model, site = sys.argv[1], sys.argv[2]
assert onnxforge.__file__.startswith(site), onnxforge.__file__
out, report = onnxforge.optimize(open(model, "rb").read(), seeds=2)
assert report.verdict == "pass" and report.nodes_after < report.nodes_before, report
assert onnxforge.inspect(out)["nodes"] == report.nodes_after
print(f"check: python {sys.version.split()[0]}: import onnxforge {onnxforge.__version__} from {site}: "
      f"nodes {report.nodes_before} -> {report.nodes_after}, max_diff {report.max_diff}")
PY
PYTHONPATH="$site" /usr/bin/python3 -m onnxforge inspect "$model" --json >/dev/null

cmake -S "$here/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
lib=$(ldd "$work/consumer/consumer" | awk '/libonnxforge/ {print $3}')
case "$lib" in
  "$prefix"/*) ;;
  *) echo "check: the consumer links '$lib', not the library under $prefix" >&2; exit 1 ;;
esac
"$work/consumer/consumer" "$model" "$work/out"
echo "check: $prefix: command, man page, Python module and C++ package work"
