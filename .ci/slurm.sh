#!/usr/bin/env bash
# Make a real three-node Slurm cluster run on this host for the slurm tests (called by scripts/test.sh in CI).
#
# Idempotent: installs Debian's slurmctld, slurmd, slurm-client and munge if missing, writes
# /etc/slurm/slurm.conf and cgroup.conf (only when they differ, then restarting daemons that run), starts munged as user munge,
# slurmctld, and one `slurmd -N nX` per node (n1..n3: all this host, 127.0.0.1, ports 17001-17003),
# each only if it is not running, waits (60 s at most) until `sinfo` shows three idle nodes, and
# resumes nodes a former run left drained or down. No systemd, no slurmdbd (tfcluster does not need sacct).
set -euo pipefail

packages=(slurmctld slurmd slurm-client munge)
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
    || ! command -v munged >/dev/null; then
    echo "slurm.sh: installing ${packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
conf=$(cat <<'EOF'
# Written by tfcluster's .ci/slurm.sh: three nodes on one host, for tests.
ClusterName=tfcluster
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
# Pending jobs are tried every 5 s (defaults: the main loop every 60 s, backfill every 30 s): a requeued job may start
# once its begin time passed, and nothing but these loops notices that; the requeue tests waited up to 30 s more.
SchedulerParameters=bf_interval=5,sched_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldPort=6817
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
KillWait=10
MinJobAge=60
# A requeued job waits cred_expire + 1 s before it may start again (Slurm's default 120 s): shortened so that the
# requeue tests wait ~31 s, not two minutes, and never start a job before its old credential expired.
AuthInfo=cred_expire=30
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
Waittime=0
JobRequeue=1
NodeName=n[1-3] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[17001-17003] CPUs=16 RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
)
cgroup=$'CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n'
changed=
[ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" = "$conf" ] || { printf '%s\n' "$conf" >/etc/slurm/slurm.conf; changed=1; }
[ "$(cat /etc/slurm/cgroup.conf 2>/dev/null)"$'\n' = "$cgroup" ] || { printf '%s' "$cgroup" >/etc/slurm/cgroup.conf; changed=1; }
if [ -n "$changed" ] && pgrep -x 'slurmctld|slurmd' >/dev/null; then
    echo "slurm.sh: the configuration changed: restarting slurmctld and slurmd"
    pkill -x 'slurmctld|slurmd' || true
    for _ in $(seq 30); do pgrep -x 'slurmctld|slurmd' >/dev/null || break; sleep 1; done
fi

running() { pgrep -x "$1" -a | grep -q -- "$2"; }

if ! pgrep -x munged >/dev/null; then
    echo "slurm.sh: starting munged"
    mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
    [ -f /etc/munge/munge.key ] || { mungekey --create >/dev/null 2>&1 || /usr/sbin/create-munge-key -f; }
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    runuser -u munge -- munged
fi
if ! pgrep -x slurmctld >/dev/null; then
    echo "slurm.sh: starting slurmctld"
    slurmctld
fi
for node in n1 n2 n3; do
    mkdir -p "/var/spool/slurmd/$node"
    if ! running slurmd "-N $node"; then
        echo "slurm.sh: starting slurmd -N $node"
        slurmd -N "$node"
    fi
done

for _ in $(seq 60); do
    idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(idle|mix|alloc)$/' | wc -l || true)
    [ "$idle" -ge 3 ] && break
    scontrol update nodename=n[1-3] state=resume >/dev/null 2>&1 || true
    sleep 1
done
sinfo -N
[ "$idle" -ge 3 ] || { echo "slurm.sh: the three nodes did not come up"; tail -20 /var/log/slurm/slurmctld.log; exit 1; }
echo "slurm.sh: three Slurm nodes ready"
