"""The catalog: every experiment of the papers encoded by check families (or out of scope, with the reason),
consistent with the checks' own tags, and what this machine can run."""

import json
import re

import pytest

from conftest import ReFrameRunner, output
from ibrepro import catalog, paths
from ibrepro.catalog import NightlyError, nightly_cases


def test_all_43_experiments_are_encoded_or_out_of_scope_with_a_reason():
    rows = catalog.experiments()
    assert sorted(rows) == list(range(1, 47))
    papers = [r for r in rows.values() if not r.get('continues')]
    assert [r['id'] for r in papers] == list(range(1, 44)) and all(r['seeds'] for r in papers)
    assert rows[44]['continues'] == [5, 6, 17, 18] and rows[44]['seeds'] == []      # GPU host-device copies
    assert rows[45]['continues'] == [3, 5, 17] and rows[45]['seeds'] == []          # GPUDirect RDMA by distance
    assert rows[46]['continues'] == [12, 14, 30] and rows[46]['seeds'] == []        # NCCL collectives
    assert catalog.validate() == []
    for row in rows.values():
        assert row['status'] in catalog.STATUSES
        if row['status'] != 'encoded':
            assert row['reason']


@pytest.fixture(scope='module')
def described(tmp_path_factory):
    """``reframe --describe`` of every test case on the papers' testbeds (configs/testbeds.py)."""
    proc = ReFrameRunner(tmp_path_factory.mktemp('describe') / 'home')('--describe', '--system', 'testbeds',
                                                                          config='configs/testbeds.py')
    assert proc.returncode == 0, output(proc)
    return json.loads(proc.stdout[proc.stdout.index('['):])


@pytest.mark.integration
def test_catalogued_checks_carry_the_experiment_tag(described):
    """Each check a row names is a test case of the papers' testbeds tagged with that row (exp<N>)."""
    for row in catalog.experiments().values():
        for check in row.get('checks', []):
            cases = [d for d in described if re.sub(r'\s+', '', d['display_name']).startswith(
                re.sub(r'\s+', '', check))]
            assert cases, f'experiment {row["id"]}: {check!r} is no test case'
            assert any(f'exp{row["id"]}' in d['tags'] for d in cases), \
                f'experiment {row["id"]}: no case of {check!r} is tagged exp{row["id"]}'


@pytest.mark.integration
def test_a_leaf_case_carries_only_the_plugins_its_family_uses(described):
    """Repetitions and the MPI injector belong to the MPI-launched families: a pair-runner case (perftest, our
    verbs benchmark) measures once per job and preloads no MPI, so it has none of their variables."""
    plugin = re.compile(r'(repetition|inject|control|cpu_pressure)')
    pair_runner = [d for d in described if d['display_name'].startswith(('Perftest', 'VerbsTwoPort'))]
    mpi = [d for d in described if d['display_name'].startswith(('IMB', 'OSU', 'BenchIMB'))]
    assert pair_runner and mpi
    for case in pair_runner:
        assert [v for v in case if plugin.match(v)] == [], case['display_name']
    for case in mpi:
        assert {'repetitions', 'inject_us', 'control'} <= set(case), case['display_name']


def test_catalog_says_what_runs_here_and_why_not(reframe):
    proc = reframe.ibrepro('catalog')
    assert proc.returncode == 0, output(proc)
    text = proc.stdout
    assert text.rstrip().endswith('(46 experiments)')
    assert 'check: NcclBusBandwidth' in text
    assert 'continues: #5 (000/003 Sec. IV.B.2, Fig. 6)' in text and 'check: GpuHostDevice' in text
    # the intra-node IMB cases run on any machine with `make setup`
    assert 'runs here: IMBPointToPoint %benchmark=PingPong %layout=1x2 (1 case)' in text
    # one node: the papers' inter-node layouts have no test case here, and the catalog says why
    assert ('not here:  IMBPointToPoint %benchmark=PingPong %layout=2x1: needs 2 nodes (has 1) (to enable: a Slurm '
            'partition with that many nodes (docs/site-setup.md))') in text
    assert 'why: the HALO (layered ocean model) benchmark is not publicly available' in text


@pytest.mark.parametrize('edit, problem', [
    (lambda t: t.replace('case: OSUIntraNode %benchmark=osu_bw', 'case: OSUIntraNode %benchmark=osu_bww'),
     "nightly subset: case 'OSUIntraNode %benchmark=osu_bww' matches no test case: OSUIntraNode has no "
     "benchmark=osu_bww (its values: osu_latency, osu_bw)"),
    (lambda t: t.replace('case: HostOverhead %layout=2x1', 'case: HostOverheads %layout=2x1'),
     "case 'HostOverheads %layout=2x1' matches no test case: no check family HostOverheads"),
    (lambda t: t.replace('\ncases:', '\ncases: ['), 'the nightly subset cannot be read: '),
    (lambda t: t.replace('\ncases:', '\nkases:'), 'the nightly subset cannot be read: '),
], ids=['parameter-typo', 'family-typo', 'bad-yaml', 'no-cases'])
def test_a_broken_nightly_subset_is_named_not_a_smaller_night(tmp_path, edit, problem):
    nightly = tmp_path / 'nightly.yaml'
    nightly.write_text(edit((paths.REFERENCE_DATA / 'nightly.yaml').read_text()))
    problems = catalog.validate(nightly=nightly)
    assert len(problems) == 1 and problem in problems[0], problems
    if 'cannot be read' in problem:
        with pytest.raises(NightlyError, match=problem):
            nightly_cases(nightly)
