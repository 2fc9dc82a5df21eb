#!/usr/bin/env bash
# One namespace node of the two-node cluster (`start.sh --two-nodes`) lost and brought back:
#
#   node.sh kill sfn2      # SIGKILL every process of node sfn2: its slurmd, the jobs' slurmstepd,
#                          # their tasks and the tasks' children, as if the host lost power; then
#                          # drains it, so that no job lands on it meanwhile (Slurm itself would see
#                          # the loss only after SlurmdTimeout, minutes)
#   node.sh restart sfn2   # its slurmd again (as start.sh starts it), the drain lifted; returns
#                          # once Slurm sees the node answer again
#
# A node's processes are those in its network namespace (/proc/<pid>/ns/net is the namespace of
# /run/netns/sfh-<node>): every process a node's slurmd starts inherits it, whatever its session
# or parent. What a lost node does to a run: README.md, "Two nodes".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"
# shellcheck source=netns.sh
. "$HERE/netns.sh"

TIMEOUT=${SF_SLURM_TIMEOUT:-60}  # seconds for the node to answer Slurm again after `restart`

usage() { echo "usage: node.sh kill|restart <node: ${NET_NODES[*]}>" >&2; exit 2; }

# The pids of the processes in node $1's network namespace (none: nothing printed).
node_pids() {
    local ns pid
    ns="net:[$(stat -L -c %i "$NETNS_DIR/$(net_ns "$1")")]"
    for pid in /proc/[0-9]*; do
        [[ "$(readlink "$pid/ns/net" 2>/dev/null)" == "$ns" ]] && echo "${pid#/proc/}"
    done
    return 0
}

# SIGKILLs node $1's processes, again until none is left (a dying slurmstepd may still fork).
kill_node() {
    local node=$1 pids killed=0
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(node_pids "$node")
        [[ -n $pids ]] || break
        # shellcheck disable=SC2086  # one pid a word
        kill -KILL $pids 2>/dev/null || true
        killed=$((killed + $(wc -w <<<"$pids")))
        sleep 0.2
    done
    pids=$(node_pids "$node")
    [[ -z $pids ]] || { echo "node.sh: node $node still has processes after 10 rounds of SIGKILL: $pids" >&2; exit 1; }
    scontrol update NodeName="$node" State=DRAIN Reason="lost (cluster/slurm/node.sh kill)"
    echo "node $node lost: $killed processes killed (SIGKILL), its slurmd among them; drained"
}

# Slurm's state of node $1 (scontrol: IDLE, MIXED, IDLE+NOT_RESPONDING, DOWN+NOT_RESPONDING, ...).
node_state() { scontrol show node "$1" 2>/dev/null | sed -n 's/.*State=\([^ ]*\).*/\1/p'; }

# Starts node $1's slurmd again and waits until Slurm sees the node answer (not DOWN, not NOT_RESPONDING).
restart_node() {
    local node=$1 deadline=$((SECONDS + TIMEOUT)) state
    if live_pid "slurmd-$node" >/dev/null || [[ -n "$(node_pids "$node")" ]]; then
        echo "node.sh: node $node runs already (processes $(node_pids "$node" | tr '\n' ' '))" >&2
        exit 1
    fi
    launch_in_node "$node"
    state=$(node_state "$node")
    until [[ -n $state && $state != *DOWN* && $state != *NOT_RESPONDING* && $state != *DRAIN* ]]; do
        kill -0 "$(cut -d' ' -f1 "$PIDS/slurmd-$node")" 2>/dev/null || {
            tail -n 20 "$LOGS/slurmd-$node.log" "$LOGS/slurmd-$node.out" >&2 || true
            echo "node.sh: the slurmd of node $node exited during start-up" >&2; exit 1; }
        ((SECONDS < deadline)) || { echo "node.sh: node $node is $state after ${TIMEOUT}s" >&2; exit 1; }
        if [[ $state == *DRAIN* && $state != *NOT_RESPONDING* ]]; then  # answering again: lift kill's drain
            scontrol update NodeName="$node" State=RESUME
        fi
        sleep 0.5
        state=$(node_state "$node")
    done
    echo "node $node back: its slurmd runs again (pid $(live_pid "slurmd-$node")), Slurm says $state"
}

main() {
    (($# == 2)) || usage
    local node=$2
    net_addr "$node" >/dev/null || usage
    [[ $EUID -eq 0 ]] || { echo "node.sh: run as root" >&2; exit 1; }
    [[ "$(cat "$STATE/two_nodes" 2>/dev/null)" == 1 && -e $NETNS_DIR/$(net_ns "$node") ]] ||
        { echo "node.sh: no two-node cluster runs here (cluster/slurm/start.sh --two-nodes)" >&2; exit 1; }
    case $1 in
        kill) kill_node "$node" ;;
        restart) restart_node "$node" ;;
        *) usage ;;
    esac
}

main "$@"
