#!/bin/sh
# Install the peers' npm dependencies (onnxruntime-node, CPU) into tools/peers/node_modules.
# Idempotent and quiet: does nothing when the locked version is already installed.
# ONNXRUNTIME_NODE_INSTALL=skip stops onnxruntime-node's postinstall from downloading GPU
# libraries (the CPU binary ships inside the npm package).
set -eu
cd "$(dirname "$0")"
want=$(node -p "require('./package-lock.json').packages['node_modules/onnxruntime-node'].version")
have=$(node -p "try { require('./node_modules/onnxruntime-node/package.json').version } catch (e) { '' }")
if [ "$want" = "$have" ] && node -e "require('onnxruntime-node')" >/dev/null 2>&1; then
  exit 0
fi
ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error >/dev/null
node -e "require('onnxruntime-node')"
