#!/usr/bin/env bash
# Stops the cluster cluster/slurm/start.sh started: each daemon by the pid start.sh
# recorded (SIGTERM, then SIGKILL after a grace period), then removes the two-node mode's
# namespaces, links and addresses (netns.sh), the state folder and the /etc/slurm/slurm.conf
# link start.sh made. Nothing running is fine.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"
# shellcheck source=netns.sh
. "$HERE/netns.sh"

GRACE=${SF_SLURM_STOP_GRACE:-15}  # seconds a daemon gets to exit on SIGTERM

# SIGTERM, wait, SIGKILL: daemon $1, if it is still the process start.sh recorded.
stop_daemon() {
    local name=$1 pid deadline
    pid=$(live_pid "$name") || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    deadline=$((SECONDS + GRACE))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "stop.sh: $name ($pid) ignored SIGTERM for ${GRACE}s: SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "stopped $name ($pid)"
}

# Jobs still in the cluster die with it: cancel them while slurmctld can, and give their
# slurmstepd processes a moment to clean up.
cancel_jobs() {
    live_pid slurmctld >/dev/null || return 0
    local jobs
    jobs=$(squeue -h -o %A 2>/dev/null | sort -u) || return 0
    [[ -n $jobs ]] || return 0
    echo "cancelling jobs: $(echo $jobs)"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    local deadline=$((SECONDS + GRACE))
    while [[ -n "$(squeue -h -o %A 2>/dev/null)" ]] && ((SECONDS < deadline)); do sleep 0.5; done
}

main() {
    [[ $EUID -eq 0 ]] || { echo "stop.sh: run as root" >&2; exit 1; }
    cancel_jobs
    local i f
    for f in "$PIDS"/slurmd-*; do  # the namespace nodes' slurmds (two-node mode)
        [[ -f $f ]] && stop_daemon "$(basename "$f")"
    done
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
        stop_daemon "${DAEMONS[i]}"
    done
    if [[ -L $SYSTEM_CONF && "$(readlink "$SYSTEM_CONF")" == "$ETC/slurm.conf" ]]; then
        rm -f "$SYSTEM_CONF"
    fi
    net_down  # after the slurmds inside: a namespace goes once its last process has
    if [[ -d $STATE ]]; then
        rm -rf "$STATE"
        echo "removed $STATE"
    fi
}

main "$@"
