"""Evidence across nights: one chart per test case and size band, against a frozen baseline (docs/verdict-protocol.md).

A regression persists until it is fixed, so the verdict accumulates evidence night after night instead of judging
each night alone, and never lets regressed nights become the reference.

* **Night value** of a (case, band): per round, the median over the band's variables of ``sign * log(x / x0)``
  (``x0`` the variable's baseline level, sign +1 where lower is better: positive = worse); the night is the *best*
  of its accepted rounds (the least positive). Interference only ever slows a round, and a lasting regression slows
  every round, so the best round keeps the regression and drops what a busy spell did to the others (the minimum
  estimator of Chen & Revels, "Robust benchmarking in noisy environments", 2016); a fault that slows only some
  rounds is the one-night test's (:mod:`ibrepro.verdict`), not the charts'. A round is excluded only on the
  control's evidence, never on the benchmark's own spread: the control before it or the one after it
  (:class:`ControlLimits`) says the machine was in a *slow state* (its core-to-core round trip over twice, or its
  memory copy under half, of the baseline's median; over 10 % stolen; over 25 % of the time waiting for a CPU),
  and only on the charts that state moves (:meth:`Baseline.fit` measures, per chart, how far
  the baseline's slow-state rounds sat from its other rounds: measured on the 2-core VM, the slow state takes
  shared-memory PingPong at 1-4 MiB from 28 to 2.2 GB/s and leaves Uniband where it was). A night with no accepted
  round is excluded, counted and shown.
* **Frozen baseline** (:meth:`Baseline.fit`): from stated clean nights (Phase I), per variable its level, per chart
  the median ``m0`` and robust scale ``s0`` (1.4826 MAD) of the night values. It changes only when a person
  accepts a change; a regressed night never enters it.
* **Hardware**: the baseline keeps the node hardware its Phase I ran on (each case's, as its control read it: CPU
  model and cache, the RDMA devices' board ids). A night measured on other hardware is excluded from every chart of
  its case, and said: its values describe another machine (moving the 2-core VM to another host shifted the cases
  by more than any injected level, docs/verdict-protocol.md), so a person accepts the new hardware with a new
  Phase I (``ibrepro charts baseline --accept NIGHT``) before it is judged; until then the night is "could not
  judge", never clean and never a regression. A link that trained down or a
  firmware that got slower is no hardware change: the charts judge it.
* **Chart**: ``z = (y - m0) / s0``; a one-sided CUSUM ``S = max(0, S + min(z, clip) - k)`` tuned to a design
  shift (``k`` half of it, in z units), alarm at ``S >= h``; beside it a one-night limit ``z >= z_big`` for large
  jumps (Lucas's combined Shewhart-CUSUM). After an alarm the chart stays in alarm: a person fixes or accepts it.
* **Calibration** (:func:`calibrate`): per chart its own ``h`` and ``z_big``; each chart gets an equal share of the
  system-wide false-alarm budget (:data:`RATE`), so a chart with a heavy tail (a bimodal band) pays for
  it in its own detectable effect and not in every other chart's. ``z_big`` takes ``jump_share`` of the share: a
  one-night limit that rare (1 night in thousands) lies beyond every night of a Phase I, where a replay can only
  put it at the largest night seen (on the VM's nights, the next 46 then crossed it 3 times), so it is the quantile
  of the chart's upper tail fitted by peaks over a threshold (Pickands 1975; Davison & Smith 1990: the excesses over
  the 80th percentile, exponential). ``h`` takes the rest, from replaying the baseline nights' residuals as a
  stationary block bootstrap (Politis & Romano; whole nights, so busy spells keep their structure); it is at least
  one night's largest increment, so one night alone alarms only by the jump limit. The system-wide rate replayed
  with all charts together (their correlation kept) plus the tails' share is what the held-out nights are held to.
* **Detectable effect** (:func:`detectable_effect`): per chart, the smallest lasting slowdown caught within ``d``
  nights with probability 0.9, by the same replay with the shift added.
"""

import dataclasses
import math
import random
import statistics

from . import bands, ledger, parsers, stats

#: A night needs this many accepted rounds (of the rounds it ran) to be judged.
MIN_ROUNDS = 1
#: The control's slow state (see the module doc): log factors from the baseline's median, shares in percent.
SLOW_STATE = {'pingpong_ns': math.log(2.0), 'copy_gbs': math.log(2.0), 'steal_pct': 10.0, 'psi_some_pct': 25.0}
#: A chart excludes the control's slow-state rounds when, in the baseline, they sat this many of its robust sds from
#: its other rounds (or when the baseline had too few slow-state rounds to tell: fewer than SENSITIVITY_ROUNDS).
SENSITIVITY_Z = 3.0
SENSITIVITY_ROUNDS = 5
#: Floor of a chart's noise scale (log units): no chart claims to be quieter than 0.2 %.
MIN_SCALE = 0.002
#: The system-wide false alarms per night the charts are calibrated to (all charts together): 1 in about 330 nights,
#: a third of the 1 per 100 a site tolerates, because the replay of a Phase I of 80 nights under-predicts busy spells
#: it has not seen (docs/verdict-protocol.md: at most 2 in 300 nights then holds with margin). On the VM's 78
#: u-nights, against 1 per 100, Uniband's detectable effect within one night went from 9.3 to 10.5 %, within 2 to 10
#: nights by at most 0.2 points; PingPong's within 3 and 10 nights by at most 0.4.
RATE = 0.003
#: The replay's mean block of consecutive nights where none is given (a stationary bootstrap keeps busy spells that
#: long together); a baseline takes its own from its nights (:func:`block_length`).
MEAN_BLOCK = 3.0
#: Why a night is excluded from its case's charts when it ran on hardware its Phase I did not.
OTHER_HARDWARE = 'measured on other hardware than the baseline'
#: The control fields and the direction in which the machine is slower.
CONTROL_WORSE = {'pingpong_ns': 'higher', 'copy_gbs': 'lower', 'steal_pct': 'higher', 'psi_some_pct': 'higher'}


def family_of(case):
    return case.split(' %')[0].split('%')[0].strip()


def variable_key(name):
    """``(metric, size)`` of a per-size variable (``lat_8``), or None (``bw_peak``, size-less variables)."""
    metric, _, size = name.rpartition('_')
    return (metric, int(size)) if size.isdigit() and metric else None


def sign_of(metric):
    better = parsers.METRIC_BETTER.get(metric)
    return {'lower': 1, 'higher': -1}.get(better)


def chart_keys(case, values):
    """``{band: [variable, ...]}`` of a case's per-size variables with a direction, by the family's bands."""
    found = {}
    for name in sorted(values):
        key = variable_key(name)
        if key and sign_of(key[0]):
            band = bands.band_of(family_of(case), key[1])
            if band:
                found.setdefault(band, []).append(name)
    return found


def _robust(values):
    """Median and robust sd (1.4826 MAD: ibrepro.stats)."""
    return stats.median(values), stats.MAD_TO_SIGMA * stats.mad(values)


# -- the control ----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class ControlLimits:
    """Per control field: its baseline center (log) and the worst deviation a baseline round showed; a round beyond
    it (by ``margin``, log units) was measured on a slower machine."""

    center: dict
    limit: dict
    margin: float = 0.0

    @classmethod
    def fit(cls, rounds, margin=0.0):
        """The slow state of the control (:data:`SLOW_STATE`) around the median of the baseline's ``rounds``."""
        center, limit = {}, {}
        for field in CONTROL_WORSE:
            xs = [r[field] for r in rounds if isinstance(r.get(field), (int, float))]
            if len(xs) < 10:
                continue
            if field in ('steal_pct', 'psi_some_pct'):     # shares: compared as they are, not as logs
                center[field], limit[field] = 0.0, SLOW_STATE[field]
                continue
            logs = [math.log(x) for x in xs if x > 0]
            center[field], limit[field] = statistics.median(logs), SLOW_STATE[field]
        return cls(center, limit, margin)

    def slow(self, round_):
        """The fields by which a round's control says the machine was slow (empty: not slow)."""
        found = []
        for field, limit in self.limit.items():
            x = round_.get(field)
            if not isinstance(x, (int, float)):
                continue
            if field in ('steal_pct', 'psi_some_pct'):
                dev = x
            elif x <= 0:
                continue
            else:
                dev = math.log(x) - self.center[field]
                dev = dev if CONTROL_WORSE[field] == 'higher' else -dev
            if dev > limit + self.margin:
                found.append(field)
        return found


# -- night values -----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class NightValue:
    """One night of one chart: its value (None when excluded or not measured) and why."""

    value: float | None
    rounds: int = 0            # accepted rounds
    excluded: str = ''         # why the night was excluded ('' when it was not)


def accepted_rounds(case_record, control):
    """Indexes of a case's rounds the control accepts, and why the others were not (``{round: [fields]}``). Round
    ``r`` is framed by control ``r`` (before it) and ``r + 1`` (before the next round, or after the last): either
    in the slow state excludes it (a night stored before the control after the last existed has only the one
    before)."""
    rounds = max((len(v) for v in case_record['values'].values()), default=0)
    controls = case_record['control']
    slow = {}
    for r in range(rounds):
        why = []
        for c in controls[r:r + 2]:
            why += [f for f in (control.slow(c) if (control and c) else []) if f not in why]
        if why:
            slow[r] = why
    return [r for r in range(rounds) if r not in slow], slow


def _round_values(case_record, names, levels, rounds):
    """Per round of ``rounds``: the band value (median over ``names`` of the signed log deviation), or None."""
    out = []
    for r in rounds:
        devs = []
        for name in names:
            xs = case_record['values'].get(name) or []
            x = xs[r] if r < len(xs) else None
            if isinstance(x, (int, float)) and x > 0 and levels.get(name):
                devs.append(sign_of(variable_key(name)[0]) * (math.log(x) - math.log(levels[name])))
        out.append(statistics.median(devs) if devs else None)
    return out


def night_values(case, case_record, levels, control, gated=None):
    """``{band: NightValue}`` of one night of one case against the baseline ``levels`` (variable -> x0); the bands
    in ``gated`` (default: every band) leave out the rounds the control says ran in the slow state."""
    if case_record.get('result') != 'pass':
        reason = f'the case did not pass ({case_record.get("result")}: {case_record.get("reason", "")[:80]})'
        return {band: NightValue(None, excluded=reason) for band in chart_keys(case, levels)}
    accepted, slow = accepted_rounds(case_record, control)
    rounds = max((len(v) for v in case_record['values'].values()), default=0)
    out = {}
    for band, names in chart_keys(case, levels).items():
        use = accepted if gated is None or band in gated else list(range(rounds))
        per_round = [v for v in _round_values(case_record, names, levels, use) if v is not None]
        if len(per_round) < MIN_ROUNDS:
            why = ('the control says the machine was in its slow state in round(s) ' +
                   ', '.join(f'{r + 1} ({"/".join(f)})' for r, f in sorted(slow.items()))) if slow else \
                f'{len(per_round)} round(s) measured'
            out[band] = NightValue(None, len(per_round), why)
        else:
            out[band] = NightValue(min(per_round), len(per_round))    # the best round: module doc
    return out


# -- the baseline --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Baseline:
    """The frozen reference: per case its variables' levels, per (case, band) chart ``m0`` and ``s0``, the control's
    limits, and the nights it was fitted on."""

    levels: dict               # case -> {variable: x0}
    charts: dict               # (case, band) -> (m0, s0)
    control: ControlLimits
    nights: list               # night ids of Phase I
    gated: dict = dataclasses.field(default_factory=dict)   # (case, band) -> shift of the slow state (z), or None
    hardware: dict = dataclasses.field(default_factory=dict)    # case -> [node hardware seen in Phase I]

    @classmethod
    def fit(cls, nights):
        """Phase I: ``nights`` are ledger nights stated clean by a person (``ibrepro baseline``)."""
        rounds = [c for n in nights for case in n['cases'].values() if case.get('result') == 'pass'
                  for c in case['control']]
        control = ControlLimits.fit(rounds)
        levels = {}
        for case in sorted({c for n in nights for c in n['cases']}):
            per_var = {}
            for n in nights:
                rec = n['cases'].get(case)
                if not rec or rec.get('result') != 'pass':
                    continue
                for name, xs in rec['values'].items():     # every round: a median needs no exclusion
                    ok = [x for x in xs if isinstance(x, (int, float)) and x > 0]
                    if len(ok) >= MIN_ROUNDS:
                        per_var.setdefault(name, []).append(statistics.median(ok))
            levels[case] = {name: statistics.median(v) for name, v in per_var.items() if len(v) >= 3}
        hardware = {}
        for n in nights:
            for case, rec in n['cases'].items():
                found = ledger.hardware_of(rec.get('hardware')) if rec.get('result') == 'pass' else {}
                if found and found not in hardware.setdefault(case, []):
                    hardware[case].append(found)
        baseline = cls(levels, {}, control, [n['night'] for n in nights],
                       hardware={case: found for case, found in hardware.items() if found})
        baseline.gated = baseline._slow_state_shifts(nights)
        for key, series in baseline.series(nights).items():
            ys = [v.value for v in series if v.value is not None]
            if len(ys) >= 5:
                m0, s0 = _robust(ys)
                baseline.charts[key] = (m0, max(s0, MIN_SCALE))
        return baseline

    def _slow_state_shifts(self, nights):
        """Per chart: how far the baseline's slow-state rounds sat from its other rounds (in the other rounds' robust
        sds); None when there were too few slow-state rounds to tell (the chart then excludes them, as a gated one),
        0 when the slow state was the usual one (too few other rounds: excluding it would leave nothing)."""
        normal, slow = {}, {}
        for n in nights:
            for case, levels in self.levels.items():
                rec = n['cases'].get(case)
                if not rec or rec.get('result') != 'pass':
                    continue
                accepted, _ = accepted_rounds(rec, self.control)
                rounds = max((len(v) for v in rec['values'].values()), default=0)
                for band, names in chart_keys(case, levels).items():
                    values = _round_values(rec, names, levels, range(rounds))
                    for r, v in enumerate(values):
                        if v is not None:
                            (normal if r in accepted else slow).setdefault((case, band), []).append(v)
        shifts = {}
        for key in set(normal) | set(slow):
            ys = normal.get(key, [])
            if len(ys) < SENSITIVITY_ROUNDS:    # the slow state is the usual one here: nothing to exclude it for
                shifts[key] = 0.0
                continue
            if len(slow.get(key, [])) < SENSITIVITY_ROUNDS:     # too rare to tell: excluded, to be safe
                shifts[key] = None
                continue
            center, scale = _robust(ys)
            shifts[key] = (statistics.median(slow[key]) - center) / max(scale, MIN_SCALE)
        return shifts

    def other_hardware(self, case, case_record):
        """How the node hardware of a night's case differs from every kind its Phase I ran on ('' when it does not,
        or when either side did not record it: nights stored before the control printed it)."""
        found = ledger.hardware_of(case_record.get('hardware'))
        known = self.hardware.get(case) or []
        if not found or not known or found in known:
            return ''
        ref = known[0]
        moved = [f'{k} {found.get(k, "-")!r} (Phase I: {ref.get(k, "-")!r})'
                 for k in sorted(set(found) | set(ref)) if found.get(k) != ref.get(k)]
        return ', '.join(moved)

    def gated_bands(self, case):
        """The bands of ``case`` that leave out the control's slow-state rounds."""
        return {band for (c, band), z in self.gated.items() if c == case and (z is None or abs(z) >= SENSITIVITY_Z)}

    def to_json(self, designs):
        """The frozen baseline and each chart's design (``{(case, band): Design}``) as one JSON document
        (``ibrepro charts baseline`` writes it)."""
        return {'v': 2, 'nights': self.nights, 'levels': self.levels,
                'charts': [{'case': c, 'band': b, 'm0': m0, 's0': s0, 'design': dataclasses.asdict(designs[(c, b)])}
                           for (c, b), (m0, s0) in sorted(self.charts.items())],
                'control': {'center': self.control.center, 'limit': self.control.limit},
                'gated': [{'case': c, 'band': b, 'shift_z': z} for (c, b), z in sorted(self.gated.items())],
                'hardware': self.hardware}

    @classmethod
    def from_json(cls, doc):
        """``(Baseline, {(case, band): Design})`` from :meth:`to_json`'s document (ValueError naming what is
        wrong; a format-1 document's one design is every chart's)."""
        try:
            if doc['v'] not in (1, 2):
                raise ValueError(f'format {doc["v"]!r}, this ibrepro reads 1 and 2')
            charts_ = {(c['case'], c['band']): (float(c['m0']), float(c['s0'])) for c in doc['charts']}
            if not all(math.isfinite(m) and math.isfinite(s) and s > 0 for m, s in charts_.values()):
                raise ValueError('a chart whose m0 is not finite or whose s0 is not a positive finite number')
            designs = {(c['case'], c['band']): Design.from_json(c['design'] if doc['v'] == 2 else doc['design'])
                       for c in doc['charts']}
            levels = {case: {k: float(v) for k, v in lv.items()} for case, lv in doc['levels'].items()}
            control = ControlLimits({k: float(v) for k, v in doc['control']['center'].items()},
                                    {k: float(v) for k, v in doc['control']['limit'].items()})
            gated = {(g['case'], g['band']): None if g['shift_z'] is None else float(g['shift_z'])
                     for g in doc.get('gated', [])}
            hardware = {str(case): [ledger.hardware_of(h) for h in found if ledger.hardware_of(h)]
                        for case, found in doc.get('hardware', {}).items()}
            return cls(levels, charts_, control, [str(n) for n in doc['nights']], gated, hardware), designs
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f'not a chart baseline ({type(err).__name__}: {err})') from None

    def series(self, nights):
        """``{(case, band): [NightValue per night]}`` of ``nights`` against this baseline."""
        out = {}
        for i, n in enumerate(nights):
            for case, levels in self.levels.items():
                rec = n['cases'].get(case)
                other = self.other_hardware(case, rec) if rec else ''
                if other:
                    values = {band: NightValue(None, excluded=OTHER_HARDWARE)       # how: evidence's line
                              for band in chart_keys(case, levels)}
                elif rec:
                    values = night_values(case, rec, levels, self.control, self.gated_bands(case))
                else:
                    values = {band: NightValue(None, excluded='not measured') for band in chart_keys(case, levels)}
                for band, v in values.items():
                    out.setdefault((case, band), [NightValue(None, excluded='not measured')] * i).append(v)
        for key in out:
            out[key] += [NightValue(None, excluded='not measured')] * (len(nights) - len(out[key]))
        return out

    def z_scores(self, nights):
        """``{(case, band): [z or None per night]}``: each night's standardized deviation (positive = worse)."""
        found = {}
        for key, series in self.series(nights).items():
            if key in self.charts:
                m0, s0 = self.charts[key]
                found[key] = [None if v.value is None else (v.value - m0) / s0 for v in series]
        return found


# -- the chart ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Design:
    """How the charts alarm: the design shift (relative), the CUSUM limit ``h`` and the one-night limit
    ``z_big`` (both in z units, from :func:`calibrate`)."""

    shift: float = 0.10
    h: float = 5.0
    z_big: float = 5.0

    def k_and_clip(self, s0):
        mu = math.log1p(self.shift) / s0          # the design shift in z units
        return mu / 2, max(3.0, mu)

    def step(self, s, z, s0):
        """One night of a chart of scale ``s0``: ``(its CUSUM after z, whether it alarms)``; an excluded night
        (None) leaves it as it was."""
        if z is None:
            return s, False
        k, clip = self.k_and_clip(s0)
        s = max(0.0, s + min(z, clip) - k)
        return s, z >= self.z_big or s >= self.h

    @classmethod
    def from_json(cls, doc):
        """A design from its JSON dict (ValueError unless shift, h and z_big are positive finite numbers)."""
        design = cls(**{k: float(v) for k, v in doc.items()})
        if not all(math.isfinite(x) and x > 0 for x in (design.shift, design.h, design.z_big)):
            raise ValueError(f'a chart design whose shift, h or z_big is not a positive finite number: {doc}')
        return design


def run_chart(zs, s0, design):
    """The chart over one z series: ``(S per night, the first alarm night index or None, its kind)``. Excluded
    nights (None) leave S unchanged."""
    k, clip = design.k_and_clip(s0)
    s, path = 0.0, []
    for i, z in enumerate(zs):
        if z is not None:
            if z >= design.z_big:
                path.append(s)
                return path, i, 'jump'
            s = max(0.0, s + min(z, clip) - k)
        path.append(s)
        if s >= design.h:
            return path, i, 'cusum'
    return path, None, None


def block_length(rows):
    """The stationary bootstrap's mean block for ``rows`` (per night the z of every chart, None where excluded): per
    chart the Politis-White rule (Politis & White 2004, corrected by Patton, Politis & White 2009: flat-top lag
    window from the first run of insignificant autocorrelations, b = (2 G^2 / D)^(1/3) n^(1/3); what the ``arch``
    package's ``optimal_block_length`` computes) on the ranks of its nights, so one outlier night does not decide;
    the largest over the charts (the most persistent chart's busy spells stay together), at least 1."""
    best = 1.0
    for c in range(len(rows[0]) if rows else 0):
        xs = [row[c] for row in rows if row[c] is not None]
        n = len(xs)
        if n < 10:
            continue
        order = sorted(range(n), key=xs.__getitem__)
        ranks = [0.0] * n
        for r, i in enumerate(order):
            ranks[i] = float(r)
        mean = sum(ranks) / n
        eps = [x - mean for x in ranks]
        kn, m_max = max(5, int(math.log10(n))), int(math.ceil(math.sqrt(n))) + max(5, int(math.log10(n)))
        critical = 2 * math.sqrt(math.log10(n) / n)
        acv, acorr, m = [], [], None
        for k in range(min(m_max, n - 2) + 1):
            cross = sum(eps[i] * eps[i + k] for i in range(n - k))
            acv.append(cross / n)
            head, tail = eps[:n - k - 1], eps[k + 1:]
            acorr.append(abs(cross) / math.sqrt(sum(x * x for x in head) * sum(x * x for x in tail) or 1.0))
            if m is None and k >= kn and all(a < critical for a in acorr[k - kn:k]):
                m = k - kn
        m = min(2 * max(m, 1) if m is not None else m_max, len(acv) - 1)
        g, long_run = 0.0, acv[0]
        for k in range(1, m + 1):
            weight = 1.0 if k / m <= 0.5 else 2 * (1 - k / m)
            g += 2 * weight * k * acv[k]
            long_run += 2 * weight * acv[k]
        if long_run <= 0:
            continue
        b = (2 * g * g / (2 * long_run * long_run)) ** (1 / 3) * n ** (1 / 3)
        best = max(best, min(b, math.ceil(min(3 * math.sqrt(n), n / 3))))
    return best


def _bootstrap_series(rows, length, mean_block, rng):
    """A stationary block bootstrap series of ``length`` rows (each row one night of every chart)."""
    out, i = [], rng.randrange(len(rows))
    while len(out) < length:
        out.append(rows[i])
        i = rng.randrange(len(rows)) if rng.random() < 1 / mean_block else (i + 1) % len(rows)
    return out


def false_alarm_rate(rows, scales, designs, *, series=200, length=300, mean_block=MEAN_BLOCK, seed=1):
    """Alarms per night, system-wide (any chart), over bootstrap replays of ``rows`` (the baseline nights' z per
    chart, None where excluded), each chart with its design (``designs``, in the order of ``scales``); after an
    alarm every chart restarts (the site fixed or accepted it)."""
    rng = random.Random(seed)
    alarms = nights = 0
    for _ in range(series):
        replay = _bootstrap_series(rows, length, mean_block, rng)
        start = 0
        while start < length:
            first = None
            for c, s0 in enumerate(scales):
                _, at, _ = run_chart([row[c] for row in replay[start:]], s0, designs[c])
                if at is not None and (first is None or at < first):
                    first = at
            if first is None:
                nights += length - start
                break
            alarms += 1
            nights += first + 1
            start += first + 1
    return alarms / nights


#: The search range of the limits (z units): a chart that needs more cannot promise the rate (its design stays at
#: the top, and ``ibrepro charts baseline`` says so).
MAX_LIMIT = 400.0
#: The tail fit's threshold: the excesses over this quantile of a chart's Phase-I nights.
TAIL_QUANTILE = 0.8


def tail_limit(zs, rate):
    """The z a night exceeds with probability ``rate``, from the upper tail of the Phase-I nights ``zs`` (None:
    excluded, a night that cannot alarm): peaks over the :data:`TAIL_QUANTILE` threshold ``u`` with exponential
    excesses, ``P(Z > z) = (m / n) exp(-(z - u) / beta)``, ``beta`` their mean (its MLE, at least 0.5: a tail of
    ties says little), ``m`` of ``n`` nights beyond ``u``; never below the largest night seen."""
    xs = sorted(z for z in zs if z is not None)
    if len(xs) < 5:
        raise ValueError(f'{len(xs)} measured night(s): the tail fit needs 5')
    u = xs[min(int(TAIL_QUANTILE * len(xs)), len(xs) - 3)]
    excesses = [z - u for z in xs if z > u] or [0.0]
    beta = max(0.5, statistics.fmean(excesses))
    found = u + beta * math.log(len(excesses) / (len(zs) * rate))
    return min(MAX_LIMIT, max(found, xs[-1] + 1e-9))


def calibrate(rows, scales, *, rate=RATE, shift=0.10, jump_share=0.3, **replay):
    """Per chart (in the order of ``scales``), its :class:`Design` for its share of ``rate`` (``rate / charts``):
    ``z_big`` the :func:`tail_limit` at ``jump_share`` of the share, ``h`` the smallest (bisection, from one
    night's largest increment up) whose replayed false-alarm rate on that chart alone is within the rest."""
    share = rate / max(1, len(scales))

    def search(column, s0, make, lo, hi, target):
        for _ in range(16):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if false_alarm_rate(column, [s0], [make(mid)], **replay) <= target else (mid, hi)
        return hi
    designs = []
    for c, s0 in enumerate(scales):
        column = [(row[c],) for row in rows]
        z_big = tail_limit([row[c] for row in rows], share * jump_share)
        k, clip = Design(shift).k_and_clip(s0)
        lowest = max(0.5, clip - k)           # one night alone never alarms the CUSUM: the jump limit is for that
        h = search(column, s0, lambda h: Design(shift, h=h, z_big=z_big), lowest, max(lowest, MAX_LIMIT),
                   share * (1 - jump_share))
        designs.append(Design(shift, h=_up(h), z_big=_up(z_big)))
    return designs


def _up(x):
    """``x`` rounded up to 3 decimals (a limit rounded down could let the night it was set above alarm)."""
    return math.ceil(x * 1000) / 1000


def predicted_rate(rows, scales, designs, *, jump_share=0.3, rate=RATE, **replay):
    """The system-wide false alarms per night the held-out nights are held to: the replay of all charts together
    (what the Phase-I nights show) plus the tails' share beyond them (the jump limits' fitted rate)."""
    share = rate / max(1, len(scales))
    return false_alarm_rate(rows, scales, designs, **replay) + len(scales) * share * jump_share


def detection_probability(rows, chart_set, scales, designs, effect, within, *, series=400, mean_block=MEAN_BLOCK,
                          seed=2):
    """P(a lasting slowdown of ``effect`` (relative) on the charts ``chart_set`` (indexes: one band, or every band of
    a case) is alarmed within ``within`` nights), by the bootstrap replay of the baseline residuals with the shift
    added to those charts."""
    rng = random.Random(seed)
    shifts = {c: math.log1p(effect) / scales[c] for c in chart_set}
    hits = 0
    for _ in range(series):
        replay = _bootstrap_series(rows, within, mean_block, rng)
        shifted = [tuple(None if row[c] is None else row[c] + shifts.get(c, 0.0) for c in range(len(row)))
                   for row in replay]
        hits += episode_delay([0.0] * len(scales), shifted, chart_set, scales, designs) is not None
    return hits / series


def detectable_effect(rows, chart_set, scales, designs, within, *, power=0.9, **replay):
    """The smallest lasting slowdown (relative) on ``chart_set`` caught within ``within`` nights with probability
    ``power`` (None: not even a 5x slowdown)."""
    lo, hi = 0.0, 4.0
    if detection_probability(rows, chart_set, scales, designs, hi, within, **replay) < power:
        return None
    for _ in range(12):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if detection_probability(rows, chart_set, scales, designs, mid, within, **replay) < power \
            else (lo, mid)
    return hi


# -- what a system's charts can do -------------------------------------------------------------------------------

def rows_of(baseline, nights):
    """``(chart keys, rows, scales)``: per night the z of every chart (None where excluded), what the replays read."""
    zs = baseline.z_scores(nights)
    keys = sorted(zs)
    return keys, [tuple(zs[key][i] for key in keys) for i in range(len(nights))], \
        [baseline.charts[key][1] for key in keys]


def describe(baseline, nights, designs, *, within=(1, 3, 10), **replay):
    """Per chart: its noise (robust and classical sd of the night values, log units), the nights excluded and why,
    and the detectable effect within each of ``within`` nights at its design (``designs``, in the order of
    :func:`rows_of`'s keys), from the replay of ``nights``."""
    keys, rows, scales = rows_of(baseline, nights)
    series = baseline.series(nights)
    out = []
    for c, key in enumerate(keys):
        values = [v.value for v in series[key] if v.value is not None]
        excluded = [v.excluded for v in series[key] if v.value is None]
        out.append({
            'case': key[0], 'band': key[1], 's0': scales[c], 'h': designs[c].h, 'z_big': designs[c].z_big,
            'sd': statistics.stdev(values) if len(values) > 2 else None,
            'nights': len(values), 'excluded': len(excluded), 'why': sorted(set(excluded))[:5],
            'mde': {str(d): detectable_effect(rows, [c], scales, designs, d, **replay) for d in within},
        })
    return out


def chart_states(rows, scales, designs):
    """Per night, every chart's CUSUM after that night, replaying ``rows`` in order; an alarm restarts every chart
    (the site fixed or accepted it). ``(states, alarm nights)``."""
    states, alarms, s = [], [], [0.0] * len(scales)
    for i, row in enumerate(rows):
        hit = False
        for c, s0 in enumerate(scales):
            s[c], alarmed = designs[c].step(s[c], row[c], s0)
            hit = hit or alarmed
        if hit:
            alarms.append(i)
            s = [0.0] * len(scales)
        states.append(tuple(s))
    return states, alarms


def episode_delay(state, injected, charts_of_case, scales, designs):
    """Nights until an alarm of the injected case's charts (``charts_of_case``: indexes) when the rows ``injected``
    follow a history whose chart state is ``state``; None when none alarms during the episode."""
    s = list(state)
    for i, row in enumerate(injected):
        for c in charts_of_case:
            s[c], alarmed = designs[c].step(s[c], row[c], scales[c])
            if alarmed:
                return i + 1
    return None


# -- the study of a ledger (scripts/detection_power.py --from-ledger, docs/verdict-protocol.md section 9) -----------

def _clean(night):
    return night.get('schedule', {}).get('kind') == 'clean'


def phase1_nights(nights, *, phase1=None, first=None):
    """Phase I: the ``phase1`` first clean tuning nights of the ledger ``nights`` measured alone (default all), from
    the night ``first`` on (default the first)."""
    tuning = [n for n in nights if n.get('phase') == 'tuning' and _clean(n) and ledger.measured_alone(n)]
    if first is not None:
        ids = [n['night'] for n in tuning]
        if first not in ids:
            raise ValueError(f'no clean tuning night {first!r} in the ledger')
        tuning = tuning[ids.index(first):]
    return tuning[:phase1] if phase1 else tuning


def freeze(phase1, *, rate=RATE, shift=0.10, seed=1, series=200, mean_block=None):
    """The frozen reference of a protocol (docs/verdict-protocol.md): the baseline of the ``phase1`` nights, each
    chart's design calibrated to ``rate`` and the replay's predicted rate, as one JSON document
    (:meth:`Baseline.to_json` plus ``rate``, ``predicted_rate``, ``replay``), read back by :func:`study`'s
    ``frozen``."""
    baseline = Baseline.fit(phase1)
    keys, rows, scales = rows_of(baseline, phase1)
    replay = dict(series=series, length=300, seed=seed,
                  mean_block=round(block_length(rows), 2) if mean_block is None else mean_block)
    designs = calibrate(rows, scales, rate=rate, shift=shift, **replay)
    doc = baseline.to_json(dict(zip(keys, designs)))
    doc.update(rate=rate, predicted_rate=predicted_rate(rows, scales, designs, rate=rate, **replay),
               replay=replay)
    return doc


def study(nights, *, phase1=None, first=None, frozen=None, rate=RATE, shift=0.10, within=(1, 2, 3, 10), seed=1,
          series=200, mean_block=None, otava=False):
    """Every figure of the verdict study from ledger ``nights``: Phase I (the ``phase1`` first clean tuning nights,
    default all, from the night ``first`` on, default the first), the calibrated design, per case and band its noise
    and detectable effects, the false alarms on the clean nights after Phase I (``held_out``), and per injected
    episode (schedule ``episode``, ``case``, ``level``) the nights until its case alarmed, spliced after a random
    point of the held-out clean history. ``frozen``: :func:`freeze`'s document instead (its Phase I, baseline, designs
    and prediction, as pre-registered). ``otava``: Otava's columns beside them (:func:`otava_false_alarms`,
    :func:`otava_delays`). A night not measured alone (:func:`ibrepro.ledger.measured_alone`) is left out of every
    figure and named in ``not_alone``."""
    not_alone = [n['night'] for n in nights if not ledger.measured_alone(n)]
    nights = [n for n in nights if ledger.measured_alone(n)]     # kept in the ledger, counted, never judged
    refitted = frozen is None   # fitted here the way a protocol freezes it: one path for both
    if refitted:
        frozen = freeze(phase1_nights(nights, phase1=phase1, first=first), rate=rate, shift=shift, seed=seed,
                        series=series, mean_block=mean_block)
    baseline, by_chart = Baseline.from_json(frozen)
    by_id = {n['night']: n for n in nights}
    missing = [x for x in baseline.nights if x not in by_id]
    if missing:
        raise ValueError(f'the frozen baseline names nights the ledger does not have: {", ".join(missing[:3])}')
    first = [by_id[x] for x in baseline.nights]
    keys, rows, scales = rows_of(baseline, first)
    if set(keys) != set(by_chart):
        raise ValueError('the frozen designs are not those of the charts its nights give')
    designs = [by_chart[key] for key in keys]
    rate, predicted = float(frozen['rate']), float(frozen['predicted_rate'])
    mean_block = float(frozen.get('replay', {}).get('mean_block', MEAN_BLOCK))
    chosen = {n['night'] for n in first}
    held_out = [n for n in nights if _clean(n) and n['night'] not in chosen
                and nights.index(n) > max(nights.index(m) for m in first)]
    replay = dict(series=2 * series, seed=seed, mean_block=mean_block)   # detection replays: episodes, not histories

    _, held_rows, _ = rows_of(baseline, held_out)
    states, alarms = chart_states(held_rows, scales, designs)
    low, high = stats.clopper_pearson(len(alarms), len(held_out))
    out = {'phase1': {'nights': len(first), 'first': first[0]['night'] if first else None,
                      'last': first[-1]['night'] if first else None},
           'mean_block': mean_block, 'frozen': not refitted,
           'replayed_false_alarm_rate': round(predicted, 5),
           'target_false_alarm_rate': rate, 'target_met': predicted <= rate,
           'false_alarms': {'clean_nights': len(held_out), 'alarms': len(alarms), 'upper95': high,
                            'predicted': round(predicted * len(held_out), 2),
                            'nights': [held_out[i]['night'] for i in alarms]},
           'not_alone': not_alone, 'cases': []}

    episodes = {}
    for n in nights:
        entry = n.get('schedule', {})
        if entry.get('kind') == 'injected' and entry.get('episode'):
            episodes.setdefault(entry['episode'], []).append(n)
    rng = random.Random(seed)
    charts_of = {}
    for c, key in enumerate(keys):
        charts_of.setdefault(key[0], []).append(c)
    series_of = baseline.series(first)
    for case, members in sorted(charts_of.items()):
        row = {'case': case, 'bands': [], 'levels': [],
               'mde': {str(d): detectable_effect(rows, members, scales, designs, d, **replay) for d in within}}
        for c in members:
            values = [v.value for v in series_of[keys[c]] if v.value is not None]
            row['bands'].append({
                'band': keys[c][1], 'noise_sd': scales[c], 'design': dataclasses.asdict(designs[c]),
                'classical_sd': statistics.stdev(values) if len(values) > 2 else None,
                'excluded': sum(v.value is None for v in series_of[keys[c]]),
                'mde': {str(d): detectable_effect(rows, [c], scales, designs, d, **replay) for d in within}})
        row['noise_sd'] = min(b['noise_sd'] for b in row['bands'])
        levels = {}
        for episode, injected in sorted(episodes.items()):
            entry = injected[0]['schedule']
            if str(entry.get('case', '')).replace(' ', '') != case.replace(' ', ''):   # a -n pattern or the name
                continue
            # an episode that slowed one band (its sizes only) is judged on that band's chart: its stated effect
            watched = [c for c in members if keys[c][1] == entry['band']] if entry.get('band') else members
            _, inj_rows, _ = rows_of(baseline, injected)
            point = rng.randrange(len(states)) if states else None
            state = states[point] if states else tuple([0.0] * len(scales))
            delay = episode_delay(state, inj_rows, watched, scales, designs)
            slot = levels.setdefault((entry.get('level'), entry.get('band')), {
                'level': entry.get('level'), **({'band': entry['band']} if entry.get('band') else {}),
                'episodes': 0, 'injected_ratio': entry.get('injected_ratio'), 'delays': [], 'spliced': []})
            slot['episodes'] += 1
            slot['watched'] = watched
            slot['delays'].append(delay)
            slot['spliced'].append((rows + held_rows[:0 if point is None else point + 1], inj_rows, watched))
        for slot in levels.values():
            slot['detected_within'] = {str(d): sum(1 for x in slot['delays'] if x is not None and x <= d)
                                       for d in within}
            ratio = slot.get('injected_ratio')
            if isinstance(ratio, (int, float)) and ratio > 0:     # what the replay predicts at the measured level
                watched = slot.pop('watched')
                slot['predicted_within'] = {str(d): detection_probability(rows, watched, scales, designs, ratio, d,
                                                                          **replay) for d in within}
            slot.pop('watched', None)
            spliced = slot.pop('spliced')
            if otava:
                slot['otava_delays'] = otava_delays(spliced)
                slot['otava_detected_within'] = {str(d): sum(1 for x in slot['otava_delays'] if x is not None
                                                             and x <= d) for d in within}
            row['levels'].append(slot)
        out['cases'].append(row)
    if otava:
        out['otava'] = otava_false_alarms(rows, held_rows)
    return out


def otava_false_alarms(history, held_rows, newest=3):
    """Otava's false alarms on held-out clean nights, as a site running it nightly would see them: after each
    held-out night, Otava on every chart's nights so far (``history`` then the held-out ones); an alarm when it
    puts a change point among the ``newest`` nights (a change it would report that night), counted once per night.
    ``{'clean_nights', 'alarms', 'upper95', 'nights'}`` (night indexes), or ``{'error': ...}``."""
    from . import changepoints
    charts_ = range(len(history[0]) if history else 0)
    prefixes = [history + held_rows[:j + 1] for j in range(len(held_rows))]
    try:
        found = changepoints.locate([[row[c] for row in prefix] for prefix in prefixes for c in charts_])
    except changepoints.OtavaError as err:
        return {'error': str(err)}
    alarms = []
    for j, prefix in enumerate(prefixes):
        mine = found[j * len(charts_):(j + 1) * len(charts_)]
        if any(isinstance(points, list) and any(p['index'] >= len(prefix) - newest for p in points)
               for points in mine):
            alarms.append(j)
    low, high = stats.clopper_pearson(len(alarms), len(held_rows))
    return {'clean_nights': len(held_rows), 'alarms': len(alarms), 'upper95': high, 'nights': alarms}


def otava_delays(spliced):
    """Per episode ``(history rows, injected rows, charts of its case)``: the injected nights until Otava, run on
    the history and the injected nights so far, puts a change point at the episode's first night (within one night)
    on a chart of the case; None when it never does during the episode."""
    from . import changepoints
    jobs, owners = [], []
    for e, (history, injected, members) in enumerate(spliced):
        for d in range(1, len(injected) + 1):
            for c in members:
                jobs.append([row[c] for row in history + injected[:d]])
                owners.append((e, d, len(history)))
    try:
        found = changepoints.locate(jobs) if jobs else []
    except changepoints.OtavaError:
        return [None] * len(spliced)
    delays = [None] * len(spliced)
    for (e, d, start), points in zip(owners, found):
        if isinstance(points, list) and any(abs(p['index'] - start) <= 1 and p['after'] > p['before']
                                            for p in points):
            delays[e] = d if delays[e] is None else min(delays[e], d)
    return delays


def paired_levels(*records):
    """What an injection really did, from paired level jobs of the same injection (``scripts/campaign.py
    --paired``: rounds alternating clean and injected, the injected ones even): per case and band the median over
    the pairs of all ``records`` of the band value of the injected round against its clean neighbour (``sign *
    log``, positive = slower), as a relative slowdown, and the case's level, the median over its bands.
    ``{case: {'bands': {band: level}, 'level': level, 'pairs': n}}``."""
    pairs_of, counted = {}, {}
    for record in records:
        if not ledger.measured_alone(record):
            continue
        for case, rec in record['cases'].items():
            if rec.get('result') != 'pass':
                continue
            rounds = max((len(v) for v in rec['values'].values()), default=0)
            counted[case] = counted.get(case, 0) + rounds // 2
            for band, names in chart_keys(case, rec['values']).items():
                pairs_of.setdefault(case, {}).setdefault(band, []).extend(_pair_values(rec, names, rounds))
    out = {}
    for case, per_band in pairs_of.items():
        bands_ = {band: math.expm1(statistics.median(v)) for band, v in per_band.items() if v}
        if bands_:
            out[case] = {'bands': bands_, 'level': statistics.median(bands_.values()), 'pairs': counted[case]}
    return out


def _pair_values(rec, names, rounds):
    """Per (clean, injected) pair of rounds of one paired job: the median over ``names`` of the injected round's
    signed log change from its clean neighbour."""
    per_pair = []
    for r in range(0, rounds - 1, 2):
        devs = []
        for name in names:
            xs = rec['values'][name]
            clean, slow = (xs[r], xs[r + 1]) if r + 1 < len(xs) else (None, None)
            if isinstance(clean, (int, float)) and isinstance(slow, (int, float)) and clean > 0 and slow > 0:
                devs.append(sign_of(variable_key(name)[0]) * (math.log(slow) - math.log(clean)))
        if devs:
            per_pair.append(statistics.median(devs))
    return per_pair
