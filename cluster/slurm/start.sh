#!/usr/bin/env bash
# Installs (Debian packages) and starts a one-node Slurm cluster on this machine, as root and
# without systemd: mariadb + slurmdbd (accounting: submitit polls `sacct`), munged,
# slurmctld, slurmd. Configs, logs and pids live in $SF_SLURM_STATE (/tmp/sf_hydra_slurm).
# `start.sh --two-nodes` adds two more nodes, sfn1 and sfn2, each a network namespace with
# its own hostname and a slurmd (netns.sh), in partition two_nodes; the local node stays
# alone in the default partition main, so jobs that name no partition run as before.
# Returns once every node is idle. Running it again while the cluster runs changes nothing;
# cluster/slurm/stop.sh stops exactly what this started.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$HERE/common.sh"
# shellcheck source=netns.sh
. "$HERE/netns.sh"

TIMEOUT=${SF_SLURM_TIMEOUT:-180}   # seconds for each daemon, and for the node, to come up
CLUSTER=sf_hydra
ACCOUNT=sf_hydra
PARTITION=main
NODE=$(hostname -s)
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server iproute2)
TWO_NODES=0
case "${1:-}" in
    "") ;;
    --two-nodes) TWO_NODES=1 ;;
    *) echo "usage: start.sh [--two-nodes]" >&2; exit 2 ;;
esac
# The address every node reaches slurmctld at: loopback alone, the bridge with two nodes.
CTLD_ADDR=127.0.0.1
((TWO_NODES)) && CTLD_ADDR=$NET_ROOT_ADDR

die() {
    echo "start.sh: $*" >&2
    show_logs >&2
    echo "start.sh: the daemons started so far are still running; cluster/slurm/stop.sh stops them" >&2
    exit 1
}

# Polls `$@` until it succeeds; dies as soon as daemon $1 has exited, or after $TIMEOUT s.
wait_for() {
    local daemon=$1 deadline=$((SECONDS + TIMEOUT))
    shift
    until "$@" >/dev/null 2>&1; do
        # (not live_pid: right after launch the process may not have exec'd the daemon yet)
        kill -0 "$(cut -d' ' -f1 "$PIDS/$daemon")" 2>/dev/null || die "$daemon exited during start-up"
        ((SECONDS < deadline)) || die "$daemon did not come up within ${TIMEOUT}s"
        sleep 0.5
    done
}

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    echo "installing ${missing[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

# `launch NAME [--as USER] BINARY ARGS...`: starts the daemon in the foreground of its own
# session (so no terminal or CI job control signals it), as USER if given, output in
# $LOGS/NAME.out, and records its pid with the executable that pid will run.
launch() {
    local name=$1 prefix=()
    shift
    if [[ $1 == --as ]]; then
        prefix=(setpriv --reuid="$2" --regid="$2" --init-groups)
        shift 2
    fi
    setsid "${prefix[@]}" "$@" </dev/null >"$LOGS/$name.out" 2>&1 &
    echo "$! $(realpath "$1")" >"$PIDS/$name"
}

make_state_dirs() {
    mkdir -p "$STATE" "$ETC" "$PIDS" "$LOGS" "$RUN" "$STATE/slurmctld" "$STATE/slurmd" "$STATE/mysql" "$STATE/munge"
    chmod 755 "$STATE" "$ETC"
    chmod 1777 "$LOGS" "$RUN"  # like /tmp: each daemon writes here as its own user
    chown slurm:slurm "$STATE/slurmctld"
    chown mysql:mysql "$STATE/mysql"
    chown munge:munge "$STATE/munge"
    chmod 700 "$STATE/munge"
}

# The node as slurmd detects it, with 90% of its memory so that a little fluctuation never
# drains it ("Low RealMemory").
node_line() {
    local detected mem
    detected=$(slurmd -C | head -n 1)
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$detected")
    detected=${detected/RealMemory=$mem/RealMemory=$((mem * 9 / 10))}
    echo "$detected NodeAddr=127.0.0.1 State=UNKNOWN"
    ((TWO_NODES)) || return 0
    local n
    for n in "${NET_NODES[@]}"; do  # the same cores and memory, shared: a test cluster
        echo "${detected/NodeName=$NODE /NodeName=$n } NodeAddr=$(net_addr "$n") NodeHostname=$n State=UNKNOWN"
    done
}

partition_lines() {
    if ((TWO_NODES)); then
        echo "PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"
        echo "PartitionName=$NET_PARTITION Nodes=$(IFS=,; echo "${NET_NODES[*]}") MaxTime=INFINITE State=UP"
    else
        echo "PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    fi
}

write_slurm_conf() {
    cat >"$ETC/slurm.conf" <<EOF
# Written by cluster/slurm/start.sh: no cgroups, accounting through slurmdbd.
ClusterName=$CLUSTER
SlurmctldHost=$NODE($CTLD_ADDR)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE/slurmctld
# %n: the node's name, so that the slurmds of several nodes on this machine never share a file.
SlurmdSpoolDir=$STATE/slurmd/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
# No cgroups here: track processes through /proc, bind no tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
SchedulerType=sched/backfill
# Start a submitted job within ~1 s instead of ~10 s.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
# SIGKILL 5 s after SIGTERM (submitit's job process ignores SIGTERM).
KillWait=5
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
$(node_line)
$(partition_lines)
EOF
}

write_slurmdbd_conf() {
    local password=$1
    (
        umask 077
        cat >"$ETC/slurmdbd.conf" <<EOF
# Written by cluster/slurm/start.sh.
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=slurm
LogFile=$LOGS/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$password
StorageLoc=slurm_acct_db
EOF
    )
    chown slurm:slurm "$ETC/slurmdbd.conf"
    chmod 600 "$ETC/slurmdbd.conf"
}

# sinfo, sbatch and sacct find the cluster without SLURM_CONF, unless the machine has a
# slurm.conf of its own (then it is left alone and SLURM_CONF must be exported).
link_system_conf() {
    [[ -e $SYSTEM_CONF || -L $SYSTEM_CONF ]] && return 0
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -s "$ETC/slurm.conf" "$SYSTEM_CONF"
}

sql() { mariadb --no-defaults --socket="$RUN/mysqld.sock" -uroot -e "$1"; }

start_mariadb() {
    local password=$1
    mariadb-install-db --no-defaults --user=mysql --datadir="$STATE/mysql" --skip-test-db \
        --auth-root-authentication-method=socket >"$LOGS/mariadb-install.log" 2>&1 ||
        die "mariadb-install-db failed (see $LOGS/mariadb-install.log)"
    launch mariadb /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$STATE/mysql" \
        --socket="$RUN/mysqld.sock" --pid-file="$RUN/mariadb.pid" --log-error="$LOGS/mariadb.log" \
        --skip-networking --skip-name-resolve \
        --innodb-buffer-pool-size=32M --innodb-use-native-aio=0
    wait_for "mariadb" sql "SELECT 1"
    sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
         CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$password';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

# munged must run as the munge user, with a key only it can read.
start_munged() {
    install -d -o munge -g munge -m 755 /run/munge
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chown munge:munge "$STATE/munge/munge.key"
    chmod 400 "$STATE/munge/munge.key"
    launch munged --as munge /usr/sbin/munged --foreground \
        --key-file="$STATE/munge/munge.key" --log-file="$STATE/munge/munged.log" \
        --pid-file="$STATE/munge/munged.pid" --seed-file="$STATE/munge/munged.seed"
    wait_for "munged" bash -c "munge -n | unmunge"
}

register_in_accounting() {
    sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true  # exists already after a restart
}

register_account() {
    sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="sf_hydra runs" Organization=sf_hydra >/dev/null 2>&1 || true
    sacctmgr -i add user root Account="$ACCOUNT" DefaultAccount="$ACCOUNT" >/dev/null 2>&1 || true
    sacctmgr -n -P show assoc where account="$ACCOUNT" user=root format=user | grep -q root ||
        die "sacctmgr did not register account $ACCOUNT for root"
}

ctld_up() { scontrol ping 2>/dev/null | grep -q UP; }

all_nodes() { echo "$NODE"; ((TWO_NODES)) && printf '%s\n' "${NET_NODES[@]}"; return 0; }

node_idle() { [[ "$(sinfo -h -n "$1" -o %T 2>/dev/null)" == idle ]]; }

all_idle() {
    local n
    for n in $(all_nodes); do node_idle "$n" || return 1; done
}

wait_until_idle() {
    local deadline=$((SECONDS + TIMEOUT))
    until all_idle; do
        if ((SECONDS >= deadline)); then
            sinfo -N -l >&2 || true
            sinfo -R >&2 || true
            die "the nodes $(all_nodes | tr '\n' ' ')are not all idle after ${TIMEOUT}s"
        fi
        sleep 1
    done
}

all_running() {
    local d
    for d in "${DAEMONS[@]}"; do live_pid "$d" >/dev/null || return 1; done
    for d in $(all_nodes | tail -n +2); do live_pid "slurmd-$d" >/dev/null || return 1; done
}

# The mode the running cluster was started in (0: one node, 1: --two-nodes).
running_mode() { cat "$STATE/two_nodes" 2>/dev/null || echo 0; }

main() {
    [[ $EUID -eq 0 ]] || { echo "start.sh: run as root (it installs packages and starts daemons)" >&2; exit 1; }
    local t0=$SECONDS
    install_packages
    if [[ -d $PIDS ]] && all_running && [[ "$(running_mode)" != "$TWO_NODES" ]]; then
        # Someone's tests may be using it: never restart it from here.
        echo "start.sh: a Slurm cluster runs already, in the other mode (two nodes: $(running_mode));" \
            "stop it first (cluster/slurm/stop.sh) if nobody is using it" >&2
        exit 1
    fi
    if all_running; then
        echo "Slurm cluster already running (state in $STATE)"
        wait_until_idle
        return 0
    fi
    if [[ -d $PIDS ]]; then  # what is left of a cluster that died or half started
        echo "cleaning up a previous cluster in $STATE"
        "$HERE/stop.sh"
    fi
    make_state_dirs
    echo "$TWO_NODES" >"$STATE/two_nodes"
    if ((TWO_NODES)); then
        net_in_use && die "$NET_PREFIX.0/24 is in use on this machine already: two-node mode needs it to itself"
        net_up
    fi
    local password
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    write_slurm_conf
    write_slurmdbd_conf "$password"
    link_system_conf
    start_mariadb "$password"
    start_munged
    # No TCP for the database (no port to collide with): slurmdbd's client library finds
    # the socket through MYSQL_UNIX_PORT.
    MYSQL_UNIX_PORT=$RUN/mysqld.sock launch slurmdbd /usr/sbin/slurmdbd -D
    wait_for "slurmdbd" sacctmgr -n show cluster
    register_in_accounting
    launch slurmctld /usr/sbin/slurmctld -D
    wait_for "slurmctld" ctld_up
    launch slurmd /usr/sbin/slurmd -D
    local n
    if ((TWO_NODES)); then
        for n in "${NET_NODES[@]}"; do launch_in_node "$n"; done
    fi
    register_account
    wait_until_idle
    echo "Slurm cluster $CLUSTER up in $((SECONDS - t0))s: node $NODE idle, partition $PARTITION, account $ACCOUNT (state in $STATE)"
    if ((TWO_NODES)); then
        echo "  and nodes ${NET_NODES[*]} idle in partition $NET_PARTITION, on bridge $NET_BRIDGE ($NET_PREFIX.0/24)"
    fi
}

main "$@"
