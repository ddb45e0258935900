"""Where a chart's change began (ibrepro.changepoints: Apache Otava in its own environment) and the charts' alarm
that names it (ibrepro.evidence.judge_nights): real clean nights of the ledger (reference-data/ledger), the later
ones slowed by a stated factor on every variable of one case (a lasting step on real noise)."""

import copy
import math

import pytest

from ibrepro import changepoints, charts, evidence, ledger, parsers, paths

needs_otava = pytest.mark.skipif(changepoints.otava_python() is None, reason='Otava is not installed (make otava)')
UNIBAND = 'IMBPointToPoint %benchmark=Uniband %layout=1x2'


def clean_nights(count):
    nights = ledger.read(paths.REFERENCE_DATA / 'ledger' / 'vm-impi-1x2.jsonl')
    found = [n for n in nights if n['night'].startswith('t') and n['schedule']['kind'] == 'clean']
    assert len(found) >= count
    return found[:count]


def slowed(night, case, factor):
    """The night with every variable of ``case`` ``factor`` x worse (times up, rates down)."""
    night = copy.deepcopy(night)
    values = night['cases'][case]['values']
    for name, xs in values.items():
        better = parsers.METRIC_BETTER.get(name.rpartition('_')[0])
        scale = factor if better == 'lower' else 1 / factor if better == 'higher' else 1.0
        values[name] = [x * scale if isinstance(x, (int, float)) else x for x in xs]
    return night


@needs_otava
def test_otava_locates_a_lasting_step_in_real_noise():
    nights = clean_nights(80)
    nights = nights[:55] + [slowed(n, UNIBAND, 1.2) for n in nights[55:]]
    baseline = charts.Baseline.fit(nights[:40])
    values = [v.value for v in baseline.series(nights)[(UNIBAND, 'latency')]]
    values[20] = None                              # a night not measured: left out, the indexes stay the nights'
    (points,) = changepoints.locate([values])
    assert any(abs(p['index'] - 55) <= 1 and p['after'] - p['before'] > math.log(1.1) for p in points), points
    assert not any(p['index'] < 50 for p in points), points


def test_without_otava_the_alarm_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, 'DEPS_DIR', tmp_path)
    with pytest.raises(changepoints.OtavaError, match='not installed'):
        changepoints.locate([[0.0] * 40])
    status, lines = _judged(clean_nights(70))
    assert status == evidence.EXIT_ALARM
    assert any(line.startswith(f'REGRESSION {UNIBAND} | ') and 'Otava: not installed (make otava)' in line
               for line in lines), lines


@needs_otava
def test_an_alarm_names_the_night_the_change_began_and_the_rebaseline_that_accepts_it():
    status, lines = _judged(clean_nights(70))
    assert status == evidence.EXIT_ALARM, lines
    alarms = [line for line in lines if line.startswith('REGRESSION')]
    assert alarms and all(line.startswith(f'REGRESSION {UNIBAND} | ') for line in alarms), lines
    # the change began at t0061 (the first slowed night): Otava names it, or a neighbour, and the re-baseline
    began = [f't{n:04d}' for n in (60, 61, 62)]
    assert any(f'Otava: it began at night {b}' in line and f'--accept {b} --nights 40' in line
               for line in alarms for b in began), alarms
    # the retrospective view lists the change on the charts Otava split
    assert any(line.startswith(f'change {UNIBAND} | ') for line in lines), lines


def _judged(nights):
    """Phase I: the first 40 nights; then 20 clean ones and 10 with Uniband 1.3x slower; judged as of the last."""
    baseline = charts.Baseline.fit(nights[:40])
    keys, rows, scales = charts.rows_of(baseline, nights[:40])
    designs = dict(zip(keys, charts.calibrate(rows, scales, series=40, length=200)))
    tested = nights[:60] + [slowed(n, UNIBAND, 1.3) for n in nights[60:70]]
    return evidence.judge_nights('vm', baseline, designs, tested)


@needs_otava
def test_the_study_puts_otavas_columns_beside_the_charts():
    """``detection_power.py --from-ledger --otava``: Otava's false alarms on the held-out clean nights and the nights
    until it finds each episode, from the same rows as the charts'."""
    nights = clean_nights(70)
    episode = [slowed(n, UNIBAND, 1.3) for n in nights[60:63]]
    for k, night in enumerate(episode):
        night['schedule'] = {'kind': 'injected', 'case': 'IMBPointToPoint%benchmark=Uniband%layout=1x2',
                             'level': 30, 'episode': 'u30-01', 'night_in_episode': k + 1}
    out = charts.study(nights[:60] + episode, phase1=40, series=20, within=(1, 3), otava=True)
    assert out['otava']['clean_nights'] == out['false_alarms']['clean_nights'] == 20
    assert 0 <= out['otava']['alarms'] == len(out['otava']['nights']) <= 20
    (uniband,) = [c for c in out['cases'] if c['case'] == UNIBAND]
    (level,) = uniband['levels']
    assert level['episodes'] == 1 and level['detected_within']['3'] == 1      # 30 %: the charts see it
    assert len(level['otava_delays']) == 1 and set(level['otava_detected_within']) == {'1', '3'}
