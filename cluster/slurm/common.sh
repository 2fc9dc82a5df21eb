# Shared by start.sh and stop.sh (sourced): where the cluster's state lives and how the
# daemons that start.sh launched are tracked. Every daemon runs in the foreground under
# setsid, so the pid start.sh records is the daemon's own; next to it the executable, so a
# pid the kernel has since reused is never mistaken for ours.

STATE=$(realpath -m "${SF_SLURM_STATE:-/tmp/sf_hydra_slurm}")
ETC=$STATE/etc        # slurm.conf, slurmdbd.conf
PIDS=$STATE/pids      # one file per daemon: "<pid> <executable>"
LOGS=$STATE/log
RUN=$STATE/run        # pid files and sockets the daemons write themselves
DAEMONS=(mariadb munged slurmdbd slurmctld slurmd)  # start order; stop.sh goes backwards
SYSTEM_CONF=/etc/slurm/slurm.conf  # where sinfo/sbatch/sacct look without SLURM_CONF
export SLURM_CONF=$ETC/slurm.conf

# The recorded pid of daemon $1 if that process still runs the recorded executable.
live_pid() {
    local pid exe
    read -r pid exe 2>/dev/null <"$PIDS/$1" || return 1
    [[ -n $pid && "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]] && echo "$pid"
}

recorded() { [[ -f $PIDS/$1 ]]; }

# The last lines of every log the cluster writes (for failure messages).
show_logs() {
    local f
    for f in "$LOGS"/*.log "$LOGS"/*.out "$STATE"/munge/*.log; do
        [[ -s $f ]] || continue
        echo "----- $f (last 25 lines)"
        tail -n 25 "$f"
    done
}
