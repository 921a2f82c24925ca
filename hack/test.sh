#!/usr/bin/env bash
# The whole test suite: installs what is missing, then unit, integration and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/install-deps.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --workspace --bins --tests
cargo test --workspace -- --test-threads="${K1S_TEST_THREADS:-2}"
