"""How a check's processes are placed and bound: the one home of binding and exclusivity, per launcher and MPI.

The papers ran one process per node (or two) on dedicated nodes; a measurement whose ranks float between cores,
share a core with another busy poller, or sit on the socket away from the HCA measures the scheduler. So every
performance check asks for whole nodes (``exclusive_access``) and binds each rank to a core, the way its
launcher and MPI library spell it:

=================  ================================================================================
launcher / MPI     options or variables
=================  ================================================================================
srun               one rank per node: ``--cpu-bind=map_ldom:<node>``, the NUMA node of the MPI rail's HCA;
                   several: ``--cpu-bind=map_cpu:`` CPUs of its ``local_cpulist``, read on the node
                   (:func:`near_cpus_commands`); ``--cpu-bind=cores`` where neither is known; client/server
                   jobs: ``--kill-on-bad-exit=1``, ``--whole --cpu-bind=none`` (the pair runner binds each
                   side near its device itself)
Open MPI mpirun    ``--bind-to core``
MPICH (hydra)      ``-bind-to core``
Intel MPI          ``I_MPI_PIN=1``, ``I_MPI_PIN_DOMAIN=core`` (its mpirun takes no binding option)
MVAPICH2           ``MV2_ENABLE_AFFINITY=1``, ``MV2_CPU_BINDING_LEVEL=core`` under its own launchers
                   (mpirun_rsh, hydra's mpirun/mpiexec); under srun, srun binds and ``MV2_ENABLE_AFFINITY=0``
=================  ================================================================================

One binder per job: MVAPICH2 binds its ranks by default (``MV2_ENABLE_AFFINITY`` defaults to 1), on top of whatever
srun's ``--cpu-bind`` did, and its own map need not be srun's (``map_ldom`` near the HCA). So wherever MVAPICH2 is not
the binder (under srun, in a layout left unbound, in a job that binds its own processes) its affinity is turned off,
and the recorded binding names the one that binds.

Which MPI an environment has comes from its features (``openmpi``, ``mpich``, ``impi``, ``mvapich2``); an
environment that names none is not bound by MPI options (only srun binds it), and the recorded binding says so.
A layout with more ranks than cores (oversubscribed on purpose, e.g. the memory benchmark) is never bound.
The client/server runner (:mod:`ibrepro.pair`) pins its own processes near their devices.

Each MPI case also runs on one rail (:func:`partition_rail`, :data:`ONE_RAIL`): the papers measured one port, and
a node with several HCAs would otherwise have the MPI spread over them or choose one by its own rule. The rail is
recorded with the case (``mpi_rail``), and the report's "limit now" is that rail's. Checks that set their own rails
(the MVAPICH2 multi-rail policies) opt out.
"""

import os
import re

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable

from .. import catalog, mpi_transport, verdict

#: Launchers that are srun (ReFrame's registered names).
SRUN = ('srun', 'srunalloc')

#: Launchers whose ranks are simulated (SimGrid's smpirun, :mod:`ibrepro.simulated`): no core to bind them to.
SIMULATED = ('smpirun',)

#: MPI launchers whose binding syntax depends on the environment's MPI.
MPI_LAUNCHERS = ('mpirun', 'mpiexec', 'mpirun-openmpi', 'mpirun-intelmpi')

#: MPI library feature -> (launcher options, environment variables) that bind each rank to a core.
MPI_BINDING = {
    'openmpi': (['--bind-to', 'core'], {}),
    'mpich': (['-bind-to', 'core'], {}),
    'impi': ([], {'I_MPI_PIN': '1', 'I_MPI_PIN_DOMAIN': 'core'}),
    'mvapich2': ([], {'MV2_ENABLE_AFFINITY': '1', 'MV2_CPU_BINDING_LEVEL': 'core'}),
}

#: MPI library feature -> environment variables that keep the library from binding ranks by itself (where it would
#: by default): set wherever another binder, or none, is the policy.
MPI_NO_BINDING = {
    'mvapich2': {'MV2_ENABLE_AFFINITY': '0'},
}


def mpi_family(environ_features):
    """The MPI library an environment declares (a key of :data:`MPI_BINDING`), or None."""
    # mvapich2 first: an MVAPICH2 environment may also say mpich (it is MPICH-derived)
    for family in ('mvapich2', 'impi', 'openmpi', 'mpich'):
        if family in environ_features:
            return family
    return None


#: The file a job writes how srun bound its ranks on the node, when that is decided there (:func:`near_cpus_commands`).
APPLIED_BINDING = 'binding-applied.txt'


def near_cpus_commands(device, ranks, sysfs='/sys'):
    """Job-script lines that set ``$ibrepro_bind`` to srun's binding of ``ranks`` ranks per node near ``device``:
    ``map_cpu:`` the first ``ranks`` CPUs of its ``local_cpulist`` (the CPUs of its socket, physical cores first as
    Linux numbers them), else ``cores`` (the lowest cores: the kernel does not list them, or too few), said on
    stderr; what was applied goes to :data:`APPLIED_BINDING`."""
    ranks = int(ranks)
    expand = ('{for (i = 1; i <= NF; i++) {split($i, r, "-"); if (r[2] == "") r[2] = r[1]; '
              'for (c = r[1] + 0; c <= r[2] + 0 && k < n; c++) out = out (k++ ? "," : "") c}} '
              'END {if (k == n) print out}')
    return [f"ibrepro_cpus=$(awk -F, -v n={ranks} '{expand}' {sysfs}/class/infiniband/{device}/device/local_cpulist "
            "2>/dev/null)",
            'if [ -n "$ibrepro_cpus" ]; then ibrepro_bind=map_cpu:$ibrepro_cpus; else ibrepro_bind=cores; '
            f'echo "ibrepro: {device} lists no {ranks} CPUs of its own (local_cpulist): ranks bound to the lowest '
            'cores" >&2; fi',
            f'echo "srun --cpu-bind=$ibrepro_bind" > {APPLIED_BINDING}']


def policy(launcher, environ_features, *, ranks_per_node=1, cores_per_node=None, hca_numa_node=None,
           kill_on_bad_exit=False, bind=True, rail_device=None):
    """``(launcher options, environment variables, description)`` binding and guarding one job's ranks. Under srun,
    one rank per node goes to the NUMA node of the rail's HCA (``map_ldom``), several to CPUs of ``rail_device``'s
    own (``$ibrepro_bind``: :func:`near_cpus_commands` sets it on the node)."""
    options, env, said = [], {}, []
    if launcher in SIMULATED:
        return [], {}, 'binding does not apply: the ranks are simulated (SimGrid), their placement is the model\'s'
    oversubscribed = cores_per_node is not None and ranks_per_node > int(cores_per_node)
    if launcher in SRUN:
        if kill_on_bad_exit:
            options.append('--kill-on-bad-exit=1')
        if not bind:
            # the job binds its own processes (the pair runner, near their devices): it sees every CPU of its node
            # (--whole: a step may otherwise get a cpuset of the CPUs it asked for, --exact)
            options += ['--whole', '--cpu-bind=none']
        elif not oversubscribed:
            if launcher == 'srunalloc':
                # a step of an allocation sees the node's CPUs, as the job's own step does, so that map_ldom binds
                # near the HCA in both (never --exclusive there: see Placement.apply_launch_policy)
                options.append('--whole')
            if ranks_per_node == 1 and hca_numa_node is not None:
                options.append(f'--cpu-bind=map_ldom:{hca_numa_node}')
            elif ranks_per_node > 1 and rail_device:
                options.append('--cpu-bind=$ibrepro_bind')
            else:
                options.append('--cpu-bind=cores')
    family = mpi_family(environ_features)
    if family == 'mvapich2':
        # one binder: MVAPICH2 itself only where srun does not bind (its own launchers: mpirun_rsh, hydra)
        mpi_binds = bind and not oversubscribed and launcher not in SRUN
    else:
        mpi_binds = bind and not oversubscribed and family and (launcher in MPI_LAUNCHERS or family == 'impi')
    if mpi_binds:
        mpi_options, mpi_env = MPI_BINDING[family]
        if launcher in MPI_LAUNCHERS:
            options += mpi_options
        env.update(mpi_env)
    elif family in MPI_NO_BINDING:
        env.update(MPI_NO_BINDING[family])
    if options:
        near = f'--cpu-bind=map_cpu:<the first {ranks_per_node} CPUs of {rail_device}\'s local_cpulist on the node>'
        said.append(f'{launcher} ' + ' '.join(near if o == '--cpu-bind=$ibrepro_bind' else o for o in options))
    if env:
        said.append(' '.join(f'{k}={v}' for k, v in env.items()))
    if family == 'mvapich2':
        said.append('MVAPICH2 binds (its affinity on, one binder)' if mpi_binds
                    else 'srun binds, MVAPICH2\'s affinity off (one binder)' if bind and not oversubscribed
                    else 'MVAPICH2\'s affinity off')
    if not bind:
        said.append('the launcher leaves binding to the job')
    elif oversubscribed:
        said.append(f'not bound: {ranks_per_node} ranks on {cores_per_node} cores (oversubscribed on purpose)')
    elif not said or (launcher not in SRUN and not family):
        said.append(f'no binding known for launcher {launcher!r} with this environment\'s MPI '
                    '(declare openmpi, mpich, impi or mvapich2 among its features)')
    return options, env, '; '.join(said)


#: MPI library feature -> environment variables that keep its traffic on one rail (``{device}``, ``{port}``): on a
#: node with several HCAs a UCX, MPICH or Intel MPI run spreads over them or picks one by its own rule, and the
#: papers' one-port numbers come out bimodal. UCX (Open MPI's pml ucx, MPICH ch4:ucx, Intel MPI's mlx provider):
#: ``UCX_NET_DEVICES``; libfabric's verbs provider: ``FI_VERBS_DEVICE_NAME``; MPICH ch4:ofi multi-NIC:
#: ``MPIR_CVAR_CH4_OFI_MAX_NICS``; Intel MPI multi-rail (NIC pinning): ``I_MPI_MULTIRAIL``; MVAPICH2 (ibv_param.c):
#: ``MV2_IBA_HCA``, ``MV2_NUM_HCAS``, ``MV2_NUM_PORTS``, ``MV2_DEFAULT_PORT``. Open MPI is held to UCX
#: (``OMPI_MCA_pml=ucx``): without it, an Open MPI whose UCX cannot open the HCA falls back to TCP (pml ob1) and
#: measures the Ethernet, silently; held, it stops ("PML ucx cannot be selected") and the case fails saying so.
ONE_RAIL = {
    'openmpi': {'UCX_NET_DEVICES': '{device}:{port}', 'FI_VERBS_DEVICE_NAME': '{device}', 'OMPI_MCA_pml': 'ucx'},
    'mpich': {'UCX_NET_DEVICES': '{device}:{port}', 'FI_VERBS_DEVICE_NAME': '{device}',
              'MPIR_CVAR_CH4_OFI_MAX_NICS': '1'},
    'impi': {'UCX_NET_DEVICES': '{device}:{port}', 'FI_VERBS_DEVICE_NAME': '{device}', 'I_MPI_MULTIRAIL': '0'},
    'mvapich2': {'MV2_IBA_HCA': '{device}', 'MV2_NUM_HCAS': '1', 'MV2_NUM_PORTS': '1', 'MV2_DEFAULT_PORT': '{port}'},
}

#: MPI families that may send over UCX (Open MPI's pml ucx, MPICH's ch4:ucx, Intel MPI's mlx provider): their jobs
#: ask UCX to write what it chose (:data:`ibrepro.mpi_transport.ENV`), which the case records and checks.
UCX_FAMILIES = ('openmpi', 'mpich', 'impi')

_RAIL = re.compile(r'([A-Za-z0-9_.-]+)(?::([0-9]{1,3}))?')


def partition_rail(extras):
    """``(device, port)`` an MPI case of a partition runs on: its extra ``mpi_rail`` (``'mlx5_1'`` or
    ``'mlx5_1:2'``), else the first of its ``rdma_devices``, port 1; None when it names no RDMA device. ValueError
    for an ``mpi_rail`` that is not a device of the partition (or not a device name)."""
    devices = extras.get('rdma_devices') or []
    named = extras.get('mpi_rail')
    if not named:
        if not devices:
            return None
        if not (isinstance(devices[0], str) and _RAIL.fullmatch(devices[0]) and ':' not in devices[0]):
            raise ValueError(f'rdma_devices[0] {devices[0]!r}: not a device name (letters, digits, _ . -)')
        return devices[0], 1
    match = _RAIL.fullmatch(named) if isinstance(named, str) else None
    if not match:
        raise ValueError(f'mpi_rail {named!r}: a device name, optionally :port (e.g. mlx5_1:1)')
    device, port = match.group(1), int(match.group(2) or 1)
    if devices and device not in devices:
        raise ValueError(f'mpi_rail {named!r}: {device} is not one of the partition\'s rdma_devices '
                         f'({", ".join(devices)})')
    if not 1 <= port <= int(extras.get('ib_ports', 1) or 1):
        raise ValueError(f'mpi_rail {named!r}: port {port}, but the partition\'s devices have '
                         f'{extras.get("ib_ports", 1)} port(s) (ib_ports)')
    return device, port


def hca_numa_nodes(extras):
    """``{device: NUMA node}`` a partition says its HCAs sit on: its extra ``hca_numa_node``, a ``{device: node}``
    map, or one node, that of the MPI rail's device (:func:`partition_rail`); ``{}`` when it says none. The MPI
    ranks are bound near the rail's (:func:`rail_numa_node`), and the fleet sweep judges each device named here
    against the NUMA node it really sits on. ValueError for a value that is not a node number or such a map."""
    said = extras.get('hca_numa_node')
    if said is None:
        return {}
    if isinstance(said, dict):
        nodes = said
    else:
        rail = partition_rail(extras)
        if rail is None:
            raise ValueError(f'hca_numa_node {said!r}: the partition names no rdma_devices, so no HCA it is of')
        nodes = {rail[0]: said}
    for device, node in nodes.items():
        if not (isinstance(device, str) and _RAIL.fullmatch(device) and ':' not in device) or \
                isinstance(node, bool) or not isinstance(node, int) or node < 0:
            raise ValueError(f'hca_numa_node {said!r}: a NUMA node number (of the MPI rail\'s HCA) or '
                             '{device: NUMA node number}')
    return nodes


def rail_numa_node(extras):
    """``(device, NUMA node)`` of the MPI rail's HCA as the partition says it (:func:`hca_numa_nodes`), or None
    when it does not say: where one rank per node is bound (``map_ldom``), and what its job checks on the node."""
    rail = partition_rail(extras)
    node = hca_numa_nodes(extras).get(rail[0]) if rail else None
    return None if node is None else (rail[0], node)


def numa_commands(device, node, sysfs='/sys'):
    """Job-script lines that end the job (exit 97, :data:`MISPLACED`) before anything runs when ``device`` does not
    sit on NUMA node ``node`` of the job's first node (sysfs; -1 or no file: the kernel does not say, not
    judged): ranks bound there would cross the inter-socket link to their HCA and measure it, not the fabric."""
    said = (f"{MISPLACED} {device} (the MPI rail) sits on NUMA node $ibrepro_numa of $(hostname), the partition "
            f"binds the ranks near NUMA node {node} (hca_numa_node)")
    return [f'ibrepro_numa=$(cat {sysfs}/class/infiniband/{device}/device/numa_node 2>/dev/null || echo -1)',
            f'case "$ibrepro_numa" in {node}|-1) ;; *) echo "{said}" >&2; exit 97 ;; esac']


def one_rail(launcher, environ_features, rail):
    """``(environment variables, rail, description)`` keeping an MPI job on ``rail`` (``(device, port)`` or None):
    the rail is ``'device:port'``, or '' when it is not pinned (the description says why)."""
    if launcher in SIMULATED:
        return {}, '', ''
    family = mpi_family(environ_features)
    if not family:
        return {}, '', ''          # not an MPI environment (the binding says so where it matters)
    if rail is None:
        return {}, '', 'rail: the MPI\'s choice (the partition names no rdma_devices)'
    device, port = rail
    env = {k: v.format(device=device, port=port) for k, v in ONE_RAIL[family].items()}
    return env, f'{device}:{port}', f'one rail, {device}:{port} (' + ' '.join(f'{k}={v}' for k, v in env.items()) + ')'


#: How a case's job says it ran outside the Slurm partition or account its partition's ``access`` asks for (the
#: line it prints before it ends, the sanity error it becomes): :func:`ibrepro.verdict.not_measured` reads a case
#: that failed with it as not measured (infrastructure: a child job's allocation in the wrong partition), never as a
#: regression.
MISPLACED = verdict.MISPLACED

#: ``(extras key, the variable Slurm sets in the job, what it is)`` of each place a case checks it ran in.
_PLACES = (('slurm_partition', 'SLURM_JOB_PARTITION', 'partition'), ('slurm_account', 'SLURM_JOB_ACCOUNT', 'account'))


def placement_commands(extras):
    """Job-script lines that end the job (exit 97) before anything runs when it is not in the Slurm partition (one of
    them) or account its partition asks for (extras ``slurm_partition``/``slurm_account``,
    :func:`ibrepro.rfmconfig.with_places`): a GitLab child job's allocation is made apart from its case, and a case
    measured in another partition would be stored as this one's. The names are checked names (no shell syntax)."""
    lines = []
    for key, slurm_variable, what in _PLACES:
        want = extras.get(key)
        if not want:
            continue
        # Slurm keeps account names in lower case
        got = f'${{{slurm_variable},,}}' if what == 'account' else f'${{{slurm_variable}-}}'
        names = want.lower() if what == 'account' else want
        said = f"{MISPLACED} this job ran in Slurm {what} '${{{slurm_variable}:-none}}', its partition asks for {want}"
        lines.append(f'case "{got}" in {"|".join(names.split(","))}) ;; *) echo "{said}" >&2; exit 97 ;; esac')
    return lines


def misplaced(stderr):
    """The line of a job's stderr that says it ran in the wrong place (:data:`MISPLACED`), or None."""
    for line in stderr.splitlines():
        if line.startswith(MISPLACED):
            return line.strip()
    return None


class Placement(rfm.RegressionTestPlugin):
    """Plugin: where a case runs and how its ranks are bound: whole nodes, how many a job asks for, the binding and
    the rail as applied, the model of a simulated partition. :meth:`_bind` runs from
    :class:`ibrepro.rfm.PaperExperiment`'s last hook before the run, after the family has placed its ranks."""

    #: Nodes one job of this case needs (the layout's, two for client/server verbs flows): what a CI job that
    #: runs only this case asks its scheduler for (ci/nightly.sh generate).
    job_nodes = variable(int, value=1, loggable=True)

    #: How the job's processes were bound (launcher options and MPI variables), as applied (set before the run).
    binding = variable(str, value='', loggable=True)

    #: Whether an MPI case is kept on one rail of its partition (:func:`partition_rail`); a check that sets its
    #: own rails (MVAPICH2's multi-rail policies) sets it False before the run.
    one_rail = variable(typ.Bool, value=True)     # typ.Bool: -S one_rail=false is False (bool would make it True)

    #: The rail (``device:port``) the MPI ran on, as pinned ('' when not pinned: the binding says why).
    mpi_rail = variable(str, value='', loggable=True)

    #: The transports UCX chose for MPI's messages, per peer kind (``{'inter-node': ['rc_mlx5/mlx5_0:1'], ...}``,
    #: :mod:`ibrepro.mpi_transport`; empty when the MPI did not use UCX or its UCX does not say), set after the run.
    mpi_transports = variable(typ.Dict[str, typ.List[str]], value={}, loggable=True)

    #: The model a simulated partition ran this case on (its extras ``simulation``: SimGrid version, platform
    #: hash, model parameters; :mod:`ibrepro.simulated`); empty on a real system.
    simulation = variable(typ.Dict[str, object], value={})

    @run_after('init')
    def _whole_nodes(self):
        self.exclusive_access = True     # performance runs get whole nodes (the local scheduler ignores it)

    @run_before('run')
    def _check_place(self):
        """The job's first lines: it ends before any benchmark when it runs outside its partition's place."""
        self._add_prerun(placement_commands(self.current_partition.extras), first=True)

    def _add_prerun(self, lines, first=False):
        """``lines`` in the job script before the run, once (a hook may run again on a retry), first or last."""
        rest = [c for c in self.prerun_cmds if c not in lines]
        self.prerun_cmds = lines + rest if first else rest + lines

    @run_before('sanity')
    def _record_applied_binding(self):
        """What the node decided (:data:`APPLIED_BINDING`), with the binding as planned."""
        try:
            with open(os.path.join(self.stagedir, APPLIED_BINDING)) as fp:
                applied = fp.read().strip()
        except OSError:
            return
        if applied and f'applied: {applied}' not in self.binding:
            self.binding = f'{self.binding}; applied: {applied}'

    @run_before('sanity')
    def _record_mpi_transports(self):
        """What UCX says it chose (its logs in the stage directory); an inter-node transport off the pinned rail
        fails the case (:meth:`transport_problem`)."""
        self.mpi_transports, self._ucx_problems = mpi_transport.read(self.stagedir)

    def transport_problem(self):
        """Why the case measured another path than its rail ('' when it did not, or nothing says)."""
        if not self.mpi_rail or not self.mpi_transports:
            return ''
        device, _, port = self.mpi_rail.partition(':')
        return mpi_transport.off_rail(self.mpi_transports, device, int(port or 1))

    def ucx_problems(self):
        """UCX's own errors and warnings of the run (its logs hold them, not stderr)."""
        return getattr(self, '_ucx_problems', None) or []

    @run_after('setup')
    def _simulated_partition(self):
        """On a simulated partition: keep the model with the results, and skip what SMPI cannot model (the
        catalog's reasons: reference-data/experiments.yaml ``simulated``)."""
        extras = self.current_partition.extras
        if extras.get('simulated'):
            self.simulation = dict(extras.get('simulation') or {})
            self.skip_for(catalog.cannot_model(self.display_name, self.experiments))

    def _bind(self):
        if not self.binding:
            self.apply_launch_policy()

    def apply_launch_policy(self, tasks_per_node=None, kill_on_bad_exit=False, bind=True):
        """Bind the job's ranks as its launcher and MPI spell it, and record how."""
        extras = self.current_partition.extras
        if self.job.launcher.registered_name == 'srunalloc':
            # a step inside the (exclusive) allocation: ReFrame would write srun --exclusive, which implies --exact
            # (each rank confined to the CPUs Slurm picks, wherever the binding points)
            self.exclusive_access = False
        near = rail_numa_node(extras)
        rail = partition_rail(extras)
        ranks = tasks_per_node or self.num_tasks_per_node or self.num_tasks or 1
        options, env, self.binding = policy(
            self.job.launcher.registered_name, self.current_environ.features, ranks_per_node=ranks,
            cores_per_node=extras.get('cores_per_node'), hca_numa_node=near[1] if near else None,
            kill_on_bad_exit=kill_on_bad_exit, bind=bind, rail_device=rail[0] if rail else None)
        self.job.launcher.options += [o for o in options if o not in self.job.launcher.options]
        if '--cpu-bind=$ibrepro_bind' in options:
            # several ranks per node go to CPUs of the rail's HCA, as the node lists them
            self._add_prerun(near_cpus_commands(rail[0], ranks))
        if near and f'--cpu-bind=map_ldom:{near[1]}' in options:
            # the ranks go near the rail's HCA as the partition says it sits: the node must agree
            self._add_prerun(numa_commands(*near))
        rail_env = {}
        if bind and self.one_rail:
            rail_env, self.mpi_rail, said = one_rail(
                self.job.launcher.registered_name, self.current_environ.features, partition_rail(extras))
            self.binding = '; '.join(filter(None, [self.binding, said]))
        said = mpi_transport.ENV if mpi_family(self.current_environ.features) in UCX_FAMILIES \
            and self.job.launcher.registered_name not in SIMULATED else {}
        self.env_vars = {**env, **rail_env, **said, **self.env_vars}
