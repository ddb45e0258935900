"""Evidence across nights (ibrepro.charts): the night value of a band from its accepted rounds, the control's
exclusion, the frozen baseline, the combined CUSUM + one-night chart, the replay calibration and the detectable
effect. The arithmetic on small constructed records (what each step must compute); real nights: the ledger."""

import math

import pytest

from ibrepro import charts

CASE = 'IMBPointToPoint %benchmark=PingPong %layout=1x2'
QUIET = {'pingpong_ns': 55.0, 'copy_gbs': 12.0, 'steal_pct': 0.0, 'psi_some_pct': 1.0, 'wall_s': 0.2}


def night(name, factor=1.0, control=None, result='pass', wobble=0.0):
    """A night whose latencies are ``factor`` x the reference and bandwidths / factor (each round ``wobble`` apart)."""
    rounds = [1 + wobble * (r - 1) for r in range(3)]
    values = {'lat_8': [0.2 * factor * w for w in rounds], 'lat_1048576': [40.0 * factor * w for w in rounds],
              'bw_1048576': [26000 / factor / w for w in rounds], 'bw_peak': [30000.0] * 3}
    return {'night': name, 'cases': {CASE: {'result': result, 'reason': '', 'values': values,
                                            'control': control or [QUIET] * 3}}}


def test_bands_of_a_case_hold_only_sized_directed_variables():
    keys = charts.chart_keys(CASE, night('n')['cases'][CASE]['values'])
    assert keys == {'latency': ['lat_8'], 'bandwidth': ['bw_1048576', 'lat_1048576']}


def test_night_value_is_the_best_of_its_accepted_rounds():
    levels = {'lat_8': 0.2, 'lat_1048576': 40.0, 'bw_1048576': 26000.0}
    rec = night('n', factor=1.1)['cases'][CASE]
    values = charts.night_values(CASE, rec, levels, None)
    assert values['latency'].value == pytest.approx(math.log(1.1))
    assert values['bandwidth'].value == pytest.approx(math.log(1.1))       # bandwidth lower: worse, positive
    # rounds 0.9x, 1x, 1.1x of a 1.1x slowdown: the best round, on every band (bandwidth / w is better too)
    rec = night('n', factor=1.1, wobble=0.1)['cases'][CASE]
    values = charts.night_values(CASE, rec, levels, None)
    assert values['latency'].value == pytest.approx(math.log(1.1 * 0.9))
    assert values['bandwidth'].value == pytest.approx(math.log(1.1 * 0.9))


def test_the_controls_slow_state_excludes_rounds_of_the_bands_it_moves():
    base = [dict(QUIET, pingpong_ns=55 + i % 5, copy_gbs=12 - (i % 3) / 10) for i in range(30)]
    limits = charts.ControlLimits.fit(base)
    slow = dict(QUIET, pingpong_ns=800.0)
    assert limits.slow(slow) == ['pingpong_ns'] and limits.slow(QUIET) == []
    levels = {'lat_8': 0.2}
    # control 2 (after round 1, before round 2) slow: both rounds it frames are out, round 3 alone is the night
    rec = night('n', factor=1.1, control=[QUIET, slow, QUIET, QUIET])['cases'][CASE]
    rec['values']['lat_8'][0] = 0.01        # those rounds' values are whatever the busy machine gave
    rec['values']['lat_8'][1] = 50.0
    accepted, why = charts.accepted_rounds(rec, limits)
    assert accepted == [2] and why == {0: ['pingpong_ns'], 1: ['pingpong_ns']}
    v = charts.night_values(CASE, rec, levels, limits)['latency']
    assert v.rounds == 1 and v.value == pytest.approx(math.log(1.1))
    # the control after the last round frames it as well; a night stored before it existed has the one before only
    assert charts.accepted_rounds(rec | {'control': [QUIET, QUIET, QUIET, slow]}, limits)[0] == [0, 1]
    assert charts.accepted_rounds(rec | {'control': [QUIET, QUIET, slow]}, limits)[0] == [0]
    # two slow rounds of three: the third alone; all three slow: excluded, saying why
    rec = night('n', control=[slow, slow, QUIET, QUIET])['cases'][CASE]
    v = charts.night_values(CASE, rec, levels, limits)['latency']
    assert v.rounds == 1 and v.value == pytest.approx(0.0)
    rec = night('n', control=[slow, slow, slow, slow])['cases'][CASE]
    v = charts.night_values(CASE, rec, levels, limits)['latency']
    assert v.value is None and 'round(s) 1 (pingpong_ns), 2 (pingpong_ns), 3 (pingpong_ns)' in v.excluded
    # a band the slow state does not move keeps every round (gated: the bands that leave them out)
    v = charts.night_values(CASE, rec, levels, limits, gated=set())['latency']
    assert v.rounds == 3
    # a case that failed is excluded, never a value
    v = charts.night_values(CASE, night('n', result='fail')['cases'][CASE], levels, limits)['latency']
    assert v.value is None and 'did not pass' in v.excluded


def test_the_benchmarks_own_spread_never_excludes_a_night():
    base = [QUIET] * 30
    limits = charts.ControlLimits.fit(base)
    rec = night('n', factor=3.0, wobble=0.5)['cases'][CASE]       # rounds 0.5x, 1x, 1.5x of a 3x slowdown
    v = charts.night_values(CASE, rec, {'lat_8': 0.2}, limits)['latency']
    assert v.rounds == 3 and v.value == pytest.approx(math.log(3.0 * 0.5))     # the best round, still 1.5x


def test_the_baseline_is_frozen_from_stated_nights():
    wobbles = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0, 1.01, 0.99]
    phase1 = [night(f'b{i}', factor=f) for i, f in enumerate(wobbles)]
    baseline = charts.Baseline.fit(phase1)
    assert baseline.nights == [f'b{i}' for i in range(10)]
    assert baseline.levels[CASE]['lat_8'] == pytest.approx(0.2)
    m0, s0 = baseline.charts[(CASE, 'latency')]
    assert m0 == pytest.approx(0.0, abs=1e-9) and s0 > charts.MIN_SCALE
    # a later night 10 % slower is z = log(1.1) / s0 on its chart; the baseline does not move with it
    (z,) = baseline.z_scores([night('x', factor=1.1)])[(CASE, 'latency')]
    assert z == pytest.approx(math.log(1.1) / s0)
    assert baseline.charts[(CASE, 'latency')] == (m0, s0)


def test_cusum_accumulates_a_lasting_shift_and_the_jump_limit_a_large_one():
    design = charts.Design(shift=0.10, h=4.0, z_big=6.0)
    s0 = 0.05                                     # the design shift is log(1.1) / 0.05 = 1.906 z
    k, clip = design.k_and_clip(s0)
    assert k == pytest.approx(math.log(1.1) / 0.05 / 2) and clip == 3.0
    path, at, kind = charts.run_chart([0.0, 0.5, None, 2.9, 2.9, 2.9], s0, design)
    assert kind == 'cusum' and at == 5
    # by hand: 0, 0 (0.5 - k < 0), unchanged (excluded), 2.9 - k, twice that, three times
    assert path == pytest.approx([0, 0, 0, 2.9 - k, 2 * (2.9 - k), 3 * (2.9 - k)])
    assert charts.run_chart([0.0, 7.0], s0, design)[1:] == (1, 'jump')
    # increments are clipped: one very bad night alone (below the jump limit) does not reach h
    assert charts.run_chart([5.9], s0, design)[1] is None


def test_calibration_meets_its_false_alarm_target_on_the_rows_it_replays():
    # rows: the baseline nights' z of two charts (one night excluded on the second); the second has a heavy tail
    zs = [-1.2, 0.3, 0.8, -0.4, 1.5, -0.9, 0.1, 2.1, -1.8, 0.6, -0.2, 1.1, -0.7, 0.4, -1.1, 0.9, 0.0, -0.3, 1.9, -1.4]
    rows = [(z, None if i == 3 else (40.0 if i % 6 == 5 else -z / 2)) for i, z in enumerate(zs)]
    scales = [0.03, 0.03]
    replay = dict(series=40, length=200)
    designs = charts.calibrate(rows, scales, rate=0.01, **replay)
    assert charts.false_alarm_rate(rows, scales, designs, **replay) <= 0.01
    # each chart within its share of the budget alone; the heavy tail's chart needs the higher limits
    for c, design in enumerate(designs):
        assert charts.false_alarm_rate([(row[c],) for row in rows], [0.03], [design], **replay) <= 0.005
    assert designs[1].z_big > 40.0 > designs[0].z_big and designs[1].h > designs[0].h
    # one night alone alarms only by the jump limit: h is above one night's largest increment
    for design, s0 in zip(designs, scales):
        k, clip = design.k_and_clip(s0)
        assert design.h > clip - k
    # a looser design alarms more often on the same replay: the search is not vacuous
    loose = [charts.Design(h=d.h / 4, z_big=d.z_big / 2) for d in designs]
    assert charts.false_alarm_rate(rows, scales, loose, **replay) > 0.01


def test_the_jump_limit_extrapolates_the_tail_beyond_the_nights_seen():
    zs = [-1.2, 0.3, 0.8, -0.4, 1.5, -0.9, 0.1, 2.1, -1.8, 0.6, -0.2, 1.1, -0.7, 0.4, -1.1, 0.9, 0.0, -0.3, 1.9, -1.4]
    limit = charts.tail_limit(zs, 0.0005)
    assert limit > max(zs)                                        # a replay could only say "above the largest"
    assert charts.tail_limit(zs, 0.00005) > limit                 # rarer: further out
    assert charts.tail_limit(zs + [None] * 20, 0.0005) < limit    # excluded nights cannot alarm: fewer chances
    heavy = zs[:-3] + [6.0, 9.0, 14.0]
    assert charts.tail_limit(heavy, 0.0005) > limit + 10          # a heavier tail: much further out
    assert charts.tail_limit([0.0] * 30, 0.5) > 0.0               # ties: never at the largest night itself
    with pytest.raises(ValueError, match='needs 5'):
        charts.tail_limit([1.0, None, 2.0, 3.0, 0.5], 0.001)


def test_detectable_effect_grows_with_fewer_nights():
    zs = [-1.2, 0.3, 0.8, -0.4, 1.5, -0.9, 0.1, 2.1, -1.8, 0.6, -0.2, 1.1, -0.7, 0.4, -1.1, 0.9, 0.0, -0.3]
    rows = [(z, -z) for z in zs]
    designs = [charts.Design(shift=0.10, h=5.0, z_big=4.0)] * 2
    one = charts.detectable_effect(rows, [0], [0.03, 0.03], designs, 1, series=100)
    ten = charts.detectable_effect(rows, [0], [0.03, 0.03], designs, 10, series=100)
    assert one is not None and ten is not None and ten < one
    assert charts.detection_probability(rows, [0], [0.03, 0.03], designs, one, 1, series=100) >= 0.9
    # two charts of one case shifted together: any of them alarming is a detection, so no later than one alone
    both = charts.detectable_effect(rows, [0, 1], [0.03, 0.03], designs, 1, series=100)
    assert both <= one


def test_a_false_alarm_restarts_every_chart_and_an_episode_counts_its_own_case():
    design = charts.Design(shift=0.10, h=4.0, z_big=6.0)
    rows = [(0.0, 0.0), (7.0, 0.0), (2.9, 2.9), (2.9, 2.9)]
    states, alarms = charts.chart_states(rows, [0.05, 0.05], [design, design])
    assert alarms == [1] and states[1] == (0.0, 0.0)          # the jump on chart 0 restarted both
    k = design.k_and_clip(0.05)[0]
    assert states[3] == pytest.approx((2 * (2.9 - k), 2 * (2.9 - k)))
    # an episode of the second case: only its chart counts, from the state the history left
    assert charts.episode_delay((0.0, 3.5), [(9.0, 0.0), (0.0, 2.9)], [1], [0.05, 0.05], [design] * 2) == 2
    assert charts.episode_delay((0.0, 0.0), [(9.0, 0.0)], [1], [0.05, 0.05], [design] * 2) is None
    # each chart by its own design: a higher jump limit on chart 1 leaves the same night unalarmed there
    assert charts.episode_delay((0.0, 0.0), [(0.0, 7.0)], [1], [0.05, 0.05],
                                [design, charts.Design(shift=0.10, h=4.0, z_big=8.0)]) is None


def test_the_study_of_the_real_ledger():
    """scripts/detection_power.py --from-ledger's figures from the nights this VM measured (reference-data/ledger):
    what Phase I fits, the replayed false-alarm rate it was calibrated to, the clean nights after it counted."""
    from ibrepro import ledger, paths
    nights = ledger.read(paths.REFERENCE_DATA / 'ledger' / 'vm-impi-1x2.jsonl')
    tuning = [n for n in nights if n['phase'] == 'tuning' and n['schedule']['kind'] == 'clean']
    assert len(tuning) >= 20
    out = charts.study(nights, phase1=10, series=20, within=(1, 10))
    assert out['phase1'] == {'nights': 10, 'first': tuning[0]['night'], 'last': tuning[9]['night']}
    # the calibration says whether its replay met the target (on this VM's heavy-tailed nights it may not)
    assert out['target_met'] == (out['replayed_false_alarm_rate'] <= out['target_false_alarm_rate'] == charts.RATE)
    alarms = out['false_alarms']
    # every clean night after Phase I counts, the held-out phase's too (the rate is printed rounded to 5 digits)
    assert alarms['predicted'] == pytest.approx(out['replayed_false_alarm_rate'] * alarms['clean_nights'], abs=0.011)
    assert alarms['clean_nights'] == len(nights) - 10 - sum(n['schedule']['kind'] != 'clean' for n in nights)
    assert len(alarms['nights']) == alarms['alarms'] and alarms['upper95'] >= alarms['alarms'] / alarms['clean_nights']
    assert {c['case'] for c in out['cases']} == {f'IMBPointToPoint %benchmark={b} %layout=1x2'
                                                for b in ('PingPong', 'Uniband')}
    for case in out['cases']:
        assert [b['band'] for b in case['bands']] == sorted(['latency', 'protocol', 'bandwidth'])
        assert all(b['noise_sd'] >= charts.MIN_SCALE for b in case['bands'])
        assert set(case['mde']) == {'1', '10'}


def test_paired_levels_compare_each_injected_round_with_its_clean_neighbour():
    # rounds: clean, injected (1.2x), clean, injected (1.1x): each pair against its own clean round, then the median
    values = {'lat_8': [0.20, 0.24, 0.30, 0.33], 'bw_1048576': [26000.0, 26000 / 1.2, 25000.0, 25000 / 1.1]}
    record = {'cases': {CASE: {'result': 'pass', 'values': values, 'control': []},
                        'failed': {'result': 'fail', 'values': {}, 'control': []}}}
    (level,) = charts.paired_levels(record).values()
    assert level['pairs'] == 2
    assert level['bands']['latency'] == pytest.approx(math.exp((math.log(1.2) + math.log(1.1)) / 2) - 1)
    assert level['bands']['bandwidth'] == pytest.approx(level['bands']['latency'])
    # two jobs of the same injection pool their pairs: the median over all of them
    other = {'cases': {CASE: {'result': 'pass', 'control': [],
                              'values': {'lat_8': [0.20, 0.26], 'bw_1048576': [26000.0, 26000 / 1.3]}}}}
    (pooled,) = charts.paired_levels(record, other).values()
    assert pooled['pairs'] == 3 and pooled['bands']['latency'] == pytest.approx(0.2)


def test_an_episode_that_slowed_one_band_is_judged_on_that_bands_chart():
    """A schedule entry with ``band`` (the injector slowed that band's sizes only): the episode counts only that
    chart, the band's own stated detectable effect; without ``band``, any chart of its case."""
    clean = [{**night(f't{i:02d}', 1 + 0.01 * ((i * 7) % 5 - 2)), 'phase': 'tuning', 'schedule': {'kind': 'clean'}}
             for i in range(20)]
    episodes = []
    for name, band in (('on-bandwidth', 'bandwidth'), ('on-latency', 'latency'), ('on-case', None)):
        slowed = night(name)
        values = slowed['cases'][CASE]['values']
        values['bw_1048576'] = [x / 1.5 for x in values['bw_1048576']]       # the 1 MiB messages 50 % slower
        values['lat_1048576'] = [x * 1.5 for x in values['lat_1048576']]
        entry = {'kind': 'injected', 'case': CASE, 'level': 50, 'episode': name, 'night_in_episode': 1,
                 'injected_ratio': 0.5}
        episodes.append({**slowed, 'phase': 'held-out', 'schedule': {**entry, **({'band': band} if band else {})}})
    out = charts.study(clean + episodes, series=20, within=(1,))
    levels = {level.get('band'): level for level in out['cases'][0]['levels']}
    assert set(levels) == {'bandwidth', 'latency', None}
    assert levels['bandwidth']['detected_within'] == {'1': 1} and levels['bandwidth']['episodes'] == 1
    assert levels['latency']['detected_within'] == {'1': 0}          # its chart did not move
    assert levels[None]['detected_within'] == {'1': 1}
    # the replay's prediction at the measured level, on the charts the episode is judged on
    assert levels['bandwidth']['predicted_within'] == {'1': 1.0} and levels['latency']['predicted_within']['1'] > 0.9


def test_a_frozen_reference_judges_as_it_was_frozen():
    """``freeze`` (detection_power.py --freeze): Phase I's baseline, designs and prediction as one document; the study
    judges the later nights with it as the pre-registration says, and refuses one whose nights the ledger lacks."""
    clean = [{**night(f't{i:02d}', 1 + 0.01 * ((i * 7) % 5 - 2)), 'phase': 'tuning', 'schedule': {'kind': 'clean'}}
             for i in range(24)]
    later = [{**night('late', 1.4), 'phase': 'held-out', 'schedule': {'kind': 'clean'}}]
    phase1 = charts.phase1_nights(clean, phase1=20)
    assert [n['night'] for n in phase1] == [f't{i:02d}' for i in range(20)]
    doc = charts.freeze(phase1, rate=0.004, series=20)
    assert doc['nights'] == [n['night'] for n in phase1] and doc['rate'] == 0.004 and doc['predicted_rate'] > 0
    refit = charts.study(clean + later, phase1=20, rate=0.004, series=20, within=(1,))
    frozen = charts.study(clean + later, frozen=doc, within=(1,))
    assert frozen['false_alarms'] == refit['false_alarms']
    assert frozen['false_alarms']['clean_nights'] == 5 and frozen['false_alarms']['nights'] == ['late']
    assert frozen['phase1'] == refit['phase1'] and frozen['target_false_alarm_rate'] == 0.004
    assert [b['design'] for b in frozen['cases'][0]['bands']] == [b['design'] for b in refit['cases'][0]['bands']]
    with pytest.raises(ValueError, match='does not have: t00'):
        charts.study(clean[1:] + later, frozen=doc)


def test_the_replay_block_follows_how_long_busy_spells_last():
    """``block_length`` (the Politis-White rule on each chart's ranks): nights that come in spells get longer blocks
    than nights independent of each other; nights a chart excluded (None) are skipped, and a short chart is ignored."""
    import random
    rng = random.Random(3)
    independent = [rng.gauss(0, 1) for _ in range(120)]
    spells, x = [], 0.0
    for e in independent:
        x = 0.9 * x + e
        spells.append(x)
    short = [None] * 115 + [1.0] * 5
    assert charts.block_length([(a,) for a in independent]) < 3 < charts.block_length([(a,) for a in spells])
    with_gaps = [(None if i % 10 == 0 else a, s) for i, (a, s) in enumerate(zip(spells, short))]
    assert charts.block_length(with_gaps) > 3 and charts.block_length([(s,) for s in short]) == 1.0
    assert charts.block_length([]) == 1.0
