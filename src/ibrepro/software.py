"""The software a session ran with: MPI library, benchmark tools, rdma-core, Spack lock, ibrepro itself.

``ibrepro software --json`` prints what the current environment (PATH, LD_LIBRARY_PATH, modules, Spack view)
provides; ``reframe-checks/system/software.py`` runs it inside every programming environment of every partition
so each stored session carries it (loggable variable ``software``).

* MPI: the text of ``MPI_Get_library_version``, which the MPI standard allows before ``MPI_Init``, called in a
  child process on the ``libmpi`` the environment's library path finds (so it is the library the benchmarks load,
  whatever its implementation); plus the first line of ``mpirun --version`` (the launcher).
* Benchmarks: every tool of :data:`ibrepro.rfmconfig.TOOL_BINARIES` found on PATH, with its version as the tool
  states it (``ib_write_lat --version``) or as the binary embeds it (IMB's banner), else from its install path.
* rdma-core: ``ibv_devinfo --version``; Spack: the sha256 of ``$SPACK_ENV/spack.lock``.
"""

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import paths, rfmconfig

#: Probe of the MPI library, run in a child so a broken library cannot take the probe down.
_MPI_PROBE = r'''
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
buf = ctypes.create_string_buffer(8192)
n = ctypes.c_int()
if lib.MPI_Get_library_version(buf, ctypes.byref(n)) != 0:
    sys.exit('MPI_Get_library_version failed')
print(buf.value.decode(errors='replace'))
'''

#: Version patterns embedded in a tool's binary (bytes regex, group 1 is the version).
_EMBEDDED = {
    'imb': rb'Intel\(R\) MPI Benchmarks (\d+(?:\.\d+)+)',
    'osu': rb'OSU Micro-Benchmarks[^\d\n]{0,20}(\d+(?:\.\d+)+)',
    'npb': rb'NPB ?(\d\.\d+)',
}
#: Version patterns in an install path (Spack prefixes, /opt/<tool>-<version>).
_IN_PATH = {
    'imb': r'(?:intel-mpi-benchmarks|imb)[-@/](\d+(?:\.\d+)+)',
    'osu': r'(?:osu-micro-benchmarks|omb)[-@/](\d+(?:\.\d+)+)',
    'npb': r'(?:npb|NPB)[-@/]?(\d\.\d+)',
    'perftest': r'perftest[-@/](\d+(?:\.\d+)+)',
}


def _run(cmd, timeout=20, env=None, check=True):
    """stdout+stderr of a command, or None if it cannot run (or fails, with ``check``)."""
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, env=env, errors='replace')    # the node's Python may be 3.6
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (proc.stdout + proc.stderr).strip() if proc.returncode == 0 or not check else None


def _first_line(text):
    """The first line of a version banner; a heading ending in ':' gets the next line too."""
    lines = [' '.join(line.split()) for line in (text or '').splitlines() if line.strip()]
    if not lines:
        return None
    return ' '.join(lines[:2]) if lines[0].endswith(':') and len(lines) > 1 else lines[0]


def find_libmpi(environ=os.environ):
    """The libmpi the environment's library path finds first, else the system's; None if there is none."""
    for directory in filter(None, environ.get('LD_LIBRARY_PATH', '').split(os.pathsep)):
        # libmpi.so itself may be a linker script (MPICH wheels): take a real shared object
        for lib in sorted(Path(directory).glob('libmpi.so*')):
            if lib.is_file() and lib.stat().st_size > 4096:
                return str(lib)
    import ctypes.util
    return ctypes.util.find_library('mpi')


def mpi_library(environ=os.environ):
    """{'library': first line of MPI_Get_library_version, 'details', 'libmpi', 'launcher'} (None when absent)."""
    libmpi = find_libmpi(environ)
    text = _run([sys.executable, '-c', _MPI_PROBE, libmpi], env=dict(environ)) if libmpi else None
    launcher = next((_run([exe, '--version']) for exe in ('mpirun', 'mpiexec') if shutil.which(exe)), None)
    return {
        'library': _first_line(text),
        'details': text[:1000] if text else None,
        'libmpi': libmpi,
        'launcher': _first_line(launcher),
    }


def tool_version(tool, path):
    """The version of a benchmark tool's binary, and how it was found: (version, source)."""
    if tool == 'perftest':
        out = _run([path, '--version'], check=False)   # perftest exits 1 after printing its version
        m = re.search(r'Version:\s*(\S+)', out or '')
        if m:
            return m.group(1), f'{Path(path).name} --version'
    if tool in _EMBEDDED:
        try:
            with open(path, 'rb') as fp:
                m = re.search(_EMBEDDED[tool], fp.read(64 << 20))
        except OSError:
            m = None
        if m:
            return m.group(1).decode(), 'embedded in the binary'
    m = re.search(_IN_PATH.get(tool, r'$^'), str(Path(path).resolve()))
    if m:
        return m.group(1), 'install path'
    return None, 'not stated by the binary'


def benchmarks():
    """{tool: {'path', 'version', 'source'}} for every benchmark tool found on PATH."""
    found = {}
    for tool, exes in rfmconfig.TOOL_BINARIES.items():
        path = next((shutil.which(exe) for exe in exes if shutil.which(exe)), None)
        if path:
            version, source = tool_version(tool, path)
            found[tool] = {'path': path, 'version': version, 'source': source}
    return found


def rdma_core():
    return _first_line(_run(['ibv_devinfo', '--version'])) if shutil.which('ibv_devinfo') else None


def spack_lock(environ=os.environ):
    """{'path', 'sha256'} of the active Spack environment's lock file, or None."""
    env = environ.get('SPACK_ENV')
    lock = Path(env) / 'spack.lock' if env else None
    if not lock or not lock.is_file():
        return None
    return {'path': str(lock), 'sha256': hashlib.sha256(lock.read_bytes()).hexdigest()}


def probe():
    """Everything this module knows about the current environment, as a JSON-able dict."""
    return {
        'mpi': mpi_library(),
        'benchmarks': benchmarks(),
        'rdma_core': rdma_core(),
        'spack_lock': spack_lock(),
        'ibrepro': paths.source_version(),
        'python': platform.python_version(),
        'os': platform.platform(),
        'hostname': platform.node(),
    }


def summary(software):
    """One line per item of a :func:`probe` dict, for reports."""
    mpi = software.get('mpi') or {}
    lines = [f"MPI: {mpi.get('library') or 'none found'}"
             + (f" (launcher: {mpi['launcher']})" if mpi.get('launcher') else '')]
    for tool, info in sorted((software.get('benchmarks') or {}).items()):
        lines.append(f"{tool}: {info.get('version') or 'version unknown'} ({info.get('path')})")
    lines.append(f"rdma-core: {software.get('rdma_core') or 'not installed (no ibv_devinfo)'}")
    lock = software.get('spack_lock')
    lines.append(f"Spack lock: {lock['sha256'][:12]} ({lock['path']})" if lock else 'Spack lock: no Spack environment')
    return lines


def add_cli(subparsers):
    p = subparsers.add_parser('software', help='MPI library, benchmark tools, rdma-core and Spack lock of this '
                                               'environment',
                              description=__doc__, formatter_class=__import__('argparse').RawDescriptionHelpFormatter)
    p.add_argument('--json', action='store_true', help='print JSON')
    p.set_defaults(func=_cli)


def _cli(args):
    found = probe()
    if args.json:
        json.dump(found, sys.stdout, indent=2)
        print()
    else:
        print('\n'.join(summary(found) + [f"ibrepro: {found['ibrepro']}", f"OS: {found['os']}"]))
    return 0
