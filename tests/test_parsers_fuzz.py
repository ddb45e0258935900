"""The parsers against mutated real outputs: no crash, no hang, no impossible value accepted.

Inputs are the real fixtures (tests/fixtures) mutated as a broken run, a garbled file or an attacker would:
truncation, lines dropped, duplicated or shuffled, bytes flipped, numbers replaced by nan/inf/1e308/1e400/-1,
one tool's header with another's body, CRLF line ends, long warning lines. Seeded; `make test` runs a few
thousand inputs, ``IBREPRO_FUZZ_INPUTS=100000`` the long run (``IBREPRO_FUZZ_SEED`` another seed).
"""

import math
import os
import random
import signal
from pathlib import Path

import pytest

from ibrepro import parsers

FIXTURES = Path(__file__).parent / 'fixtures'
INPUTS = int(os.environ.get('IBREPRO_FUZZ_INPUTS', 3000))
SEED = int(os.environ.get('IBREPRO_FUZZ_SEED', 20261121))
#: One input that takes longer than this hangs (the slowest real input takes milliseconds).
HANG_SECONDS = 30
BAD_NUMBERS = ['nan', '-nan', 'NaN', 'inf', '-inf', 'Infinity', '1e308', '1e400', '-1', '-5', '-0.5', '-1e-3',
               '0', '0.00', '1e-400', '99999999999999999999999']


def _fixtures():
    texts = []
    for path in sorted(FIXTURES.rglob('*.txt')):
        texts.append(path.read_text(errors='replace'))
    return texts


def _replace_number(rng, text):
    spans = [(i, j) for i, j in _number_spans(text)]
    if not spans:
        return text
    i, j = rng.choice(spans)
    return text[:i] + rng.choice(BAD_NUMBERS) + text[j:]


def _number_spans(text):
    i, n = 0, len(text)
    while i < n:
        if text[i].isdigit() and (i == 0 or text[i - 1] in ' \t\n'):
            j = i
            while j < n and (text[j].isdigit() or text[j] in '.eE+-'):
                j += 1
            yield i, j
            i = j
        else:
            i += 1


def mutate(rng, text, others):
    if not text:
        return text
    lines = text.split('\n')
    kind = rng.randrange(9)
    if kind == 0:
        return text[:rng.randrange(len(text) + 1)]
    if kind == 1:
        del lines[rng.randrange(len(lines))]
        lines = lines or ['']
    elif kind == 2:
        at = rng.randrange(len(lines))
        lines.insert(at, lines[at])
    elif kind == 3:
        at = rng.randrange(len(lines))
        window = lines[at:at + rng.randint(2, 8)]
        rng.shuffle(window)
        lines[at:at + len(window)] = window
    elif kind == 4:
        chars = list(text)
        for _ in range(rng.randint(1, 8)):
            chars[rng.randrange(len(chars))] = chr(rng.randrange(256))
        return ''.join(chars)
    elif kind == 5:
        for _ in range(rng.randint(1, 3)):
            text = _replace_number(rng, text)
        return text
    elif kind == 6:
        other = rng.choice(others).split('\n')
        return '\n'.join(lines[:rng.randrange(len(lines) + 1)] + other[rng.randrange(len(other) + 1):])
    elif kind == 7:
        return text.replace('\n', '\r\n')
    else:
        filler = rng.choice([' ', 'x', '9', '# ', '=', '.', 'a '])
        lines.insert(rng.randrange(len(lines) + 1),
                     rng.choice(['WARNING: ', '', '# ', ' 1024 ']) + filler * rng.randint(100, 20000))
    return '\n'.join(lines)


def impossible(out):
    """The first accepted value no measurement can produce (checked here from first principles), or None."""
    for table in out.tables:
        for row in table.rows:
            if table.size_key:
                size = row[table.size_key]
                if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                    return f'{table.benchmark}: size {size!r}'
            for metric, key in table.metrics.items():
                value = row.get(key)
                if value is None:
                    continue
                if (not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value))
                        or value < 0
                        or (metric in ('lat', 'time') and value == 0) or value > 1e12):
                    return f'{table.benchmark}: {metric} {value!r}'
    return None


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def fuzz(count, seed, check=True):
    """Run ``count`` mutated inputs; returns the tally (and the slowest input's time)."""
    import time

    rng = random.Random(seed)
    texts = _fixtures()
    tally = {'inputs': 0, 'parsed': 0, 'failed': 0, 'invalid-value': 0, 'crashes': [], 'hangs': [],
             'impossible': [], 'slowest': 0.0, 'example': None}
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for n in range(count):
            base = rng.choice(texts)
            text = base
            for _ in range(rng.randint(1, 3)):
                text = mutate(rng, text, texts)
            tally['inputs'] += 1
            began = time.perf_counter()
            signal.alarm(HANG_SECONDS)
            try:
                out = parsers.parse_text(text, source=f'input {n}')
            except parsers.BenchmarkFailed as err:
                tally['failed'] += 1
                if err.kind == 'invalid-value':
                    tally['invalid-value'] += 1
                    tally['example'] = tally['example'] or str(err)
                continue
            except parsers.ParseError:
                tally['failed'] += 1
                continue
            except _Hang:
                tally['hangs'].append(n)
                continue
            except Exception as err:   # noqa: BLE001  (what the test counts)
                tally['crashes'].append((n, f'{type(err).__name__}: {err}'))
                continue
            finally:
                signal.alarm(0)
                tally['slowest'] = max(tally['slowest'], time.perf_counter() - began)
            tally['parsed'] += 1
            bad = impossible(out)
            if bad:
                tally['impossible'].append((n, bad))
    finally:
        signal.signal(signal.SIGALRM, previous)
    return tally


def test_mutated_outputs_never_crash_hang_or_yield_impossible_values():
    tally = fuzz(INPUTS, SEED)
    print({k: v if not isinstance(v, list) else len(v) for k, v in tally.items()})
    assert tally['crashes'] == [] and tally['hangs'] == [] and tally['impossible'] == []
    # the mutations reach the values: some inputs are refused for an impossible value, most still parse
    assert tally['invalid-value'] > INPUTS // 100 and tally['parsed'] > INPUTS // 4


@pytest.mark.parametrize('fixture, pattern, replacement, message', [
    ('osu/7.4/osu_latency-2.txt', '\n1024                    3.51', '\n1024                    1e400',
     "osu MPI Latency datatype=MPI_CHAR: Avg Latency(us) = inf at 1024 B, printed '1024                    1e400': "
     'not a finite number'),
    ('osu/7.4/osu_bw-2.txt', '\n1024                 1571.24', '\n1024                 -5',
     "Bandwidth (MB/s) = -5 at 1024 B, printed '1024                 -5': bw must be >= 0 and <= 1e+09 MB/s"),
    ('imb/2021.8/IMB-MPI1-PingPong-2.txt', '\n            1         1000         0.34',
     '\n            1         1000        -0.34', 't[usec] = -0.34 at 1 B'),
    ('imb/2021.8/IMB-MPI1-PingPong-2.txt', '\n            1         1000 ', '\n           -1         1000 ',
     "imb PingPong processes=2: #bytes = -1, printed '-1         1000         0.34         2.92': "
     'a message size must be an integer from 0 to 2^50'),
])
def test_an_impossible_value_is_a_named_failure(fixture, pattern, replacement, message):
    text = (FIXTURES / fixture).read_text()
    assert pattern in text
    with pytest.raises(parsers.BenchmarkFailed) as err:
        parsers.parse_text(text.replace(pattern, replacement, 1), source=fixture)
    assert err.value.kind == 'invalid-value' and message in str(err.value)
    assert err.value.partial is not None and err.value.partial.tables   # what was read is kept for the diagnosis


def test_a_size_printed_twice_is_a_named_failure():
    """IMB output with one size's row twice (a doubled line in a log): one value would silently overwrite the
    other; the parser names the size and the line instead."""
    fixture = 'imb/2021.8/IMB-MPI1-PingPong-2.txt'
    text = (FIXTURES / fixture).read_text()
    row = '\n            1         1000         0.34'
    line = text[text.index(row) + 1:text.index('\n', text.index(row) + 1)]
    with pytest.raises(parsers.BenchmarkFailed) as err:
        parsers.parse_text(text.replace(f'{line}\n', f'{line}\n{line}\n', 1), source=fixture)
    assert err.value.kind == 'invalid-value'
    assert '#bytes = 1' in str(err.value) and 'printed twice in one table' in str(err.value)
    assert repr(line.strip()) in str(err.value)



def test_zero_bandwidth_of_empty_messages_stays_legal():
    table = parsers.parse_file(FIXTURES / 'imb/2021.8/IMB-MPI1-PingPong-2.txt').table('PingPong')
    assert table.rows[0]['bytes'] == 0 and table.rows[0]['mbytes_per_sec'] == 0


@pytest.mark.parametrize('variable, value, problem', [
    ('lat_8', 0.5, None), ('lat_8', 0.0, 'lat must be > 0'), ('lat_8', float('inf'), 'not a finite number'),
    ('bw_0', 0.0, None), ('bw_1024', -5, 'bw must be >= 0'), ('time', 1e308, 'time must be > 0 and <= 8.64e+08 s'),
    ('rdma_ports', 2, None), ('rdma_ports', -1, 'rdma_ports must be >= 0'), ('mops', 'x', 'not a number (str)'),
    ('msgrate_64', True, 'not a number (bool)'), ('link_gbps', float('nan'), 'not a finite number'),
    ('lat_8', 10 ** 400, 'lat must be > 0 and <= 8.64e+10 us'), ('rdma_ports', -10 ** 400, 'rdma_ports must be >= 0'),
])
def test_value_domains(variable, value, problem):
    found = parsers.value_problem(variable, value)
    assert (found is None) if problem is None else (found is not None and found.startswith(problem))
