"""Building blocks of ibrepro's ReFrame site configurations (configs/*.py stay thin).

Every configuration shares: results storage on (one persistent per-user database, see
:func:`ibrepro.paths.results_db`), a JSON run report per session, perflogs, stage and output under the per-user
data directory, recursive check search (``reframe -c reframe-checks`` finds every level's sub-directory), and
per-system references in ``reference-data/systems/<system>/references.yaml`` (found by the checks;
``RFM_REFERENCE_PREFIX`` points them elsewhere).

Programming environments describe MPI stacks by their prefix and declare as *features* the benchmark tools
really found there (``imb``, ``osu``, ``perftest``, ``npb``, ``ibrepro-bench``), so a check selects environments
with ``valid_prog_environs = ['+imb']`` and is skipped, with its reason, where the binary is absent.
"""

import os
import re
import shutil
from pathlib import Path

from . import paths, topology

#: Tool feature -> executables whose presence proves it.
TOOL_BINARIES = {
    'imb': ['IMB-MPI1'],
    'osu': ['osu_latency'],
    'perftest': ['ib_write_lat'],
    'npb': ['is.B.x', 'is.B.4', 'ft.A.x', 'ft.A.4'],
    'ibrepro-bench': ['ibrepro_overhead'],
    'ibrepro-rdma': ['ibrepro_rdma'],
}

#: Our own benchmarks, built by make setup (benchmarks/Makefile) with the mpich wheel's mpicc.
BENCH_BIN = paths.REPO_ROOT / 'build' / 'bench' / 'bin'

#: Sub-directories of an install prefix (or Spack view) that hold benchmark executables.
BIN_SUBDIRS = [
    'bin',
    # OSU 5.x and 7.x as installed by Spack's osu-micro-benchmarks package
    'libexec/osu-micro-benchmarks/mpi/pt2pt', 'libexec/osu-micro-benchmarks/mpi/collective',
    'libexec/osu-micro-benchmarks/mpi/startup', 'libexec/osu-micro-benchmarks/mpi/one-sided',
    'libexec/osu-micro-benchmarks/mpi/pt2pt/standard', 'libexec/osu-micro-benchmarks/mpi/collective/blocking',
    'libexec/osu-micro-benchmarks/mpi/collective/non_blocking',
]

#: Open MPI refuses to run as root or to oversubscribe unless told; harmless for other MPIs.
OPENMPI_ENV = [['OMPI_ALLOW_RUN_AS_ROOT', '1'], ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1'],
               ['OMPI_MCA_rmaps_base_oversubscribe', '1'], ['PRTE_MCA_rmaps_default_mapping_policy', ':oversubscribe']]


def tool_features(bin_dirs):
    """The tool features whose executables exist in ``bin_dirs`` (None: search $PATH)."""
    search = None if bin_dirs is None else os.pathsep.join(str(d) for d in bin_dirs)
    return [tool for tool, exes in TOOL_BINARIES.items()
            if any(shutil.which(exe, path=search) for exe in exes)]


def prefix_bin_dirs(prefix):
    prefix = Path(prefix)
    return [prefix / sub for sub in BIN_SUBDIRS if (prefix / sub).is_dir()]


def prefix_environment(name, prefix, *, descr, features=(), extra_lib_dirs=(), env_vars=(), cc=None,
                       extra_bin_dirs=()):
    """A programming environment for an MPI stack installed in ``prefix``; featureless when absent."""
    prefix = Path(prefix)
    bins = prefix_bin_dirs(prefix)
    if bins:
        bins += [Path(d) for d in extra_bin_dirs if Path(d).is_dir()]
    env = {'name': name, 'features': [], 'env_vars': [], 'extras': {'about': descr}}
    if not bins:
        env['extras']['about'] += f' [not installed: {prefix} missing; run `make setup`]'
        return env

    lib_dirs = [prefix / 'lib', *(prefix / d for d in extra_lib_dirs)]
    env['env_vars'] = [
        ['PATH', os.pathsep.join(str(d) for d in bins) + os.pathsep + '$PATH'],
        ['LD_LIBRARY_PATH', os.pathsep.join(str(d) for d in lib_dirs) + os.pathsep + '${LD_LIBRARY_PATH:-}'],
        *env_vars,
    ]
    env['features'] = ['mpi', *features, *tool_features(bins)]
    if cc:
        env['cc'] = cc

    return env


def impi_environment(env_vars=()):
    """Intel MPI 2021.14 with the IMB binaries, from the impi-rt wheel (make setup)."""
    prefix = paths.DEPS_DIR / 'impi'
    return prefix_environment(
        'impi', prefix, descr='Intel MPI 2021.14 + IMB 2021.8 (PyPI impi-rt, make setup)',
        features=['impi'], extra_lib_dirs=['lib/libfabric'],
        env_vars=[['FI_PROVIDER_PATH', str(prefix / 'lib/libfabric/prov')], *env_vars])


def mpich_environment(env_vars=()):
    """MPICH from the mpich wheel (make setup); its mpicc builds our own benchmarks."""
    return prefix_environment(
        'mpich', paths.DEPS_DIR / 'mpich', descr='MPICH 5.0 (PyPI mpich, make setup) and our own benchmarks',
        features=['mpich', 'mpicc'], cc='mpicc', extra_bin_dirs=[BENCH_BIN], env_vars=env_vars)


def smpi_environment():
    """SimGrid SMPI (``smpicc``, ``smpirun``) with what ``make simulated-build`` built with it (our benchmarks,
    NAS IS as NPB 3.3 per-count binaries) and, from ``$IBREPRO_SMPI_PREFIX``, a site's IMB, OSU or NPB built with
    SMPI's compilers; featureless, saying why, without SimGrid. For the ``simulated`` system only
    (:mod:`ibrepro.simulated`)."""
    from .simulated import build   # noqa: PLC0415  (SimGrid's pieces load only for the simulated system)

    env = {'name': 'smpi', 'features': [], 'env_vars': [], 'target_systems': ['simulated'],
           'extras': {'about': 'SimGrid SMPI (libsimgrid-dev) and the programs built with smpicc (make '
                               'simulated-build)', 'npb_binary': '{program}.{cls}.{ranks}'}}
    missing = build.missing_reason()
    site = os.environ.get('IBREPRO_SMPI_PREFIX')
    bins = [build.BIN_DIR] if build.BIN_DIR.is_dir() else []
    bins += prefix_bin_dirs(site) if site else []
    if missing or not bins:
        env['extras']['about'] += f' [not usable: {missing or "nothing built: make simulated-build"}]'
        return env

    env['env_vars'] = [['PATH', os.pathsep.join(str(d) for d in bins) + os.pathsep + '$PATH']]
    env['features'] = ['mpi', 'smpi', *tool_features(bins)]
    env['cc'] = 'smpicc'
    # NPB is built per program, class and count here (IS only in CI): the NPB family skips the others
    env['extras']['npb_binaries'] = sorted({p.name for d in bins for p in Path(d).iterdir()
                                            if re.fullmatch(r'[a-z]{2}\.[A-Z]\.(\d+|x)', p.name)})
    return env


#: Spack views written by ``make spack SPACK_ENV=<env>`` (configs/spack/<env>/spack.yaml).
SPACK_VIEWS = paths.REPO_ROOT / '.deps' / 'spack-view'

#: MPI-library features of the Spack environments we ship.
SPACK_ENV_FEATURES = {'ib-mvapich': ['mvapich2']}


def spack_environments():
    """One programming environment per Spack view that exists (``spack-<env>``): its benchmarks and MPI."""
    envs = []
    for view in sorted(SPACK_VIEWS.glob('*')) if SPACK_VIEWS.is_dir() else []:
        env = prefix_environment(f'spack-{view.name}', view, descr=f'Spack view of configs/spack/{view.name}',
                                 features=['spack', *SPACK_ENV_FEATURES.get(view.name, [])], cc='mpicc')
        if env['features']:
            envs.append(env)
    return envs


def system_environment():
    """Whatever MPI and benchmarks the user's PATH, modules or Spack view provide."""
    features = tool_features(None)
    if shutil.which('mpirun') or shutil.which('mpiexec'):
        features.insert(0, 'mpi')
    if shutil.which('mpicc'):
        features.append('mpicc')

    env = {'name': 'system', 'features': features, 'env_vars': OPENMPI_ENV,
           'extras': {'about': 'the MPI and benchmarks found on PATH (modules, Spack view)'}}
    if shutil.which('mpicc'):
        env['cc'] = 'mpicc'

    return env


def local_partition():
    """Features and extras of this machine, from what is really there (ibrepro.topology)."""
    topo = topology.read_sysfs()
    summary = topology.summary(topo)
    extras = {'nodes': 1, 'cores_per_node': os.cpu_count() or 1, 'interconnect': 'shared memory (one node)',
              'oversubscribe': True}    # the local launcher starts any number of processes
    if summary['hcas']:
        extras.update(rdma_devices=summary['hcas'],
                      ib_ports=max(len(ports) for ports in summary['hca_ports'].values()),
                      link_gbps=summary['link_gbps'], bus=summary['bus'])
    return ['mpi', 'shm', 'nodes1', *topology.partition_features(topo)], extras


def local_environments():
    """The embedded default's programming environments: the wheels of make setup, PATH, Spack views."""
    return [impi_environment(), mpich_environment(), system_environment(), *spack_environments()]


def local_system(environments=None):
    """The embedded default: this machine, any host name, every process on one node."""
    features, extras = local_partition()
    environs = [env['name'] for env in environments or local_environments()]
    return {
        'name': 'local',
        'descr': 'this machine (embedded default): one node, MPI over shared memory',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'prefix': str(paths.data_home() / 'rfm'),
        'partitions': [{
            'name': 'default',
            'descr': 'all cores of this machine',
            'scheduler': 'local',
            'launcher': 'mpirun',
            'environs': environs,
            # performance runs never share the machine with each other
            'max_jobs': 1,
            'features': features,
            'extras': extras,
        }],
    }


def site_configuration(systems, environments, *, modes=()):
    """A complete ReFrame configuration for ``systems``, with ibrepro's storage, reports and references."""
    home = paths.data_home()
    for sub in ('logs', 'perflogs', paths.run_reports_dir().name):
        (home / sub).mkdir(parents=True, exist_ok=True)

    general = [{
        'target_systems': [system['name']],
        'check_search_recursive': True,
        'report_file': str(paths.run_reports_dir() / 'run-report-{sessionid}.json'),
    } for system in systems]
    return {
        'systems': list(systems),
        'environments': list(environments),
        'general': general,
        'storage': [{'enable': True, 'sqlite_db_file': str(paths.results_db())}],
        'modes': [
            {'name': 'nightly', 'options': ['--exec-policy=serial', '--max-retries=1',
                                            '--performance-report']},
            *modes,
        ],
        'logging': [{
            'level': 'debug',
            'handlers': [
                {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
                {'type': 'file', 'name': str(home / 'logs' / 'reframe.log'), 'timestamp': '%Y%m%dT%H%M%S',
                 'level': 'debug2', 'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
                 'append': False},
            ],
            'handlers_perflog': [{
                'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
                'basedir': str(home / 'perflogs'), 'level': 'info', 'append': True,
                'format': ('%(check_job_completion_time)s|reframe %(version)s|%(check_info)s|'
                           'jobid=%(check_jobid)s|%(check_perfvalues)s'),
                'format_perfvars': ('%(check_perf_value)s|%(check_perf_unit)s|%(check_perf_ref)s|'
                                    '%(check_perf_lower_thres)s|%(check_perf_upper_thres)s|'
                                    '%(check_perf_result)s|'),
            }],
        }],
    }
