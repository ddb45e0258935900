"""scripts/campaign.py: the schedule of the held-out nights (docs/verdict-protocol.md section 8), which night it
measures next (one not measured alone, again) and the paired level jobs' settings."""

import runpy
import types

from conftest import ROOT

from ibrepro import ledger, paths

campaign = types.SimpleNamespace(**runpy.run_path(str(ROOT / 'scripts' / 'campaign.py')))

EPISODES = [{'name': 'u10', 'case': 'U', 'level': 10, 'inject_pct': 9.5, 'count': 4, 'nights': 2},
            {'name': 'p3', 'case': 'P', 'level': 30, 'inject_pct': 25, 'count': 2, 'nights': 3, 'band': 'bandwidth',
             'sizes': '1048576:4194304', 'injected_ratio': 0.291}]


def test_the_schedule_is_seeded_and_keeps_each_episode_together():
    entries = campaign.make_schedule(7, 20, EPISODES)
    assert entries == campaign.make_schedule(7, 20, EPISODES) != campaign.make_schedule(8, 20, EPISODES)
    assert sum(e['kind'] == 'clean' for e in entries) == 20 and len(entries) == 20 + 4 * 2 + 2 * 3
    for name, nights in (('u10', 2), ('p3', 3)):
        for k in range(1, 5 if name == 'u10' else 3):
            at = [i for i, e in enumerate(entries) if e.get('episode') == f'{name}-{k:02d}']
            assert at == list(range(at[0], at[0] + nights))       # consecutive, in order
            assert [entries[i]['night_in_episode'] for i in at] == list(range(1, nights + 1))
    injected = next(e for e in entries if e['kind'] == 'injected' and e['case'] == 'U')
    assert injected['options'] == ['-S', 'inject_pct=9.5'] and injected['level'] == 10 and 'band' not in injected
    one_band = next(e for e in entries if e['kind'] == 'injected' and e['case'] == 'P')
    assert one_band['options'] == ['-S', 'inject_pct=25', '-S', 'inject_sizes=1048576:4194304']
    assert one_band['band'] == 'bandwidth' and one_band['injected_ratio'] == 0.291


def test_a_paired_job_alternates_clean_and_injected_rounds():
    args = types.SimpleNamespace(case='IMBPointToPoint%benchmark=Uniband%layout=1x2', paired=10.0, sizes=None)
    entry = campaign.paired_schedule(args)
    assert entry['options'] == ['-S', 'repetitions=10', '-S', 'inject_pct=10', '-S', 'inject_repetitions=2,4,6,8,10']
    assert entry['kind'] == 'paired' and entry['pairs'] == 5 and 'sizes' not in entry
    args.sizes = '1048576:4194304'
    entry = campaign.paired_schedule(args)
    assert entry['options'][-2:] == ['-S', 'inject_sizes=1048576:4194304'] and entry['sizes'] == args.sizes


def test_a_campaigns_own_ledger_lines_do_not_make_the_code_dirty(tmp_path, monkeypatch):
    """A night's commit says whether its code had changes; the ledger the campaign appends to is data, not code."""
    import subprocess

    from ibrepro import paths

    def git(*args):
        subprocess.run(['git', '-C', str(tmp_path), *args], check=True, capture_output=True)
    (tmp_path / 'reference-data' / 'ledger').mkdir(parents=True)
    (tmp_path / 'reference-data' / 'ledger' / 'vm.jsonl').write_text('{}\n')
    (tmp_path / 'code.py').write_text('x = 1\n')
    git('init', '-q')
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'add', '.')
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'first')
    monkeypatch.setattr(paths, 'REPO_ROOT', tmp_path)
    clean = paths.source_version.__wrapped__()
    (tmp_path / 'reference-data' / 'ledger' / 'vm.jsonl').write_text('{}\n{}\n')
    assert paths.source_version.__wrapped__() == clean and not clean.endswith('-dirty')
    (tmp_path / 'code.py').write_text('x = 2\n')
    assert paths.source_version.__wrapped__() == clean + '-dirty'


REAL = ledger.read(paths.REFERENCE_DATA / 'ledger' / 'vm2-impi-1x2.jsonl')


def _beside(night, others_cpu_s):
    return {**night, 'alone': {'others_cpu_s': others_cpu_s}}


def test_a_scheduled_night_that_was_not_alone_is_measured_again():
    args = types.SimpleNamespace(prefix='h', nights=None, paired=None)
    entries = [{'kind': 'clean'}, {'kind': 'injected', 'episode': 'u10-01'}, {'kind': 'clean'}]
    first, second = ({**REAL[i], 'night': x} for i, x in ((0, 'h0001'), (1, 'h0002')))
    assert campaign.next_night(args, [], entries) == ('h0001', entries[0])
    assert campaign.next_night(args, [first], entries) == ('h0002', entries[1])
    busy = _beside(second, 30.0)
    assert campaign.next_night(args, [first, busy], entries) == ('h0002.r1', entries[1])
    again = {**_beside(second, 25.0), 'night': 'h0002.r1'}
    assert campaign.next_night(args, [first, busy, again], entries) == ('h0002.r2', entries[1])
    last = {**second, 'night': 'h0002.r2'}
    assert campaign.next_night(args, [first, busy, again, last], entries) == ('h0003', entries[2])


def test_a_campaign_of_n_nights_counts_those_measured_alone():
    args = types.SimpleNamespace(prefix='u', nights=3, paired=None)
    nights = [{**REAL[0], 'night': 'u0001'}, _beside({**REAL[1], 'night': 'u0002'}, 30.0),
              {**REAL[2], 'night': 'u0003'}]
    assert campaign.next_night(args, nights, None) == ('u0004', {'kind': 'clean'})
    assert campaign.next_night(args, [*nights, {**REAL[3], 'night': 'u0004'}], None) is None
