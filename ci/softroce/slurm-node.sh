# slurm-node.sh HEAD:PORT SLURM_CONF MUNGE_SOCKET: make this guest a Slurm compute node of the slurmctld at
# HEAD:PORT. Run by the host through the agent (ci/softroce/slurm-up.sh) once slurmctld is up: munged with
# the cluster's key (handed over by fw_cfg at boot), then slurmd, which fetches its configuration from
# slurmctld (configless, as many sites run their nodes) and finds its NodeName from the host name.
# The head's paths of slurm.conf and of the munge socket are made to work here too (the configuration
# names the socket; jobs inherit SLURM_CONF from the host's sbatch), as a cluster's shared /etc/slurm.
set -e
PATH=/usr/sbin:/usr/bin:/sbin:/bin
head=$1 conf=$2 socket=$3
[ -s /etc/munge/munge.key ] || { echo "no munge key (the host gives it as fw_cfg opt/org.ibrepro/munge.key)" >&2; exit 1; }
mkdir -p /run/munge /var/lib/munge /var/log/munge /var/spool/slurmd /var/log/slurm "$(dirname "$socket")" "$(dirname "$conf")"
chmod 700 /etc/munge /var/lib/munge /var/log/munge
chmod 755 "$(dirname "$socket")"
chmod 400 /etc/munge/munge.key
if [ ! -S "$socket" ]; then
  munged --force --socket="$socket"   # --force: root-owned key and directories, as all in this guest
fi
# slurmd asks for its configuration through the default socket, then uses the configured one
[ "$socket" = /run/munge/munge.socket.2 ] || ln -sfn "$socket" /run/munge/munge.socket.2
munge -n | unmunge >/dev/null
ln -sfn /run/slurm/conf/slurm.conf "$conf"   # slurmd's cache of the configuration it fetched
slurmd --conf-server "$head"   # daemonizes; fails if slurmctld does not hand out the configuration
