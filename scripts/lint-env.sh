# Sourced, not run: makes the next builds lint as they compile. Clippy's
# driver becomes the compiler wrapper of the workspace's own crates, with
# `-D warnings`, so they are checked as `cargo clippy --all-targets -- -D
# warnings` would check them while dependencies compile once, with code
# generation, instead of once more in check mode (bench/results/ci.md).
# Used by .ci/run (the workspace's test build) and scripts/test-python.sh
# (pip's build of the Python extension).
RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)"
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
