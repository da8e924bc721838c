# Source this file (`. bench/parts.sh`) in a budgeted bench script (bench/gpu_check.sh,
# bench/gpu_claims.sh): `say TEXT` prints and logs a line, `part NAME SECONDS COMMAND...` runs COMMAND
# under `timeout` for at most SECONDS and never past the script's deadline, logs its output and
# adds its verdict to SUMMARY. The script sets BUDGET (seconds, counted against $SECONDS), LOG (the
# log file), SUMMARY=() and a function `part_left_out NAME` that prints why a part is left out
# (nothing: it runs); optional: PART_TIMEOUT_NOTE (added to a timed-out part's verdict).

say() { echo "$*" | tee -a "$LOG"; }

part() {
    local name=$1 wanted=$2
    shift 2
    local why
    why=$(part_left_out "$name")
    if [ -n "$why" ]; then
        [ "$why" != silent ] && say "=== $name: left out ($why)" && SUMMARY+=("$name: left out")
        return 0
    fi
    local left=$((BUDGET - SECONDS))
    local limit=$((wanted < left - 5 ? wanted : left - 5))
    if [ "$limit" -lt 15 ]; then
        say "=== $name: skipped, $left s left of the budget"
        SUMMARY+=("$name: skipped (out of time)")
        return 0
    fi
    say ""
    say "=== $name (limit ${limit} s, ${SECONDS} s elapsed): $*"
    local started=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local status=${PIPESTATUS[0]}
    local verdict="ok"
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        verdict="TIMED OUT${PART_TIMEOUT_NOTE:+ ($PART_TIMEOUT_NOTE)}"
    elif [ "$status" -ne 0 ]; then
        verdict="FAILED (exit $status)"
    fi
    SUMMARY+=("$name: $verdict in $((SECONDS - started)) s")
    say "=== $name: $verdict"
    return 0
}
