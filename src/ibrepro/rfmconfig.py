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

import json
import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path

from . import bands, paths, topology, trust

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

#: Open MPI refuses to run as root or to oversubscribe unless told (given to Open MPI environments only).
OPENMPI_ENV = [['OMPI_ALLOW_RUN_AS_ROOT', '1'], ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1'],
               ['OMPI_MCA_rmaps_base_oversubscribe', '1'], ['PRTE_MCA_rmaps_default_mapping_policy', ':oversubscribe']]


def layout_features(nodes, cores_per_node, oversubscribe=False):
    """Partition features the layouts select on: ``nodes<N>`` and ``cores<P>`` for every power of two up to the
    partition's nodes and cores per node (``nodes1`` always), and ``oversubscribe`` where the scheduler lets a job
    run more processes than cores (:mod:`ibrepro.rfm.layout`)."""
    features = [f'nodes{n}' for n in _powers_of_two(nodes)]
    features += [f'cores{c}' for c in _powers_of_two(cores_per_node) if c > 1]
    return features + (['oversubscribe'] if oversubscribe else [])


def _powers_of_two(upto):
    n, found = 1, []
    while n <= int(upto):
        found.append(n)
        n *= 2
    return found


#: Tool feature -> the names of its programs (an environment provides exactly the programs it has).
TOOL_PROGRAMS = {
    'imb': re.compile(r'IMB-(?:MPI1|EXT|IO|NBC|RMA|MT|P2P)'),
    'osu': re.compile(r'osu_[a-z0-9_]+'),
    'perftest': re.compile(r'ib_(?:write|read|send|atomic)_(?:lat|bw)|raw_ethernet_\w+'),
    'npb': re.compile(r'(?:bt|cg|ep|ft|is|lu|mg|sp)\.[SWABCDEF]\.(?:x|\d+)'),
    'ibrepro-bench': re.compile(r'ibrepro_(?:overhead|bilat|bibw|overlap|reuse|memory|imb)'),
    'ibrepro-rdma': re.compile(r'ibrepro_rdma'),
    'nvbandwidth': re.compile(r'nvbandwidth'),
    'nccl': re.compile(r'(?:all_reduce|all_gather|alltoall|broadcast|gather|hypercube|reduce|reduce_scatter|scatter|'
                       r'sendrecv)_perf'),
}

#: Where an MPI family's launcher directory gives itself away (a program only that MPI installs beside it).
MPI_MARKERS = [('mvapich2', 'mpiname'), ('impi', 'impi_info'), ('openmpi', 'ompi_info'),
               ('mpich', 'mpichversion')]


def find_programs(bin_dirs):
    """{tool: sorted program names} of the benchmark programs in ``bin_dirs`` (None: the directories of PATH)."""
    dirs = os.environ.get('PATH', '').split(os.pathsep) if bin_dirs is None else bin_dirs
    found = {}
    for directory in dirs:
        try:
            names = [e.name for e in os.scandir(directory or '.') if os.access(e.path, os.X_OK) and not e.is_dir()]
        except OSError:
            continue
        for tool, pattern in TOOL_PROGRAMS.items():
            found.setdefault(tool, set()).update(n for n in names if pattern.fullmatch(n))
    return {tool: sorted(names) for tool, names in found.items() if names}


def tool_features(bin_dirs):
    """The tool features with at least one program in ``bin_dirs`` (None: search $PATH)."""
    return list(find_programs(bin_dirs))


def mpi_family(bin_dirs=None):
    """The MPI library whose launcher comes first in ``bin_dirs`` (None: PATH): a feature of
    :data:`ibrepro.rfm.launch.MPI_BINDING`, or None."""
    search = None if bin_dirs is None else os.pathsep.join(str(d) for d in bin_dirs)
    launcher = shutil.which('mpirun', path=search) or shutil.which('mpiexec', path=search)
    if not launcher:
        return None
    real = Path(launcher).resolve()
    for family, marker in MPI_MARKERS:
        if (Path(launcher).parent / marker).exists() or (real.parent / marker).exists():
            return family
    # Debian's alternatives: mpirun -> mpirun.openmpi / mpirun.mpich
    name = real.name
    return 'openmpi' if name in ('orterun', 'prterun') or name.endswith('openmpi') else \
        'mpich' if name.endswith('mpich') or name.startswith('mpiexec.hydra') else None


#: What a shell would run or expand in an environment value, and a line break that ends an ``export`` line.
_SHELL_SYNTAX = re.compile(r'[$`\n\r]')


def refuse_shell_syntax(value, name):
    """``value``, or ValueError naming ``name`` when it holds ``$``, a backquote or a line break. ReFrame expands
    environment values itself (``osext.expandvars`` runs ``$(...)`` and backquotes through a shell, escaped or not)
    before any job script exists: quoting cannot help, only refusing."""
    found = sorted(set(_SHELL_SYNTAX.findall(str(value))))
    if found:
        raise trust.Refused(f'{name}={str(value)!r}: a value that reaches an environment variable may not contain '
                         f'{", ".join(map(repr, found))} (ReFrame would expand or run it through a shell)')
    return value


def shell_word(path, variable='a path'):
    """``path`` double-quoted for a job script (ReFrame writes ``export NAME=value`` as it is given); refused when
    it holds shell syntax (:func:`refuse_shell_syntax`, naming ``variable``)."""
    refuse_shell_syntax(path, variable)
    return '"' + re.sub(r'(["\\])', r'\\\1', str(path)) + '"'


def path_value(dirs, variable):
    """``"dir1":"dir2":$VARIABLE``: directories prepended to a search path, each quoted."""
    return ':'.join(shell_word(d, variable) for d in dirs) + f':${{{variable}:-}}'


def prefix_bin_dirs(prefix, existing=True):
    """The directories under ``prefix`` that hold programs: bin/ and OMB 5/7's libexec directories."""
    prefix = Path(prefix)
    return [prefix / sub for sub in BIN_SUBDIRS if not existing or (prefix / sub).is_dir()]


def _mpi_settings(family):
    # Open MPI refuses root and oversubscription unless told; the others need nothing here
    return [list(v) for v in OPENMPI_ENV] if family in ('openmpi', None) else []


def prefix_environment(name, prefix, *, descr, features=(), extra_lib_dirs=(), env_vars=(), cc=None,
                       extra_bin_dirs=(), extra_prefixes=()):
    """A programming environment for an MPI stack (and benchmarks) installed in ``prefix``, plus the benchmarks
    of ``extra_prefixes``; featureless when ``prefix`` is absent.

    Its features are what is really there: ``mpi``, the MPI family (``openmpi``, ``mpich``, ``impi``,
    ``mvapich2``), ``features``, and each tool with at least one program; extras ``programs`` lists every
    benchmark program found, so a case whose program is missing skips with the reason.
    """
    prefix = Path(prefix)
    bins = prefix_bin_dirs(prefix)
    env = {'name': name, 'features': [], 'env_vars': [], 'extras': {'about': descr}}
    if not bins:
        env['extras']['about'] += f' [not installed: {prefix} missing; run `make setup`]'
        return env

    bins += [Path(d) for d in extra_bin_dirs if Path(d).is_dir()]
    bins += [d for p in extra_prefixes for d in prefix_bin_dirs(p)]
    lib_dirs = [prefix / 'lib', *(prefix / d for d in extra_lib_dirs)]
    family = mpi_family(bins)
    programs = find_programs(bins)
    env['env_vars'] = [['PATH', path_value(bins, 'PATH')], ['LD_LIBRARY_PATH', path_value(lib_dirs, 'LD_LIBRARY_PATH')],
                       *_mpi_settings(family), *env_vars]
    # 'mpi' only with a launcher among its directories: an environment's mpirun is the one its benchmarks need
    launcher = any((d / name).exists() for d in bins for name in ('mpirun', 'mpiexec'))
    env['features'] = list(dict.fromkeys([*(['mpi'] if launcher else []), *([family] if family else []), *features,
                                          *programs]))
    env['extras']['programs'] = sorted(p for names in programs.values() for p in names)
    if cc:
        env['cc'] = cc

    return env


def site_environment(name, *, descr, tools, mpi=None, prefix=None, modules=(), slurm_mpi_type=None, env_vars=(),
                     cc='mpicc', target_systems=None, features=()):
    """A site's programming environment: an MPI library and the benchmarks built with it, from ``modules`` and/or
    an install ``prefix`` (a Spack view, or any prefix: its bin/ and OSU's libexec directories, OMB 5 and 7
    layouts, go on PATH). ``mpi`` is the MPI family (a binding vocabulary: openmpi, mpich, impi, mvapich2), None
    for tools that need no MPI (perftest);
    ``tools`` what it provides (osu, npb, imb, perftest, ibrepro-bench, ibrepro-rdma): when this host sees the
    prefix, the tools and programs found there replace the declared ones. ``slurm_mpi_type`` is srun's
    ``--mpi`` (pmix for Open MPI 5 / PMIx builds, pmi2 for MPICH and Intel MPI). ``features`` are what the
    programs' names do not tell and stay whatever the prefix holds: ``cuda`` (its perftest is built with CUDA, for
    GPUDirect RDMA).
    """
    declared = (['mpi', mpi] if mpi else []) + list(features)      # not found by the programs' names
    env = {'name': name, 'cc': cc, 'modules': list(modules), 'extras': {'about': descr},
           'features': [*declared, *tools], 'env_vars': []}
    if prefix:
        seen = Path(prefix).is_dir()
        bins = prefix_bin_dirs(prefix, existing=seen)
        env['env_vars'].append(['PATH', path_value(bins, 'PATH')])
        env['env_vars'].append(['LD_LIBRARY_PATH', path_value([Path(prefix) / 'lib'], 'LD_LIBRARY_PATH')])
        if seen:
            programs = find_programs(bins)
            env['features'] = [*declared, *programs]
            env['extras']['programs'] = sorted(p for names in programs.values() for p in names)
    if slurm_mpi_type:
        env['env_vars'].append(['SLURM_MPI_TYPE', slurm_mpi_type])
    env['env_vars'] += list(env_vars)     # no Open MPI root/oversubscription allowances on a site's nodes
    if target_systems:
        env['target_systems'] = list(target_systems)
    return env


def impi_environment(env_vars=()):
    """Intel MPI 2021.14 with the IMB binaries, from the impi-rt wheel (make setup)."""
    prefix = refuse_shell_syntax(paths.DEPS_DIR, 'IBREPRO_DEPS') / 'impi'   # named as the user set it
    return prefix_environment(
        'impi', prefix, descr='Intel MPI 2021.14 + IMB 2021.8 (PyPI impi-rt, make setup)',
        features=['impi'], extra_lib_dirs=['lib/libfabric'],
        env_vars=[['FI_PROVIDER_PATH', shell_word(prefix / 'lib/libfabric/prov', 'FI_PROVIDER_PATH')], *env_vars])


def mpich_environment(env_vars=()):
    """MPICH from the mpich wheel (make setup); its mpicc builds our own benchmarks."""
    deps = refuse_shell_syntax(paths.DEPS_DIR, 'IBREPRO_DEPS')
    return prefix_environment(
        'mpich', deps / 'mpich', descr='MPICH 5.0 (PyPI mpich, make setup) and our own benchmarks',
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

    programs = find_programs(bins)     # NAS: IS only, per class and count: the NPB family skips the others
    env['env_vars'] = [['PATH', os.pathsep.join(str(refuse_shell_syntax(d, 'PATH')) for d in bins)
                        + os.pathsep + '$PATH']]
    env['features'] = ['mpi', 'smpi', *programs]
    env['extras']['programs'] = sorted(p for names in programs.values() for p in names)
    env['cc'] = 'smpicc'
    return env


#: Spack views written by ``make spack SPACK_ENV=<env>`` (configs/spack/<env>/spack.yaml).
SPACK_VIEWS = paths.REPO_ROOT / '.deps' / 'spack-view'


def spack_view_stamp(view):
    """What scripts/spack-setup.sh recorded when ``view`` was complete ({'mpi_prefix': ...}), or None: a view
    without its stamp is being built, or its install failed."""
    try:
        stamp = json.loads((view.parent / f'.complete-{view.name}.json').read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def spack_environments():
    """One programming environment per complete Spack view (``spack-<env>``): its benchmarks and MPI, the MPI's
    launcher from its own prefix when the MPI is external (not linked into the view)."""
    envs = []
    for view in sorted(p for p in SPACK_VIEWS.glob('*') if p.is_dir()) if SPACK_VIEWS.is_dir() else []:
        stamp = spack_view_stamp(view)
        if stamp is None:
            continue
        mpi_prefix = stamp.get('mpi_prefix')
        extra_bins = [Path(mpi_prefix) / 'bin'] if isinstance(mpi_prefix, str) and mpi_prefix else []
        env = prefix_environment(f'spack-{view.name}', view, descr=f'Spack view of configs/spack/{view.name}',
                                 features=['spack'], cc='mpicc', extra_bin_dirs=extra_bins)
        if env['features']:
            envs.append(env)
    return envs


def user_prefixes(environ=os.environ):
    """Install prefixes of your own benchmark builds: ``$IBREPRO_PREFIXES`` (colon-separated)."""
    return [Path(refuse_shell_syntax(p, 'IBREPRO_PREFIXES'))
            for p in environ.get('IBREPRO_PREFIXES', '').split(os.pathsep) if p.strip()]


def system_environment(extra_prefixes=None):
    """The MPI on PATH (modules, a Spack view) with the benchmarks on PATH and under ``extra_prefixes``
    (default: ``$IBREPRO_PREFIXES``); None when there is neither an MPI launcher nor a benchmark."""
    extra = [d for p in (user_prefixes() if extra_prefixes is None else extra_prefixes)
             for d in prefix_bin_dirs(p)]
    launcher = shutil.which('mpirun') or shutil.which('mpiexec')
    family = mpi_family([*extra, *os.environ.get('PATH', '').split(os.pathsep)]) if launcher else None
    programs = find_programs([*extra, *os.environ.get('PATH', '').split(os.pathsep)])
    if not launcher and not programs:
        return None
    features = [*(['mpi'] if launcher else []), *([family] if family else []), *programs]
    if shutil.which('mpicc'):
        features.append('mpicc')
    env_vars = ([['PATH', path_value(extra, 'PATH')]] if extra else []) + _mpi_settings(family)
    env = {'name': 'system', 'features': features, 'env_vars': env_vars,
           'extras': {'about': 'the MPI and benchmarks found on PATH (modules, Spack view) and in '
                               '$IBREPRO_PREFIXES',
                      'programs': sorted(p for names in programs.values() for p in names)}}
    if shutil.which('mpicc'):
        env['cc'] = 'mpicc'

    return env


def local_partition():
    """Features and extras of this machine, from what is really there (ibrepro.topology)."""
    topo = topology.read_sysfs()
    summary = topology.summary(topo)
    cores = os.cpu_count() or 1
    extras = {'nodes': 1, 'cores_per_node': cores, 'interconnect': 'shared memory (one node)',
              'oversubscribe': True}    # the local launcher starts any number of processes
    if summary['hcas']:
        extras.update(rdma_devices=summary['hcas'],
                      ib_ports=max(len(ports) for ports in summary['hca_ports'].values()),
                      link_gbps=summary['link_gbps'], bus=summary['bus'])
    return ['mpi', 'shm', *layout_features(1, cores, oversubscribe=True), *topology.partition_features(topo)], extras


def local_environments():
    """The embedded default's programming environments: the wheels of make setup, the MPI on PATH (with your own
    benchmark prefixes, ``$IBREPRO_PREFIXES``), Spack views; each only when it is really there."""
    envs = [impi_environment(), mpich_environment(), system_environment(), *spack_environments()]
    present = [env for env in envs if env and env['features']]
    return present or [env for env in envs if env][:1]     # ReFrame needs one; make setup has not run yet


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


#: Slurm schedulers of ReFrame: a partition using one submits jobs with sbatch (or the site's job command).
SLURM_SCHEDULERS = ('slurm', 'squeue')

#: What a nightly id (``$IBREPRO_NIGHTLY``) may hold: it becomes a session extra and a GitLab variable.
_NIGHTLY_ID = re.compile(r'[A-Za-z0-9._:-]{1,64}')

#: Host name patterns of every system of the configurations built here (:func:`configured_host`).
_HOSTNAMES = []


def in_allocation(environ=os.environ):
    """The Slurm allocation whose nodes this run's tests use as job steps, or None (submit a job per test).

    Only when asked: ``IBREPRO_IN_ALLOCATION=1`` (the GitLab child jobs ci/nightly.sh generates set it; ``salloc``
    users set it themselves). A ``SLURM_JOB_ID`` alone is not enough: a scrontab job, an ``salloc`` shell or a
    login session started from inside a job carries one, and its allocation is not meant for the night's tests.
    Asked without an allocation, the promise cannot be kept: refused (trust.Refused), never silently submitted."""
    asked = environ.get('IBREPRO_IN_ALLOCATION', '').strip().lower()
    if asked in ('', '0', 'no', 'false'):
        return None
    job_id = environ.get('SLURM_JOB_ID', '').strip()
    from . import trust
    if asked not in ('1', 'yes', 'true'):
        raise trust.Refused(f'IBREPRO_IN_ALLOCATION={asked!r}: say 1 (run as job steps of this Slurm allocation) '
                            'or 0 (submit a job per test)')
    if not re.fullmatch(r'[0-9]+(_[0-9]+)?', job_id):
        raise trust.Refused('IBREPRO_IN_ALLOCATION=1 but this process is in no Slurm allocation (SLURM_JOB_ID is '
                            f'{repr(job_id) if job_id else "unset"}): run it inside one (sbatch, salloc), or unset '
                            'IBREPRO_IN_ALLOCATION')
    return job_id


#: The sbatch options of a partition's ``access`` that say where its jobs run, by the name ibrepro keeps them under.
_ACCESS_PLACES = {'-p': 'slurm_partition', '--partition': 'slurm_partition',
                  '-A': 'slurm_account', '--account': 'slurm_account'}
_ACCESS_VALUE = re.compile(r'[A-Za-z0-9_.,+-]+')


def access_places(access):
    """``{'slurm_partition': 'a,b', 'slurm_account': 'x'}``: the Slurm partition(s) and account a partition's
    ``access`` options ask sbatch for (``-p a``, ``--partition=a``, ``-A x``, ``--account x``; one list item or
    two); a key is absent when the options do not say it. ValueError for a value with anything but a name in it
    (it reaches job scripts and the child jobs' SCHEDULER_PARAMETERS)."""
    import shlex
    words = shlex.split(' '.join(str(a) for a in access or ()))
    places = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word in _ACCESS_PLACES:                               # -p batch, --partition batch
            name, value = word, words[i + 1] if i + 1 < len(words) else ''
            i += 1
        elif word.split('=', 1)[0] in ('--partition', '--account'):
            name, value = word.split('=', 1)
        elif word[:2] in ('-p', '-A') and len(word) > 2:         # -pbatch
            name, value = word[:2], word[2:]
        else:
            name = None
        if name:
            if not _ACCESS_VALUE.fullmatch(value):
                raise ValueError(f'access option {name} {value!r}: not a Slurm partition or account name')
            places[_ACCESS_PLACES[name]] = value
        i += 1
    return places


def with_places(system):
    """``system`` with each Slurm partition's :func:`access_places` in its extras (kept when the partition later
    runs in an allocation, whose access options are dropped): each case checks on its node that it ran there
    (:class:`ibrepro.rfm.launch.Placement`)."""
    partitions = []
    for part in system['partitions']:
        if part.get('scheduler') in SLURM_SCHEDULERS:
            try:
                places = access_places(part.get('access'))
            except ValueError as err:
                raise trust.Refused(f'system {system["name"]} partition {part["name"]}: {err}') from None
            part = {**part, 'extras': {**places, **part.get('extras', {})}}
        partitions.append(part)
    return {**system, 'partitions': partitions}


def run_in_allocation(system, job_id):
    """``system`` with each Slurm partition running its tests as job steps of allocation ``job_id``: a job
    submitted from inside it would wait for the very nodes the allocation holds. Same partition names, so results
    stay comparable."""
    partitions = []
    for part in system['partitions']:
        if part.get('scheduler') in SLURM_SCHEDULERS:
            part = {**part, 'scheduler': 'local', 'access': [],
                    # srunalloc: srun with the test's task layout, inside the allocation
                    'launcher': 'srunalloc' if part.get('launcher') in ('srun', None) else part['launcher'],
                    'extras': {**part.get('extras', {}), 'slurm_allocation': job_id},
                    'descr': f'{part.get("descr", part["name"])} [in Slurm allocation {job_id}]'}
        partitions.append(part)
    return {**system, 'partitions': partitions}


def nightly_id(environ=os.environ):
    """The nightly run sessions belong to: ``$IBREPRO_NIGHTLY`` (ci/nightly.sh sets it, GitLab child jobs inherit
    it), else the date and time."""
    night = environ.get('IBREPRO_NIGHTLY') or time.strftime('%Y%m%dT%H%M%S')
    if not _NIGHTLY_ID.fullmatch(night):
        raise trust.Refused(f'IBREPRO_NIGHTLY={night!r}: a nightly id is 1-64 letters, digits and ._:- (it becomes a '
                         'session extra and a CI variable)')
    return night


def configured_host():
    """This host's name if a system of the loaded configuration names it (``autodetect_methods``): otherwise
    ReFrame would fall back to its ``generic`` system and run 0 test cases, successfully. Raising makes ReFrame
    stop with "all autodetection methods failed" (exit 1); the reason goes to stderr first."""
    host = socket.gethostname()
    if any(re.match(pattern, host) for pattern in _HOSTNAMES):
        return host
    message = (f'ibrepro: host {host!r} matches the hostnames of no system of this configuration '
               f'({", ".join(_HOSTNAMES)}): name the system with --system <name>, or add this host to its '
               'hostnames')
    print(message, file=sys.stderr)
    raise LookupError(message)


def trusted_storage(systems, environ=os.environ):
    """The data directory, checked before ReFrame writes or runs anything under it; every refusal is one line
    (:class:`ibrepro.trust.Refused`, a ConfigError to ReFrame).

    ReFrame runs the job scripts it writes in ``<prefix>/stage/<system>/<partition>/<environ>/<test>/``, appends to
    perflogs, and stores sessions in the results database, taking a lock beside it: each of these, and every
    directory above them, must be ours to trust (:func:`ibrepro.trust.problem`): another user able to rename a
    stage directory, or owning one, runs their job script as us. The directories ibrepro makes are made private.
    The results database must be ReFrame's own tables, without a trigger (:func:`ibrepro.results.check_schema`).
    """
    from . import results   # noqa: PLC0415  (the configuration needs it only here)

    home = paths.data_home()
    refuse_shell_syntax(home, 'IBREPRO_HOME')    # the data directory: ReFrame expands its prefix
    if any(c.isspace() for c in str(home)):
        # ReFrame's job scripts and local scheduler split the stage directory's path at white space
        raise trust.Refused(f'the ibrepro data directory {str(home)!r} has white space in its path, which ReFrame '
                            'cannot run jobs in: set IBREPRO_HOME to a directory without')

    def ours(path, make=False, kind='dir'):
        path = Path(path)
        root = home if path == home or home in path.parents else path
        if make:
            return trust.make_dir(path, root=root, name='IBREPRO_HOME', environ=environ)
        return trust.check(path, kind=kind, root=root, name='IBREPRO_HOME', environ=environ)

    ours(home, make=True)
    for sub in ('logs', 'perflogs', paths.run_reports_dir().name):
        ours(home / sub, make=True)
    for system in systems:
        prefix = Path(system.get('prefix', home / 'rfm'))
        for kind in ('stage', 'output'):
            base = Path(system.get(f'{kind}dir') or prefix / kind)
            for part in system.get('partitions', []):
                for environ_name in part.get('environs', []):
                    level = ours(base / system['name'] / part['name'] / environ_name)
                    if level.is_dir():   # a test's directory left by someone else: ReFrame would reuse it
                        for entry in os.scandir(level):
                            ours(entry.path, kind=None)
        for part in system.get('partitions', []):
            ours(home / 'perflogs' / system['name'] / part['name'])
    db = paths.results_db()
    named = 'RFM_SQLITE_DB_FILE' if os.environ.get('RFM_SQLITE_DB_FILE') else 'IBREPRO_HOME'
    # ReFrame makes its lock and journal beside the database: a directory of ours, no sticky /tmp
    trust.make_dir(db.parent, root=home if home in db.parents else db.parent, name=named, environ=environ)
    for path in [db, db.with_name('.db.lock'), *(Path(f'{db}{s}') for s in ('-journal', '-wal', '-shm'))]:
        trust.check(path, kind='file', root=db.parent, name=named, environ=environ)
    if db.exists():
        try:
            results._connect(db, timeout=1).close()
        except results.DatabaseBusy:
            # another ReFrame of ours is storing a session (only we can write the file, checked above): ReFrame
            # waits for it itself and says so when it cannot store, the session kept in its run report
            pass
        except results.ResultsError as err:
            raise trust.Refused(str(err)) from None
    return home


def site_configuration(systems, environments, *, modes=(), nightly_subset=False, environ=os.environ):
    """A complete ReFrame configuration for ``systems``, with ibrepro's storage, reports and references.

    ``--mode nightly`` runs serially with one retry and stores the nightly id (:func:`nightly_id`) as session
    extra ``nightly``; with ``nightly_subset`` it selects the ``nightly`` tag too (every figure of the papers once,
    reference-data/nightly.yaml): what a cluster runs every night. Inside a Slurm allocation (:func:`in_allocation`)
    Slurm partitions run as job steps of it (:func:`run_in_allocation`). A host no system names fails instead of
    running ReFrame's ``generic`` system (:func:`configured_host`).
    """
    systems = [with_places(system) for system in systems]
    job_id = in_allocation(environ)
    if job_id:
        systems = [run_in_allocation(system, job_id) for system in systems]
    night = nightly_id(environ)
    _HOSTNAMES.extend(p for system in systems for p in system['hostnames'] if p not in _HOSTNAMES)
    home = trusted_storage(systems, environ)
    if nightly_subset:
        from .catalog import NightlyError, nightly_cases   # noqa: PLC0415  (what tags the checks' nightly cases)
        try:
            nightly_cases()              # a broken subset fails the run, never a smaller night
        except NightlyError as err:
            raise trust.Refused(str(err)) from None

    general = [{
        'target_systems': [system['name']],
        'check_search_recursive': True,
        'report_file': str(paths.run_reports_dir() / 'run-report-{sessionid}.json'),
    } for system in systems]
    return {
        'systems': list(systems),
        'environments': list(environments),
        'autodetect_methods': ['py::ibrepro.rfmconfig.configured_host'],
        'general': general,
        'storage': [{'enable': True, 'sqlite_db_file': str(paths.results_db()),
                     # a shared group directory (IBREPRO_GROUP): the group writes the database and its lock
                     **({'sqlite_db_file_mode': '660'} if trust.shared_group(environ) is not None else {})}],
        'modes': [
            # --ci-generate passes only --mode on to GitLab child jobs: the night's id comes with it
            {'name': 'nightly', 'options': ['--exec-policy=serial', '--max-retries=1', '--performance-report',
                                            f'--session-extras=nightly={night}',
                                            *(['--tag=nightly'] if nightly_subset else []),
                                            *bands.night_options()]},
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
