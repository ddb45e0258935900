"""report/selection.py: which sessions a report is about (``--since``, ``--report``) and the runs a history keeps."""

import collections
import copy
import datetime
import json

import pytest

from conftest import ROOT
from ibrepro.report import selection

RUN_REPORT = ROOT / 'tests' / 'data' / 'run-reports' / 'run-report.local_make_run_short.json'


@pytest.mark.parametrize('text, ago', [('7d', 7 * 86400), ('12h', 12 * 3600), (' 1d ', 86400)])
def test_since_as_a_span_ago(text, ago):
    assert selection.parse_since(text, now=1_800_000_000) == 1_800_000_000 - ago


def test_since_as_a_date_is_utc_unless_it_names_its_zone():
    utc = datetime.datetime(2026, 11, 20, tzinfo=datetime.timezone.utc).timestamp()
    assert selection.parse_since('2026-11-20') == utc
    assert selection.parse_since('2026-11-20T01:00+01:00') == utc


@pytest.mark.parametrize('text', ['yesterday', '7w', '2026-13-01', ''])
def test_since_that_is_no_date_says_what_it_expects(text):
    with pytest.raises(selection.ReportError, match='expected a date .* or 7d / 12h'):
        selection.parse_since(text)


Row = collections.namedtuple('Row', 'uuid night')


def test_the_last_runs_keep_every_session_of_a_night():
    rows = [Row('a', 'n1'), Row('b', 'n2'), Row('c', 'n2'), Row('d', 'n3'), Row('e', 'n3')]
    assert [r.uuid for r in selection._last_runs(rows, 2)] == ['b', 'c', 'd', 'e']
    assert [r.uuid for r in selection._last_runs(rows, 9)] == ['a', 'b', 'c', 'd', 'e']


def test_a_run_report_file_is_selected_with_its_systems_history(tmp_path):
    inputs = selection.select(db=tmp_path / 'absent.db', report_files=[RUN_REPORT])
    try:
        assert len(inputs.selected) == 1 and inputs.problems == []
        assert list(inputs.history) == ['local'] == selection.systems_of(inputs.selected[0])
        assert len(inputs.history['local'].sessions) == 1
    finally:
        inputs.close()


def test_a_partial_or_unreadable_report_file_is_named_and_the_others_are_reported(tmp_path):
    edited = copy.deepcopy(json.loads(RUN_REPORT.read_text()))
    del edited['runs'][0]['testcases'][3]['system']
    partial = tmp_path / 'partial.json'
    partial.write_text(json.dumps(edited))
    broken = tmp_path / 'broken.json'
    broken.write_text(RUN_REPORT.read_text()[:5000])
    inputs = selection.select(db=tmp_path / 'absent.db', report_files=[partial, broken, RUN_REPORT])
    try:
        assert len(inputs.selected) == 1
        assert len(inputs.problems) == 2
        assert inputs.problems[0].startswith(f'{partial}: test case 4 of run 0 has no system')
        assert str(broken) in inputs.problems[1]
    finally:
        inputs.close()
