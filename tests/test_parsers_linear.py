"""Every parser is linear in its input: a long line (or a long run of blank lines) costs in proportion to its length.

Each tool's real output gets one hostile line (scripts/bench_hostile_inputs.py: a prefix that reaches one of the
parsers' patterns, a run of blanks, letters) at its top, middle and end, at two lengths, 8x apart, in the same
run: linear code takes about 8x longer (less where the rest of the output dominates), a pattern that backtracks
over the line (a lazy ``(.*?)\\s*$``) 64x. No wall-clock limit: only the growth is asserted (a growth above the
limit is measured again, best of 5, before the verdict: the machine may be loaded); one parse that does not
finish in a minute stops the test instead of hanging it.
"""

import importlib.util
import signal
import time
from pathlib import Path

import pytest

from ibrepro import parsers

ROOT = Path(__file__).resolve().parents[1]
SIZE = 2_500       # characters of the short line
FACTOR = 8          # the long line is this many times longer
#: Growth above this for 8x the input is not linear (linear: at most 8, cache effects included; quadratic: 64).
MAX_GROWTH = 24.0
HANG_SECONDS = 60


def _script():
    spec = importlib.util.spec_from_file_location('bench_hostile_inputs', ROOT / 'scripts' / 'bench_hostile_inputs.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hostile = _script()


class _Hang(Exception):
    pass


def _hang(signum, frame):
    raise _Hang()


def _seconds(text, repeat=1):
    best = float('inf')
    previous = signal.signal(signal.SIGALRM, _hang)
    try:
        for _ in range(repeat):
            began = time.process_time()   # CPU time: a loaded machine preempts, it does not add work
            signal.alarm(HANG_SECONDS)
            try:
                parsers.parse_text(text)
            except parsers.ParseError:
                pass
            finally:
                signal.alarm(0)
            best = min(best, time.process_time() - began)
    except _Hang:
        pytest.fail(f'one parse of {len(text)} characters did not finish in {HANG_SECONDS} s')
    finally:
        signal.signal(signal.SIGALRM, previous)
    return best


@pytest.mark.parametrize('blank_lines', [False, True], ids=['long-line', 'blank-lines'])
@pytest.mark.parametrize('tool', sorted(hostile.TOOL_FIXTURES))
def test_parsing_grows_linearly_with_a_long_line(tool, blank_lines):
    short = dict(hostile.long_line_inputs(tool, SIZE, blank_lines))
    long = dict(hostile.long_line_inputs(tool, FACTOR * SIZE, blank_lines))
    superlinear = []
    for name in short:
        growth = _seconds(long[name]) / _seconds(short[name])
        if growth > MAX_GROWTH:   # measure again, best of 5, before calling it
            growth = _seconds(long[name], 5) / _seconds(short[name], 5)
            if growth > MAX_GROWTH:
                superlinear.append(f'{name}: {growth:.1f}x for {FACTOR}x the line')
    assert superlinear == []


def test_the_hostile_lines_reach_the_patterns():
    """The inputs are what they claim: the long line is in the text, at the lengths asked."""
    inputs = dict(hostile.long_line_inputs('npb', 1000))
    text = inputs[' Class ='.strip() + '@middle']
    line = max(text.split('\n'), key=len)
    assert line.startswith(' Class =') and len(line) == 1000 and ' ' * 500 in line and line.endswith('x')
