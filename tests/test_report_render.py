"""report/render.py: the pages of a real run report; summary.md, what CI posts, says which test cases failed in
ReFrame before anything else (a night whose cases failed is never only "no regression")."""

import re

from conftest import ROOT
from ibrepro import report
from ibrepro.report import render

FAILED_NIGHT = ROOT / 'tests' / 'data' / 'fleet' / 'fattree-uplink-leaf1-spine1-25.report.json'


def _model(path, tmp_path):
    inputs = report.select(db=tmp_path / 'absent.db', report_files=[path])
    try:
        (system,) = inputs.history
        return report.build(system, inputs.selected, inputs.history[system])
    finally:
        inputs.close()


def test_summary_md_names_the_cases_that_failed_in_reframe_first(tmp_path):
    model = _model(FAILED_NIGHT, tmp_path)
    html, md = render.render(model)
    md = md.replace('\u200b', '')          # the zero-width spaces that keep a mention from linking
    failed = md.index('**Failed in ReFrame: 1 test case(s)**')
    assert failed < md.index('**History test')
    row = re.search(r'^\| FleetPairs %job\\_index=0 \| fabric\+\S+ \| sanity \| sanity error: 1 component\(s\) slow: '
                    r'uplink leaf1\\>spine1 = downlink spine1\\>leaf2: .*\|$', md, re.M)
    assert row, md[failed:failed + 600]
    assert '<table id="failures">' in html
    _, clean = render.render({**model, 'failures': []})
    assert 'Failed in ReFrame' not in clean and '**History test: no regression**' in clean
