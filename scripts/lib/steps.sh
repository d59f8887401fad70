# shellcheck shell=bash
# scripts/lib/steps.sh - sourced by the one-call device scripts (gpu-check.sh,
# cpu-scaling.sh): a timed log of steps and a deadline for optional ones, and
# their staging's size check.
# The caller sets t0 (the run's start, date +%s), deadline (seconds from t0)
# and steps_name (the script's name in messages, and its knob's prefix).

tprev=${t0:?}
# stamp MESSAGE: "== elapsed s (previous step s): MESSAGE"
stamp() {
    local now
    now=$(date +%s)
    echo "== $((now - t0)) s (previous step $((now - tprev)) s): $*"
    tprev=$now
}
# fits SECONDS WHAT: whether a step of about SECONDS still ends before the deadline (else a line saying so)
fits() {
    local left=$((${deadline:?} - ($(date +%s) - t0)))
    [ "$left" -ge "$1" ] && return 0
    echo "${steps_name:?}: SKIPPED $2: $left s left before the deadline ($deadline s), it needs ~$1 s"
    return 1
}

# carry_over: whether the work tree a device run copies (tracked files and untracked unignored
# ones) and .gpu-shared pass 62 MiB together (a run carries at most 64); sets tree_mib, shared_mib
carry_over() {
    local tree total
    tree=$( (git ls-files -z; git ls-files -z -o --exclude-standard) | xargs -0 -r stat -c %s 2>/dev/null |
        awk '{ s += $1 } END { print s + 0 }')
    total=$(du -sb .gpu-shared | cut -f1)
    # shellcheck disable=SC2034 # read by the caller's message
    tree_mib=$((tree / 1048576)) shared_mib=$((total / 1048576))
    [ $((tree + total)) -gt $((62 * 1024 * 1024)) ]
}
