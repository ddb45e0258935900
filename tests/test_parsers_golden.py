"""Golden tests: every real output under tests/fixtures parses as tests/golden/expected.yaml says.

A fixture without an expectation fails (new fixtures cannot be forgotten), and so does an
expectation without a fixture.
"""

import math
from pathlib import Path

import pytest
import yaml

from ibrepro import cli
from ibrepro.parsers import (METRIC_UNITS, BenchmarkFailed, ParseError, detect_tool, parse_file,
                             tools, _tool_module)

FIXTURES = Path(__file__).parent / 'fixtures'
EXPECTED = yaml.safe_load((Path(__file__).parent / 'golden' / 'expected.yaml').read_text())
FILES = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob('*')
               if p.is_file() and p.name != 'MANIFEST.md')
FAILING = [f for f in FILES if 'failure' in EXPECTED.get(f, {}) or 'error' in EXPECTED.get(f, {})]


def _expectation(name):
    if name not in EXPECTED:
        pytest.fail(f'{name}: fixture has no entry in tests/golden/expected.yaml; add one '
                    '(tool, version, tables, or failure/error)')
    return EXPECTED[name]


def _check_tables(name, tables, expected, values=True):
    got = [(t.benchmark, len(t.rows)) for t in tables]
    assert len(tables) == len(expected), f'{name}: tables {got}, expected {len(expected)}'
    for table, want in zip(tables, expected):
        where = f'{name} {table.benchmark} {table.params}'
        assert table.benchmark == want['benchmark'], where
        assert len(table.rows) == want['rows'], f'{where}: {len(table.rows)} rows'
        sizes = table.sizes()
        first_last = [sizes[0], sizes[-1]] if sizes else None
        assert first_last == want.get('sizes'), f'{where}: sizes {first_last}'
        for key, value in want.get('params', {}).items():
            assert table.params.get(key) == value, f'{where}: params[{key!r}]'
        assert sorted(table.metrics) == sorted(want['metrics']), where

        # A sweep of sizes: increasing powers of two (0 B may come first), but for the rows a failure refused.
        nonzero = sorted({s for s in sizes if s} | set(want.get('refused_sizes', [])))
        assert all(b == 2 * a for a, b in zip(nonzero, nonzero[1:])), f'{where}: sizes {sizes}'

        # Every metric: right unit, a finite number in every row, positive (bandwidth at 0 B: 0).
        for metric, key in table.metrics.items() if values else ():
            column = next(c for c in table.columns if c.key == key)
            assert column.unit == METRIC_UNITS[metric], f'{where}: {key} unit {column.unit}'
            for row in table.rows:
                value = row[key]
                assert isinstance(value, (int, float)) and math.isfinite(value), f'{where}: {row}'
                # 0 B moves nothing; zero_sizes: rows where the tool itself printed a rate of 0.00 (a stall)
                empty = (metric == 'bw' and table.size_key and row[table.size_key] == 0) or (
                    metric in ('bw', 'msgrate') and row.get(table.size_key) in want.get('zero_sizes', []))
                assert value == 0 if empty else value > 0, f'{where}: {key} = {value!r} in {row}'


@pytest.mark.parametrize('name', FILES)
def test_fixture(name):
    want = _expectation(name)
    path = FIXTURES / name
    assert detect_tool(path.read_text(errors='replace')) == want['tool'], name

    if 'failure' in want:
        with pytest.raises(BenchmarkFailed) as info:
            parse_file(path)
        err = info.value
        assert err.kind == want['failure'], f'{name}: {err}'
        assert str(path) in str(err)
        for part in want['reason']:
            assert part in err.reason, f'{name}: {part!r} not in {err.reason!r}'
        # what a failure keeps; an invalid value's table holds the value it refused
        _check_tables(name, err.partial.tables if err.partial else [], want.get('partial', []),
                      values=want['failure'] != 'invalid-value')
    elif 'error' in want:
        with pytest.raises(ParseError) as info:
            parse_file(path)
        assert not isinstance(info.value, BenchmarkFailed), f'{name}: {info.value}'
        assert str(path) in str(info.value)
        for part in want['error']:
            assert part in info.value.reason, f'{name}: {part!r} not in {info.value.reason!r}'
    else:
        out = parse_file(path)
        assert (out.tool, out.version) == (want['tool'], want['version']), name
        for key, value in want.get('meta', {}).items():
            assert out.meta.get(key) == value, f'{name}: meta[{key!r}] = {out.meta.get(key)!r}'
        _check_tables(name, out.tables, want['tables'])


def test_every_expectation_has_a_fixture():
    assert sorted(set(EXPECTED) - set(FILES)) == []


@pytest.mark.parametrize('name', FILES)
def test_no_cross_detection(name):
    """Exactly one tool claims a benchmark's output; none claims a file that is not one."""
    text = (FIXTURES / name).read_text(errors='replace')
    claimed = [tool for tool in tools() if _tool_module(tool).detect(text)]
    want = _expectation(name)['tool']
    assert claimed == ([want] if want else []), name


@pytest.mark.parametrize('name', FAILING)
def test_cli_reports_failure(name, capsys):
    """`ibrepro parse` exits 1 and names the file and the reason on stderr."""
    path = FIXTURES / name
    assert cli.main(['parse', str(path)]) == 1
    err = capsys.readouterr().err
    want = EXPECTED[name]
    assert str(path) in err
    assert all(part in err for part in want.get('reason', want.get('error')))
    if 'failure' in want:
        assert f'{want["failure"]}:' in err

