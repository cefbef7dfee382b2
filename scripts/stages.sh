# Sourced by .ci/run and scripts/test.sh: run every stage even when an
# earlier one fails, then print one table of stage, seconds and result and
# fail if any stage failed. A nested script (the test command inside CI)
# adds its rows to its caller's table, indented.
#
#   source scripts/stages.sh
#   stage "format" cargo fmt --all -- --check
#   stage "tests" bash scripts/test.sh
#   stages_report        # the table; returns 1 if any stage failed

# Rows are "depth<TAB>name<TAB>seconds<TAB>status", one file per outermost run.
if [ -z "${NEARDUP_STAGES_FILE:-}" ]; then
    NEARDUP_STAGES_FILE=$(mktemp "${TMPDIR:-/tmp}/neardup-stages.XXXXXX")
    NEARDUP_STAGES_OWNER=$$
    export NEARDUP_STAGES_FILE
    export NEARDUP_STAGES_DEPTH=0
else
    export NEARDUP_STAGES_DEPTH=$((${NEARDUP_STAGES_DEPTH:-0} + 1))
fi

# stage NAME COMMAND [ARGS...]: runs the command and records how it ended.
# Never fails itself. The command runs in a background subshell so that
# `set -e` holds inside it (bash ignores -e in a function or subshell whose
# status is tested, as `cmd || rc=$?` would); `wait` returns its status.
stage() {
    local name=$1
    shift
    echo "== $name"
    local started=$SECONDS rc=0
    ("$@") </dev/null &
    wait $! || rc=$?
    printf '%s\t%s\t%s\t%s\n' "$NEARDUP_STAGES_DEPTH" "$name" $((SECONDS - started)) "$rc" >>"$NEARDUP_STAGES_FILE"
    [ "$rc" -eq 0 ] || echo "== $name FAILED (exit $rc)"
    return 0
}

# stages_report: the table of this run's stages (the outermost run also
# prints its nested ones); returns 1 if any stage of this run failed.
stages_report() {
    local failed=0 depth name secs rc
    if [ "${NEARDUP_STAGES_OWNER:-}" = "$$" ]; then
        echo
        printf '%-40s %8s  %s\n' "stage" "seconds" "result"
        while IFS=$'\t' read -r depth name secs rc; do
            local indent=""
            [ "$depth" -gt 0 ] && indent=$(printf '%*s' $((depth * 2)) "")
            local result="ok"
            [ "$rc" -eq 0 ] || result="FAILED (exit $rc)"
            printf '%-40s %8s  %s\n' "$indent$name" "$secs" "$result"
        done <"$NEARDUP_STAGES_FILE"
    fi
    while IFS=$'\t' read -r depth name secs rc; do
        if [ "$depth" = "$NEARDUP_STAGES_DEPTH" ] && [ "$rc" -ne 0 ]; then
            failed=1
        fi
    done <"$NEARDUP_STAGES_FILE"
    [ "${NEARDUP_STAGES_OWNER:-}" = "$$" ] && rm -f "$NEARDUP_STAGES_FILE"
    return $failed
}
