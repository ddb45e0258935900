"""What the ``smpirun`` launcher runs inside a job: the host file, the program's path, then ``smpirun``.

    python -m ibrepro.simulated.launch --platform FILE --per-node P -np N [--cfg=NAME:VALUE ...] PROGRAM [ARGS]

* writes ``smpi-hosts.txt`` in the working directory (the stage directory): rank r on host ``node<r // P>``, the
  block mapping of the papers' ``NxP`` layouts;
* finds PROGRAM on PATH (``smpirun`` needs a path; the families name bare executables such as ``is.B.4``);
* runs ``smpirun -platform FILE -hostfile smpi-hosts.txt -np N --cfg=... PROGRAM ARGS``, or PROGRAM itself when
  it is no SMPI program (``ibrepro software``, the interpreter): it would not run under ``smpirun``.

``smpirun`` passes the program's arguments through an unquoted shell expansion and takes ``--cfg=`` arguments for
itself: an argument with whitespace, a glob character or a ``--cfg=``/``--log=`` prefix is refused here rather
than silently changed.
"""

import os
import re
import shutil
import sys
from pathlib import Path

HOSTFILE = 'smpi-hosts.txt'
USAGE = 'python -m ibrepro.simulated.launch --platform FILE [--per-node P] -np N [--cfg=...] PROGRAM [ARGS]'

_UNSAFE = re.compile(r'[\s*?\[\]]|^--(cfg|log)=')


def host_lines(ranks, per_node):
    """The host file's lines: consecutive ranks share a node (block mapping)."""
    return [f'node{r // per_node}' for r in range(ranks)]


def is_smpi_program(path):
    """Does the executable link SimGrid (built with smpicc / smpicxx / smpif90)?"""
    try:
        with open(path, 'rb') as fp:
            head = fp.read(4)
            return head == b'\x7fELF' and b'libsimgrid' in fp.read()
    except OSError:
        return False


def _die(message, code=1):
    print(f'ibrepro-smpirun: {message}', file=sys.stderr)
    sys.exit(code)


def parse(argv):
    """``(platform, per_node, ranks, cfg options, program, program args)`` of the launcher's command line:
    options come first, the first other word is the program."""
    values, cfg, i = {'--platform': None, '--per-node': '1', '-np': None}, [], 0
    while i < len(argv) and argv[i].startswith('-'):
        if argv[i].startswith('--cfg='):
            cfg.append(argv[i])
            i += 1
        elif argv[i] in values and i + 1 < len(argv):
            values[argv[i]] = argv[i + 1]
            i += 2
        else:
            _die(f'unknown option {argv[i]!r} (usage: {USAGE})', 2)
    if i >= len(argv) or values['--platform'] is None or values['-np'] is None:
        _die(f'usage: {USAGE}', 2)
    try:
        per_node, ranks = int(values['--per-node']), int(values['-np'])
    except ValueError:
        _die(f'--per-node and -np take whole numbers (usage: {USAGE})', 2)
    if per_node < 1 or ranks < 1:
        _die(f'-np {ranks} and --per-node {per_node} must be positive', 2)
    return Path(values['--platform']), per_node, ranks, cfg, argv[i], argv[i + 1:]


def main(argv=None):
    platform, per_node, ranks, cfg, name, args = parse(list(sys.argv[1:] if argv is None else argv))
    program = name if '/' in name else shutil.which(name)
    if not program or not os.access(program, os.X_OK):
        _die(f'{name}: command not found (not on the PATH of this environment: make simulated-build)', 127)

    if not is_smpi_program(program):
        os.execv(program, [program, *args])

    smpirun = shutil.which('smpirun')
    if not smpirun:
        _die('smpirun not found: SimGrid is not installed (apt-get install libsimgrid-dev gfortran)', 127)
    if not platform.is_file():
        _die(f'platform file {platform} not found')
    bad = [a for a in args if _UNSAFE.search(a)]
    if bad:
        _die(f'argument {bad[0]!r}: smpirun would split, expand or take it (whitespace, glob characters, '
             '--cfg=/--log=)', 2)

    Path(HOSTFILE).write_text('\n'.join(host_lines(ranks, per_node)) + '\n')
    sys.stdout.flush()
    os.execv(smpirun, [smpirun, '-platform', str(platform), '-hostfile', HOSTFILE, '-np', str(ranks), *cfg,
                       program, *args])


if __name__ == '__main__':
    main()
