"""reframe-checks/ by the papers' sections (issue 26): a history stored before the files moved still feeds the
history test, and one row of a section's figure table is a new case everywhere (catalog, nightly subset,
report)."""

import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, ReFrameRunner, needs_impi, output
from ibrepro import report, results, stats

#: Four real sessions stored at commit 108c3e3, before the check files moved (tests/data/history-108c3e3/MANIFEST.md):
#: IMB PingPong (then reframe-checks/mpi/imb_pt2pt.py), BenchIMB (mpi/bench_imb.py) and BiDirectionalLatency
#: (mpi/ibrepro_mpi.py), over shared memory.
HISTORY_DB = ROOT / 'tests/data/history-108c3e3/results.db'
HISTORY_CASES = ['-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', '-n', 'BenchIMB%case=PingPong-1x2',
                 '-n', 'BiDirectionalLatency%layout=1x2', '-S', 'message_sizes=1:16', '-S', 'iterations=200',
                 '-S', 'IMBPointToPoint.time_per_sample=30']
OLD_FILES = {'reframe-checks/mpi/imb_pt2pt.py', 'reframe-checks/mpi/bench_imb.py', 'reframe-checks/mpi/ibrepro_mpi.py'}


@needs_impi
@pytest.mark.integration
def test_a_history_stored_before_the_move_feeds_the_history_test_after(tmp_path):
    runner = ReFrameRunner(tmp_path / 'home')
    runner.home.mkdir()
    shutil.copy(HISTORY_DB, runner.db)
    stored = results.stored_sessions(runner.db)
    assert len(stored) == 4
    files = {c['filename'].split('/reframe-checks/')[-1] for r in stored for c in results.testcases(r)}
    assert {f'reframe-checks/{f}' for f in files} == OLD_FILES and not any((ROOT / f).exists() for f in OLD_FILES)
    before = {pv.series_key for r in stored for pv in results.perf_values(r)}

    proc = runner('-r', *HISTORY_CASES)
    assert proc.returncode == 0, output(proc)
    tonight = results.stored_sessions(runner.db, last=1)[0]
    assert {c['filename'].split('/reframe-checks/')[-1] for c in results.testcases(tonight)} == \
        {'mpi/pt2pt_collectives.py', 'mpi/beyond_latency.py'}
    after = {pv.series_key for pv in results.perf_values(tonight)}
    assert after and after <= before          # every series of tonight's cases is one the old files stored

    # the history test judges every variable of tonight against the four sessions stored before the move
    inputs = report.select(db=runner.db, last=1)
    try:
        model = report.build('local', inputs.selected, inputs.history['local'],
                             method=stats.Method(window=4, min_history=4))
    finally:
        inputs.close()
    assert model['runs'] == 5 and model['tested'] == len(after), (model['runs'], model['tested'], len(after))


# -- one table row, a new case everywhere ------------------------------------------------------------------

NEW_ROW = "    'allreduce-4x1': ([14], ['000-fig17']),\n"
NEW_CASE = 'OSUCollective %case=osu_allreduce-4x1'


@pytest.fixture(scope='module')
def checks_with_a_new_row(tmp_path_factory):
    """A copy of reframe-checks/ whose MPI figure table has one more row: Allreduce at 4x1 (000's layout)."""
    checks = tmp_path_factory.mktemp('layout') / 'reframe-checks'
    shutil.copytree(ROOT / 'reframe-checks', checks)
    path = checks / 'mpi/pt2pt_collectives.py'
    text = path.read_text()
    anchor = "    'alltoall-8x1':"
    assert anchor in text and NEW_CASE not in text
    path.write_text(text.replace(anchor, NEW_ROW + anchor, 1))
    return checks


def _in_child(code, checks):
    """Run ``code`` in a child (one ReFrame runtime per process) with the checks directory given."""
    prologue = f'from ibrepro import paths\npaths.CHECKS_DIR = __import__("pathlib").Path({str(checks)!r})\n'
    proc = subprocess.run([sys.executable, '-c', prologue + code], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_one_table_row_is_a_new_case_in_the_catalog_nightly_subset_and_report(checks_with_a_new_row, tmp_path):
    checks = checks_with_a_new_row
    # the catalog: experiment 14 now has the new case, from its tags alone
    found = _in_child('import json\nfrom ibrepro import catalog\n'
                      'print(json.dumps({e: [sorted(n) for _, n in items] for e, items in '
                      'catalog.reproducing(paths.CHECKS_DIR).items()}))', checks)
    assert any(NEW_CASE in names for names in found['14'])
    assert not any(NEW_CASE in names for e, items in found.items() if e != '14' for names in items)
    # the tool families of that section got the layout too (one row, every tool)
    assert any('IMBCollective %benchmark=Allreduce %layout=4x1' in names for names in found['14'])
    assert any('BenchIMB %case=Allreduce-4x1' in names for names in found['14'])

    # the nightly subset: the generator (scripts/nightly_subset.py) has the new case among those it covers the
    # figures with, tagged with its figure, and picks it where it is the one case of that figure
    nightly = _in_child('import json, runpy\nm = runpy.run_path("scripts/nightly_subset.py")\nc = m["cases"]()\n'
                        f'mine = [x for x in c if x[1] == {NEW_CASE!r}]\n'
                        'print(json.dumps({"mine": mine, "chosen": m["choose"](mine)[0]}))', checks)
    (mine,) = nightly['mine']
    assert mine[2] == ['s000-fig17'] and [c[1] for c in nightly['chosen']] == [NEW_CASE]

    # the report: a session that ran none of the experiment's cases lists the new one among the absent
    absent = _in_child('import json\nfrom ibrepro.report import provenance\n'
                       'print(json.dumps(provenance.absent_families("local", [], {}, None)))', checks)
    row = next(r for r in absent if r['check'] == NEW_CASE)
    assert row['experiments'] == '#14'


# -- the order of the always-last hooks, stated in code ---------------------------------------------------------

ORDER_SCRIPT = '''
from reframe.core.config import load_config
import reframe.core.runtime as rt
from reframe.frontend.loader import RegressionCheckLoader
from ibrepro.rfm import hook_order_problems
site = load_config('configs/local.py')
site.select_subconfig('local')
rt.init_runtime(site)
classes = {type(c) for c in RegressionCheckLoader(['reframe-checks'], recurse=True).load_all()}
print(len(classes), [p for c in sorted(classes, key=str) for p in hook_order_problems(c)])
'''


def test_every_check_keeps_the_stated_order_of_its_always_last_hooks():
    proc = subprocess.run([sys.executable, '-c', ORDER_SCRIPT], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, problems = proc.stdout.strip().splitlines()[-1].split(' ', 1)
    assert int(count) >= 20 and problems == '[]', proc.stdout


def test_an_always_last_hook_out_of_the_stated_order_is_named():
    import reframe as rfm
    from reframe.core.builtins import run_after

    from ibrepro.rfm.npb import NPBBenchmark

    class Late(rfm.RegressionTestPlugin):
        @run_after('init', always_last=True)
        def require_tools(self):
            pass

    class Reordered(NPBBenchmark, Late):     # Late's require_tools replaces NPB's and now runs last
        pass

    class Unstated(NPBBenchmark):
        @run_after('init', always_last=True)
        def tidy(self):
            pass

    from ibrepro.rfm import hook_order_problems
    assert any('LAST_HOOKS says' in p for p in hook_order_problems(Reordered))
    assert hook_order_problems(Unstated)[0] == 'Unstated: always-last post_init hook(s) tidy not in LAST_HOOKS'
    assert hook_order_problems(NPBBenchmark) == []
