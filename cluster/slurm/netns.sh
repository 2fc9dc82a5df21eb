# shellcheck shell=bash
# The two-node mode's network (sourced by start.sh, stop.sh and node.sh, after common.sh): two more
# "hosts" on this machine, each a network namespace with a hostname of its own, joined to the
# root namespace by a bridge:
#
#   root namespace: bridge sfh-br 10.87.0.1/24 (slurmctld's address for every node)
#     |-- veth sfh-sfn1 <-> sfh0 10.87.0.2/24 in namespace sfh-sfn1 (node sfn1)
#     `-- veth sfh-sfn2 <-> sfh0 10.87.0.3/24 in namespace sfh-sfn2 (node sfn2)
#
# A bridge (not one veth pair per node routed through the root namespace) so that the nodes
# reach each other without ip_forward, a machine-wide setting we leave alone. Only these
# addresses are used, on links created here; no route leaves the bridge (the namespaces
# have no default route), and stop.sh deletes all of it.

NET_NODES=(sfn1 sfn2)                      # Slurm's node names, and the namespaces' hostnames
NET_PREFIX=10.87.0                         # a /24 nothing on this machine uses (checked first)
NET_BRIDGE=sfh-br
NET_ROOT_ADDR=$NET_PREFIX.1                # the root namespace's address on the bridge
NET_IF=sfh0                                # each node's interface, inside its namespace
NET_PARTITION=two_nodes                    # the partition of the two namespace nodes
NETNS_DIR=/run/netns                       # where `ip netns add` keeps its namespaces

net_ns() { echo "sfh-$1"; }                # the namespace (and root-side veth) of node $1
net_addr() {                               # node $1's address: sfn1 .2, sfn2 .3, ...
    local i
    for i in "${!NET_NODES[@]}"; do
        [[ ${NET_NODES[i]} == "$1" ]] && { echo "$NET_PREFIX.$((i + 2))"; return 0; }
    done
    return 1
}

# /etc/hosts as node $1 sees it (start.sh bind-mounts it over /etc/hosts in the node's own
# mount namespace; the machine's file is untouched): the other nodes at their bridge
# addresses, its own name at 127.0.0.1, the way this machine's /etc/hosts has its own name
# (and Debian's installer puts it at 127.0.1.1). So a rank that asked its hostname for the
# address to advertise would get loopback, as on many real clusters: the app must pick the
# interface that reaches the other nodes (sf_hydra.app.ranks.use_interface_to_peers).
net_hosts_file() {
    local self=$1 n
    echo "127.0.0.1 localhost"
    echo "127.0.0.1 $self"
    for n in "${NET_NODES[@]}"; do
        [[ $n == "$self" ]] || echo "$(net_addr "$n") $n"
    done
}

# `launch_in_node NODE`: the slurmd of namespace node NODE, as start.sh's launch() starts a daemon, inside the
# node's network namespace (nsenter, not `ip netns exec`: that remounts /sys, and slurmd
# then fails on cgroups), with a UTS namespace for its hostname and a mount namespace in
# which the node's hosts file replaces /etc/hosts (the jobs' processes inherit all three).
launch_in_node() {
    local node=$1
    # shellcheck disable=SC2016  # $1 and $2 are bash -c's own arguments, expanded inside
    setsid nsenter --net="$NETNS_DIR/$(net_ns "$node")" unshare --uts --mount --propagation private \
        bash -c 'hostname "$1" && mount --bind "$2" /etc/hosts && exec /usr/sbin/slurmd -D -N "$1"' \
        _ "$node" "$ETC/hosts.$node" </dev/null >>"$LOGS/slurmd-$node.out" 2>&1 &
    # nsenter, unshare and bash each exec the next: the pid becomes slurmd's own
    echo "$! $(realpath /usr/sbin/slurmd)" >"$PIDS/slurmd-$node"
}

net_in_use() { ip -o -4 addr show | grep -q " inet $NET_PREFIX\."; }

net_up() {
    local n ns addr
    # ip netns add creates /run/netns and makes it a mount point: note what it adds, so that
    # stop.sh removes it again.
    [[ -d $NETNS_DIR ]] || touch "$STATE/netns-dir-ours"
    mountpoint -q "$NETNS_DIR" 2>/dev/null || touch "$STATE/netns-mount-ours"
    ip link add "$NET_BRIDGE" type bridge
    ip addr add "$NET_ROOT_ADDR/24" dev "$NET_BRIDGE"
    ip link set "$NET_BRIDGE" up
    for n in "${NET_NODES[@]}"; do
        ns=$(net_ns "$n")
        addr=$(net_addr "$n")
        ip netns add "$ns"
        ip link add "$ns" type veth peer name "$NET_IF" netns "$ns"
        ip link set "$ns" master "$NET_BRIDGE"
        ip link set "$ns" up
        ip -n "$ns" addr add "$addr/24" dev "$NET_IF"
        ip -n "$ns" link set "$NET_IF" up
        ip -n "$ns" link set lo up  # 127.0.0.1 inside the node (its own hostname resolves there)
        net_hosts_file "$n" >"$ETC/hosts.$n"
    done
}

# Removes what net_up created, whatever part of it exists (deleting a namespace deletes
# the veth end inside it, and with it the pair).
net_down() {
    local n ns removed=()
    for n in "${NET_NODES[@]}"; do
        ns=$(net_ns "$n")
        if [[ -e $NETNS_DIR/$ns ]] && ip netns del "$ns"; then removed+=("namespace $ns"); fi
        # (the namespace's end of the pair takes this end with it, a moment later)
        if ip link del "$ns" 2>/dev/null; then removed+=("link $ns"); fi
    done
    if ip link del "$NET_BRIDGE" 2>/dev/null; then removed+=("bridge $NET_BRIDGE with $NET_ROOT_ADDR"); fi
    if [[ -f $STATE/netns-mount-ours && -z "$(ls -A "$NETNS_DIR" 2>/dev/null)" ]] && umount "$NETNS_DIR"; then
        removed+=("mount $NETNS_DIR")
    fi
    if [[ -f $STATE/netns-dir-ours ]] && rmdir "$NETNS_DIR" 2>/dev/null; then removed+=("folder $NETNS_DIR"); fi
    ((${#removed[@]} == 0)) || echo "removed ${removed[*]}"
}
