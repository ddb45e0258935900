"""What the simulated system runs, built with SimGrid's compilers: our MPI benchmarks and NAS IS.

* SimGrid: Debian's ``libsimgrid-dev`` (``smpicc``, ``smpirun``; ``gfortran`` for ``smpif90``). It is never
  assumed: :func:`smpirun` says whether it is there, and ``make simulated-test`` / ``.ci/run`` install it.
* Our benchmarks (``benchmarks/``, ``ibrepro_imb`` among them): ``make -C benchmarks mpi MPICC=smpicc``.
* NAS IS (NPB 3.3, C): the copy adapted for SMPI in SimGrid's own Debian source package
  (``examples/smpi/NAS``), fetched with ``apt-get source`` through a private apt state (nothing in /etc/apt
  changes). SimGrid's IS takes ``nprocs class`` on its command line; we build NPB 3.3's per-count binaries
  (``is.B.4``, which the NPB family runs with extras ``npb_binary: '{program}.{cls}.{ranks}'``) by linking a
  ``get_info`` that returns the compiled count and class.

IMB, OSU and NPB FT are on no registry reachable here: where a site has them built with SMPI's compilers, put
their prefix in ``$IBREPRO_SMPI_PREFIX`` and the ``smpi`` environment offers them too.
"""

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from .. import paths

#: Where the simulated system's binaries are built (the ``smpi`` environment's PATH).
BUILD_DIR = paths.REPO_ROOT / 'build' / 'smpi'
BIN_DIR = BUILD_DIR / 'bin'

#: SimGrid's Debian source package, fetched once (apt-get source) and kept here.
SOURCE_DIR = paths.DEPS_DIR / 'simgrid-src'

#: NAS IS builds: NPB class and process counts. B at the papers' layouts (000: 4x1, 4x2; 002: 2, 4, 8 nodes,
#: 8x2), S (seconds) for tests.
IS_BUILDS = {'B': (2, 4, 8, 16), 'A': (4, 8), 'S': (2, 4, 8)}

#: The Debian source package providing examples/smpi/NAS.
SOURCE_PACKAGE = 'simgrid'
DEBIAN_SOURCES = 'deb-src http://deb.debian.org/debian bookworm main\n'

_GET_INFO = '''/* ibrepro: NPB 3.3's per-count binaries from SimGrid's IS, which reads "nprocs class" from argv. */
void get_info(int argc, char *argv[], int *nprocsp, char *classp)
{
    (void)argc;
    (void)argv;
    *nprocsp = NPB_NPROCS;
    *classp = NPB_CLASS;
}
'''


class BuildError(RuntimeError):
    pass


def smpirun():
    """Path of ``smpirun``, or None when SimGrid is not installed."""
    return shutil.which('smpirun')


def missing_reason():
    """Why the simulated system cannot run here ('' when it can)."""
    missing = [tool for tool in ('smpirun', 'smpicc') if not shutil.which(tool)]
    if missing:
        return (f'SimGrid is not installed ({", ".join(missing)} not found): apt-get install libsimgrid-dev '
                'gfortran, then make simulated-build')
    return ''


def simgrid_version():
    """SimGrid's version as ``smpirun -version`` prints it ('3.32'), or None."""
    if not smpirun():
        return None
    try:
        out = subprocess.run([smpirun(), '-version'], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'SimGrid version (\S+)', out)
    return m.group(1) if m else None


def _run(cmd, **kwargs):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode:
        raise BuildError(f'{" ".join(map(str, cmd))} failed ({proc.returncode}): '
                         f'{(proc.stdout + proc.stderr).strip()[-2000:]}')
    return proc.stdout


def fetch_nas(source_dir=SOURCE_DIR):
    """SimGrid's ``examples/smpi/NAS`` from its Debian source package (downloaded once; apt verifies it)."""
    nas = source_dir / 'NAS'
    if (nas / 'is.c').is_file():
        return nas
    if not shutil.which('apt-get'):
        raise BuildError('apt-get not found: NAS IS comes from SimGrid\'s Debian source package')

    source_dir.mkdir(parents=True, exist_ok=True)
    apt = source_dir / 'apt'
    for sub in ('lists/partial', 'cache/archives/partial'):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    (apt / 'sources.list').write_text(DEBIAN_SOURCES)
    opts = [f'-o=Dir::Etc::SourceList={apt / "sources.list"}', '-o=Dir::Etc::SourceParts=/dev/null',
            f'-o=Dir::State::Lists={apt / "lists"}', f'-o=Dir::Cache={apt / "cache"}',
            '-o=Debug::NoLocking=1']
    if os.geteuid() == 0:
        opts.append('-o=APT::Sandbox::User=root')   # the private directories are root's, not _apt's
    with tempfile.TemporaryDirectory(dir=source_dir) as tmp:
        _run(['apt-get', *opts, '-qq', 'update'], timeout=600)
        _run(['apt-get', *opts, '-qq', 'source', '--download-only', SOURCE_PACKAGE], cwd=tmp, timeout=600)
        origs = sorted(Path(tmp).glob(f'{SOURCE_PACKAGE}_*.orig.tar.*'))
        if not origs:
            raise BuildError(f'apt-get source {SOURCE_PACKAGE} gave no .orig tarball in {tmp}')
        with tarfile.open(origs[0]) as tar:
            members = [m for m in tar.getmembers()
                       if re.fullmatch(r'[^/]+/examples/smpi/NAS/[\w.]+', m.name) and m.isfile()]
            if not any(m.name.endswith('/is.c') for m in members):
                raise BuildError(f'{origs[0].name} has no examples/smpi/NAS/is.c')
            staging = Path(tmp) / 'NAS'
            staging.mkdir()
            for m in members:
                (staging / Path(m.name).name).write_bytes(tar.extractfile(m).read())
        (staging / 'SOURCE').write_text(f'{origs[0].name}: examples/smpi/NAS (apt-get source {SOURCE_PACKAGE})\n')
        staging.replace(nas)
    shutil.rmtree(apt, ignore_errors=True)     # the package lists (~20 MB) served their purpose
    return nas


def build_benchmarks(build_dir=BUILD_DIR):
    """Our MPI benchmarks with smpicc into ``build_dir/bin``."""
    _run(['make', '-s', '-C', str(paths.REPO_ROOT / 'benchmarks'), 'mpi', f'BUILD={build_dir}', 'MPICC=smpicc'],
         timeout=600)


def build_is(nas_dir, bin_dir=BIN_DIR, builds=IS_BUILDS):
    """NPB 3.3 binaries ``is.<class>.<count>`` from SimGrid's IS."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / 'get_info.c').write_text(_GET_INFO)
        # SimGrid's own get_info (argv) is renamed away; ours links instead
        common = tmp / 'nas_common.o'
        _run(['smpicc', '-O2', '-c', str(nas_dir / 'nas_common.c'), '-Dget_info=nas_get_info_from_argv',
              '-o', str(common)], timeout=300)
        for cls, counts in builds.items():
            for count in counts:
                out = bin_dir / f'is.{cls}.{count}'
                _run(['smpicc', '-O2', f'-I{nas_dir}', f'-DNPB_NPROCS={count}', f"-DNPB_CLASS='{cls}'",
                      str(nas_dir / 'is.c'), str(tmp / 'get_info.c'), str(common), '-lm', '-o', str(out)],
                     timeout=300)
    return sorted(bin_dir.glob('is.*'))


def build(build_dir=BUILD_DIR, with_nas=True):
    """Everything the ``smpi`` environment runs; returns what was built."""
    reason = missing_reason()
    if reason:
        raise BuildError(reason)
    build_benchmarks(build_dir)
    built = sorted((build_dir / 'bin').glob('ibrepro_*'))
    if with_nas:
        built += build_is(fetch_nas(), build_dir / 'bin')
    return built


def add_cli(subparsers):
    p = subparsers.add_parser('build', help='build our benchmarks and NAS IS with SimGrid\'s smpicc',
                              description='Build what the simulated system runs into build/smpi/bin: our MPI '
                                          'benchmarks (smpicc) and NAS IS from SimGrid\'s Debian source package.')
    p.add_argument('--no-nas', action='store_true', help='only our benchmarks (no apt-get source)')
    p.set_defaults(func=_cli)


def _cli(args):
    try:
        built = build(with_nas=not args.no_nas)
    except BuildError as err:
        print(f'ibrepro simulated build: {err}')
        return 1
    print(f'built {len(built)} programs in {BIN_DIR}: {", ".join(p.name for p in built)}')
    return 0
