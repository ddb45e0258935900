"""report/papers.py: a system's curves beside the papers' figures, from a real run report of the embedded default
(`local`: IMB and our MPI benchmarks intra-node, tests/data/run-reports/MANIFEST.md)."""

import collections
import re
import statistics

import pytest

from conftest import ROOT
from ibrepro import compare, results
from ibrepro.report import papers

RUN_REPORT = ROOT / 'tests' / 'data' / 'run-reports' / 'run-report.local_make_run_short.json'


@pytest.fixture(scope='module')
def current():
    """{(partition, environ, name): (case, {variable: median})}: what report/model.py gives the papers' section."""
    report = results.load_report(RUN_REPORT)
    found = {}
    for case in results.readable_cases(report, []):
        values = collections.defaultdict(list)
        for pv in results.case_perf_values(report['session_info'], case):
            values[pv.variable].append(pv.value)
        if values:
            found[(case['partition'], case['environ'], case['name'])] = (
                case, {v: statistics.median(xs) for v, xs in values.items()})
    return found


@pytest.fixture(scope='module')
def section(current):
    return papers.section(current, {})


def test_every_case_tagged_with_a_figure_is_drawn_with_its_measured_curve(current, section):
    tagged = {name for (_, _, name), (case, _) in current.items()
              if any(re.fullmatch(r's\d{3}-(fig|tab)\d+', t) for t in case.get('tags') or ())}
    assert tagged and section['papers_problem'] is None
    drawn = {name for figure in section['figures'] for name in figure['cases']}
    # a figure is drawn against message size: a case with no such metric (MemoryUsage's `mem` per layout) is not
    unsized = {name for (_, _, name), (_, variables) in current.items()
               if not any(compare.curve(variables, prefix) or prefix in variables for prefix in papers._UNITS)}
    assert drawn == tagged - unsized and unsized & tagged == {f'MemoryUsage %layout=1x{n}' for n in (1, 2, 4)}
    for figure in section['figures']:
        assert figure['image'] and figure['alt'].startswith(figure['name'])
        # intra-node shared memory: no link bounds these curves, and the figure says so
        assert figure['limit_now'] is None
        if figure['metric'] == 'bw':
            assert figure['limit_note'] == 'intra-node (shared memory): no link to limit it'


def test_a_headline_row_is_the_measured_value_against_the_papers_at_the_same_point(current, section):
    for row in section['headline']:
        (case, variables), = [v for (p, e, n), v in current.items()
                              if (p, e, n) == (row['partition'], row['environ'], row['check'])]
        entry = next(e for e in compare.paper_entries()[0] if e['id'] == row['id'])
        assert row['measured'] == compare.measured(entry, variables)[0]
        if row['measured'] is not None:
            assert row['ratio'] == row['measured'] / entry['value_si']
        assert row['limit_now'] is None and row['fraction_now'] is None


def test_reference_data_that_cannot_be_read_is_said_and_the_rest_of_the_report_goes_on(current, monkeypatch):
    def broken():
        raise ValueError('papers/s002.yaml: line 3: malformed')
    monkeypatch.setattr(compare, 'paper_entries', broken)
    assert papers.section(current, {}) == {
        'headline': [], 'figures': [],
        'papers_problem': 'reference data unreadable: papers/s002.yaml: line 3: malformed'}
