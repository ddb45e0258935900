"""report/render.py: the pages of a real run report; summary.md, what CI posts, says which test cases failed in
ReFrame before anything else (a night whose cases failed is never only "no regression")."""

import re
import subprocess
import sys
import textwrap

import pytest

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
    assert 'Failed in ReFrame' not in clean and '**History test: nothing judged**' in clean   # no group to test


def test_the_figures_drawn_together_on_several_cpus_are_those_drawn_one_by_one(tmp_path):
    """The report draws its figures together (plots.draw_all: forked workers, one per CPU this process may use, in
    a process of one thread; a fresh interpreter here, as the `ibrepro report` command is): the images are byte
    for byte those drawn one at a time, each in its place in the model."""
    code = textwrap.dedent("""
        import datetime, os, sys
        from ibrepro import plots
        sizes = [2 ** k for k in range(12)]
        dates = [datetime.datetime(2026, 1, 1) + datetime.timedelta(days=d) for d in range(40)]
        drawings = [('paper_figure', f'case {k}: bandwidth', 'bandwidth (MB/s)',
                     [('default+impi', {s: s * (k + 1) for s in sizes})],
                     [('000', 'Fig. 3: peak 970 MB/s', None, 970.0)], 1250.0, None) for k in range(3)]
        drawings += [('trend', f'lat_{k}', 'us', dates, [1.0 + (d % (k + 2)) for d in range(40)], 3, (0.9, 1.2),
                      None) for k in range(3)]
        expected = [getattr(plots, kind)(*args) for kind, *args in drawings]
        assert len(set(expected)) == len(expected) and all(e.startswith('data:image/png;base64,') for e in expected)
        for cpus in ({0, 1}, {0}):
            os.sched_getaffinity = lambda pid, cpus=cpus: cpus
            model = {'figures': [{'image': plots.later(kind, *args)} for kind, *args in drawings[:3]],
                     'trends': [[plots.later(kind, *args)] for kind, *args in drawings[3:]], 'other': 'kept'}
            plots.draw_all(model)
            assert [f['image'] for f in model['figures']] + [t[0] for t in model['trends']] == expected
            assert model['other'] == 'kept'
        print('same images')
    """)
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == 'same images', done.stdout + done.stderr
    assert 'figure workers' not in done.stderr           # drawn by the workers, not one by one after all
    from ibrepro import plots
    with pytest.raises(ValueError, match="no figure 'savefig'"):
        plots.later('savefig', tmp_path / 'x.png')
