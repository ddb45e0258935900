"""Time and peak memory of hostile inputs: one very long line through every parser, a YAML alias bomb.

    .venv/bin/python scripts/bench_hostile_inputs.py [--size 1000000] [--timeout 120] [--memory-mb 4096]

Long lines: a real output of each tool (tests/fixtures) with one line of ``--size`` characters inserted where the
tool's patterns read (a header, a setting, a summary field: see LINE_PREFIXES), made of a 500,000-space run and
then letters (a run of blanks is what lazy ``(.*?)\\s*$`` patterns backtrack over). Each input is parsed in its
own process (``ibrepro.parsers.parse_text``), killed after ``--timeout`` seconds or at ``--memory-mb`` of address
space; the script prints the wall time and the peak resident memory (VmHWM) of the worst input per tool.

Alias bomb: a references.yaml of nine levels of aliases, each a list of nine of the one before (468 bytes, 9^9
leaves once expanded), as ``systems/bomb/references.yaml`` of a copy of reference-data/, through
``ibrepro.references.validate`` (``ibrepro refs validate``), under the same limits.

Through ReFrame (``--checkout`` names the checkout whose configs/local.py and reframe-checks/ are used; run it
with ``PYTHONPATH=<checkout>/src`` and ``IBREPRO_DEPS`` set to measure another one), each in its own process group
under the same limits:

* references files of 200 KB and 2 MB (the example cluster's real references, its partitions repeated under new
  names, plus this machine's ``local:default``) given with ``RFM_REFERENCE_PREFIX`` to a listing of every check
  (``reframe -l``: every test instance is created and judged against the file);
* a references file nested 100,000 levels deep, the same way;
* ``-S inject_us=inf`` and ``-S inject_pct=1e308`` on one IMB PingPong case (``-r``: the injector would busy-wait
  in every MPI call).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / 'tests' / 'fixtures'

#: One real output per tool.
TOOL_FIXTURES = {
    'imb': 'imb/2021.8/IMB-MPI1-PingPong-2.txt',
    'osu': 'osu/5.3/osu_mbw_mr-2.txt',
    'npb': 'npb/3.4.2/cg.A-2.txt',
    'perftest': 'perftest/4.5-0.17-rxe/ib_write_bw.txt',
    'bench': 'ibrepro-bench/0.1.0/overhead-2.txt',
}
#: How a long line starts: each reaches one of the patterns of one or several parsers.
LINE_PREFIXES = [
    '', '#', '# ', '#    Intel(R) MPI Benchmarks 2021.8, MPI-1', '# Date                  :', '# Date : x',
    '# Benchmarking PingPong', '# #processes = 2', '#bytes', '# MODE:', 'Invalid benchmark name',
    '# Calling sequence was:', '# OSU MPI', '# [ pairs:', '# [ pairs: 2', '# Datatype:', '# Datatype: x', '# Size',
    'DATA VALIDATION ERROR:', 'DATA VALIDATION ERROR: x', 'This test requires', 'nprocs:', ' Class', ' Class =',
    ' Class = A', '    MPIF77 =', '    MPIF77 = x', ' CG Benchmark Completed.', 'ERROR: Number of processes',
    '-' * 60, '                    RDMA_Write BW', ' Device         :', ' Device         : x', 'Version:',
    "Couldn't connect to", ' #bytes', 'WARNING:', '# ibrepro-bench overhead', '# table:', '# key:', '# key: x',
    'ibrepro_overhead: error:', 'ibrepro_overhead: error: x', 'bytes', 'MPI_ABORT was invoked on rank 0',
    'EXIT STRING:', 'srun: error: node1: tasks 0:', 'mpirun has detected an attempt to run as root',
    'Runtime environment uses unsupported PMI version', 'detected that one or more processes exited with non-zero',
]


def long_line(prefix, size, blanks=None):
    """``prefix``, a run of blanks (half of ``size`` unless given), then letters up to ``size`` characters."""
    blanks = size // 2 if blanks is None else blanks
    return (prefix + ' ' * blanks + 'x' * size)[:max(size, len(prefix) + blanks + 1)]


def long_line_inputs(tool, size, blank_lines=False):
    """(name, text) of the tool's fixture with one long line inserted after its first line, at its middle, three
    quarters, and before its last line (with ``blank_lines``: the prefix, then ``size`` characters of blank lines,
    then letters)."""
    lines = (FIXTURES / TOOL_FIXTURES[tool]).read_text().split('\n')
    for prefix in LINE_PREFIXES:
        line = long_line(prefix, size) if not blank_lines else prefix + ' \n' * (size // 4) + 'x' * (size // 2)
        for where, at in (('top', 1), ('middle', len(lines) // 2), ('3/4', 3 * len(lines) // 4),
                          ('end', len(lines) - 1)):
            yield f'{prefix.strip()[:30] or "blank"}@{where}', '\n'.join(lines[:at] + [line] + lines[at:])


def alias_bomb(levels=9, width=9):
    """A YAML document whose aliases expand to width^levels leaves (468 bytes for 9 x 9)."""
    lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x]']
    for i in range(1, levels):
        lines.append(f'a{i}: &a{i} [' + ', '.join([f'*a{i - 1}'] * width) + ']')
    return '\n'.join(lines) + '\n'


_CHILD = r'''
import json, resource, sys, time
limit = int(sys.argv[2]) * 2 ** 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
kind, path = sys.argv[1], sys.argv[3]
began = time.perf_counter()
outcome = 'parsed'
try:
    if kind == 'parse':
        from ibrepro import parsers
        try:
            parsers.parse_text(open(path).read(), source=path)
        except parsers.ParseError as err:
            outcome = f'refused: {str(err)[len(path) + 2:]}'
    else:
        import shutil, tempfile
        from pathlib import Path
        from ibrepro import paths, references
        root = Path(tempfile.mkdtemp()) / 'reference-data'
        shutil.copytree(paths.REFERENCE_DATA, root)
        (root / 'systems' / 'bomb').mkdir()
        shutil.copy(path, root / 'systems' / 'bomb' / 'references.yaml')
        problems = references.validate([root / 'systems' / 'bomb' / 'references.yaml'], root=root)
        outcome = '; '.join(str(p) for p in problems) or 'validated'
        outcome = outcome if len(outcome) < 200 else outcome[:200]
except MemoryError:
    outcome = 'MemoryError'
except Exception as err:
    outcome = f'{type(err).__name__}: {str(err)[:150]}'
took = time.perf_counter() - began
# VmHWM: the peak resident memory of this program (ru_maxrss would include the parent's, inherited over exec)
peak = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))
print(json.dumps({'seconds': took, 'outcome': outcome, 'maxrss_mb': peak / 1024}))
'''


def measure(kind, text, timeout, memory_mb, work):
    """Run one input in a child; its time, peak RSS (MB) and outcome. A child past ``timeout`` is killed, its peak
    RSS read from /proc just before."""
    path = work / f'input-{kind}.txt'
    path.write_text(text)
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, '-c', _CHILD, kind, str(memory_mb), str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        peak = _peak_rss(proc.pid)
        proc.kill()
        proc.communicate()
        return {'seconds': time.perf_counter() - began, 'outcome': f'killed after {timeout:g} s', 'maxrss_mb': peak}
    if proc.returncode:
        return {'seconds': time.perf_counter() - began, 'outcome': f'exit {proc.returncode}: {err[-200:]}',
                'maxrss_mb': None}
    return json.loads(out.strip().splitlines()[-1])


_REFRAME_CHILD = r'''
import json, os, resource, subprocess, sys
limit = int(sys.argv[1]) * 2 ** 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proc = subprocess.run(sys.argv[2:], capture_output=True, text=True)
out = proc.stdout + proc.stderr
said = [line.strip() for line in out.splitlines() if any(k in line for k in (
    'references file', 'inject_', 'Found ', 'PASSED', 'FAILED', 'Segmentation', 'MemoryError', 'Error'))]
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({'returncode': proc.returncode, 'said': said[-3:], 'maxrss_mb': peak}))
'''


def references_file(size):
    """A references file of about ``size`` bytes: the example cluster's, its partitions repeated under new names,
    with this machine's partition (``local:default``) under every check it names."""
    import yaml
    real = yaml.safe_load((ROOT / 'reference-data' / 'systems' / 'example-cluster' / 'references.yaml').read_text())
    doc, one = {}, len(yaml.safe_dump(real))
    for copies in range(1, int(size / one * 1.11) + 2):     # a copy of the partitions is ~0.9 of the whole file
        for check, body in real.items():
            entry = doc.setdefault(check, {k: v for k, v in body.items() if k == '$index'})
            for partition, refs in body.items():
                if partition != '$index':     # copies, not the same object (which YAML would write as an alias)
                    entry[f'{partition}-{copies}'] = json.loads(json.dumps(refs))
                    entry.setdefault('local:default', json.loads(json.dumps(refs)))
    return yaml.safe_dump(doc, sort_keys=False)


def reframe_inputs():
    """(name, references text or None, reframe arguments) of the inputs measured through ReFrame."""
    listing = ['-c', 'reframe-checks', '-l']
    pingpong = ['-c', 'reframe-checks', '-r', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-p', 'impi',
                '-S', 'message_sizes=8:8', '-S', 'iterations=100']
    for kb in (200, 2000):
        text = references_file(kb * 1000)
        yield f'references file of {len(text) // 1000} KB (reframe -l)', text, listing
    yield 'references file 100,000 deep (reframe -l)', 'IMBPointToPoint: ' + '[' * 100_000 + ']' * 100_000 + '\n', \
        listing
    yield 'inject_us=inf (reframe -r, 1 case)', None, pingpong + ['-S', 'inject_us=inf']
    yield 'inject_pct=1e308 (reframe -r, 1 case)', None, pingpong + ['-S', 'inject_pct=1e308']


def measure_reframe(refs, args, checkout, timeout, memory_mb, work):
    """Run ReFrame on one input in its own process group (killed whole after ``timeout``): time, peak RSS of the
    processes it waited for (MB) and what it said."""
    import shutil
    import signal
    home = work / f'home-{time.monotonic_ns()}'
    env = {**os.environ, 'IBREPRO_HOME': str(home)}
    for var in ('RFM_SQLITE_DB_FILE', 'RFM_REFERENCE_PREFIX', 'RFM_CONFIG_FILES', 'RFM_SYSTEM'):
        env.pop(var, None)
    if refs is not None:
        prefix = work / f'refs-{time.monotonic_ns()}'
        prefix.mkdir()
        (prefix / 'references.yaml').write_text(refs)
        env['RFM_REFERENCE_PREFIX'] = str(prefix)
    reframe = [str(Path(sys.executable).parent / 'reframe'), '-C', 'configs/local.py', *args]
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, '-c', _REFRAME_CHILD, str(memory_mb), *reframe], cwd=checkout, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = _descendants(proc.pid)            # ReFrame and what it started (MPI ranks get their own groups)
        peak = max((_peak_rss(pid) or 0 for pid in tree), default=None)
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate()
        shutil.rmtree(home, ignore_errors=True)
        return {'seconds': time.perf_counter() - began, 'outcome': f'killed after {timeout:g} s', 'maxrss_mb': peak}
    shutil.rmtree(home, ignore_errors=True)
    if proc.returncode:
        return {'seconds': time.perf_counter() - began, 'outcome': f'exit {proc.returncode}: {err[-200:]}',
                'maxrss_mb': None}
    result = json.loads(out.strip().splitlines()[-1])
    said = ' | '.join(result['said']) or '(nothing)'
    return {'seconds': time.perf_counter() - began, 'maxrss_mb': result['maxrss_mb'],
            'outcome': f'exit {result["returncode"]}: {said}'}


def _peak_rss(pid):
    try:
        for line in Path(f'/proc/{pid}/status').read_text().splitlines():
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _descendants(pid):
    """``pid`` and every process below it (from /proc: parent pids), stopped first so that none escapes."""
    import signal
    children = {}
    for entry in Path('/proc').iterdir():
        try:
            if entry.name.isdigit():
                children.setdefault(int((entry / 'stat').read_text().rsplit(')', 1)[1].split()[1]), []).append(
                    int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        try:
            os.kill(current, signal.SIGSTOP)
        except ProcessLookupError:
            continue
        todo += children.get(current, [])
    return tree


def _load():
    return ' '.join(Path('/proc/loadavg').read_text().split()[:3]) if Path('/proc/loadavg').exists() else '?'


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--size', type=int, default=1_000_000, help='characters of the long line')
    parser.add_argument('--timeout', type=float, default=120)
    parser.add_argument('--memory-mb', type=int, default=4096, help='address-space limit of each child')
    parser.add_argument('--tools', nargs='+', default=list(TOOL_FIXTURES))
    parser.add_argument('--screen', type=int, default=2000,
                        help="line length of the screening pass that picks each tool's slowest input")
    parser.add_argument('--inputs', nargs='+', metavar='TOOL=NAME', default=[],
                        help='measure these inputs instead of screening (names as printed, e.g. "npb=Class =@end")')
    parser.add_argument('--checkout', type=Path, default=ROOT,
                        help='the checkout whose configs/ and reframe-checks/ ReFrame runs (default: this one)')
    parser.add_argument('--only', choices=['parsers', 'reframe'], help='measure only the parsers and the alias '
                        'bomb, or only the inputs through ReFrame')
    args = parser.parse_args()

    import tempfile
    work = Path(tempfile.mkdtemp(prefix='bench-hostile-'))
    from ibrepro import parsers     # PYTHONPATH=<another checkout>/src measures that one

    chosen = dict(item.split('=', 1) for item in args.inputs)
    print(f'ibrepro from {Path(parsers.__file__).parents[1]}; line of {args.size} characters')
    print(f'{"input":<44} {"seconds":>9} {"peak RSS MB":>11}  outcome   (load 1/5/15 min)')
    if args.only != 'reframe':
        parser_inputs(args, chosen, work)
    if args.only != 'parsers':
        for label, refs, reframe_args in reframe_inputs():
            load = _load()
            result = measure_reframe(refs, reframe_args, args.checkout, args.timeout, args.memory_mb, work)
            rss = f'{result["maxrss_mb"]:.0f}' if result['maxrss_mb'] else '-'
            print(f'{label:<44} {result["seconds"]:>9.2f} {rss:>11}  {result["outcome"][:150]}   ({load})',
                  flush=True)


def parser_inputs(args, chosen, work):
    from ibrepro import parsers
    for tool in args.tools:
        if tool not in chosen:   # screen every input at a short length in-process: the slowest is measured
            slowest = -1.0
            for name, text in long_line_inputs(tool, args.screen):
                began = time.perf_counter()
                try:
                    parsers.parse_text(text, tool=tool)
                except parsers.ParseError:
                    pass
                if time.perf_counter() - began > slowest:
                    slowest, chosen[tool] = time.perf_counter() - began, name
        for label, text in ((f'{tool} (the real output alone)', (FIXTURES / TOOL_FIXTURES[tool]).read_text()),
                            (f'{tool}={chosen[tool]}', dict(long_line_inputs(tool, args.size))[chosen[tool]])):
            load = _load()
            result = measure('parse', text, args.timeout, args.memory_mb, work)
            rss = f'{result["maxrss_mb"]:.0f}' if result['maxrss_mb'] else '-'
            print(f'{label:<44} {result["seconds"]:>9.2f} {rss:>11}  {result["outcome"][:70]}   ({load})', flush=True)

    bomb = alias_bomb()
    load = _load()
    result = measure('yaml', bomb, args.timeout, args.memory_mb, work)
    rss = f'{result["maxrss_mb"]:.0f}' if result['maxrss_mb'] else '-'
    print(f'{f"YAML alias bomb ({len(bomb)} bytes)":<44} {result["seconds"]:>9.2f} {rss:>11}  '
          f'{result["outcome"][:60]}   ({load})')


if __name__ == '__main__':
    main()
