"""Robust statistics for references and regression detection (no normality assumed).

Regression detection over a history of sessions (:func:`history_tests`)
=========================================================================

One performance variable gives one value per run (the median of its values in the run: reruns, or the sessions
of one nightly run). The newest ``confirm`` runs are *tested* against a *baseline*: the ``window`` runs before
them.

* Scale: performance noise is multiplicative and right-skewed (a busy node makes latency longer, never shorter), so
  the test works on ``log(value)``: a shift there is a relative change, and the skew mostly goes away.
* Baseline: the baseline logs without gross outliers (farther than 5 robust sigmas, 1.4826 * MAD, from their
  median, at most a tenth of them: one odd night moves nothing, a recurring state of the machine stays in),
  their mean ``c`` and standard deviation ``s``.
  ``s`` has a floor: ``min_cv`` (the smallest noise we believe in) and the printing resolution of the values (IMB
  prints 2 decimals: 0.20 us cannot move by less than 0.01 us, 5 %).
* Statistic: the prediction-interval t, ``t = (median of tested logs - c) / (s * sqrt(v_k + 1 / n))``, with ``n``
  baseline values kept and ``v_k`` the variance factor of the median of the ``k`` tested values (1 for one).
* p-value: Student t with ``n - 1`` degrees of freedom (exact for normal log-noise; tests/test_stats.py measures
  the false-alarm rate). One-sided in the worse direction of the metric (``lat``/``time`` higher,
  ``bw``/``msgrate``/``mops`` lower: :data:`ibrepro.parsers.METRIC_BETTER`), two-sided for variables without
  one. (A MAD scale instead of the screened standard deviation is more robust still but, at 37 % efficiency,
  detects a 20 % shift in 5 % noise in 79 % of single nights instead of 88 %, out of at most 90 % for a known
  noise level: one night's single value cannot do better at a 1 % false-alarm rate.)
* Many variables: hundreds of variables per session are tested at once, so the alarm controls the false discovery
  rate with Benjamini-Hochberg at ``alpha`` (valid for independent or positively dependent tests, which one-sided
  tests of message sizes of one benchmark are). A variable is flagged when its BH-adjusted p (q) is <= ``alpha``
  AND its relative change is at least ``min_effect`` (a statistically clear 1 % drift is not worth a night's alarm).
* Per test case, the alarm: a slowdown moves most message sizes of a benchmark together, while on a shared
  machine single sizes of single sessions jump by 10x and more when a rank is preempted (measured here: with
  other jobs running, 7 of 10 unperturbed sessions had at least one such size). Each test case (check,
  environment, parameters) therefore gets a *session index*: the median over its directed variables of the log
  deviation from each variable's baseline (positive = worse). The index of every baseline session gives its own
  noise (which includes the sessions' shared ups and downs), and the same test (BH across test cases) says
  whether the case as a whole regressed. That is the alarm (:attr:`HistoryResult.alarms`, ``ibrepro report
  --nightly``); it also finds a 15 % slowdown of all sizes that no single size shows. The variables' own
  verdicts say which sizes moved; they raise the alarm only for variables without a direction (counts such as
  RDMA ports: any change is news), and for a test case of one variable its index is that variable.

The reported ``change`` is ``exp(shift) - 1``; its interval is the 95 % interval of the same t distribution.
"""

import functools
import math
import statistics
from typing import Optional

from .compat import comb, dataclasses, fmean

#: Scale factor making the MAD a consistent estimator of the standard deviation for normal data.
MAD_TO_SIGMA = 1.4826

#: Baseline values farther than this many robust sigmas from the median are left out (gross outliers).
OUTLIER_SIGMAS = 5.0
#: ... but never more than this share of the baseline.
MAX_OUTLIER_SHARE = 0.1


def median(values):
    return statistics.median(values)


def mad(values):
    """Median absolute deviation from the median."""
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def robust_cv(values):
    """Robust coefficient of variation: 1.4826 * MAD / |median| (0 for fewer than 2 values)."""
    if len(values) < 2:
        return 0.0

    m = statistics.median(values)
    return MAD_TO_SIGMA * mad(values) / abs(m) if m else 0.0


# -- distributions --------------------------------------------------------------------------------

def t_sf(t, df):
    """P(T > t) for Student's t with integer ``df`` >= 1 (exact: Abramowitz & Stegun 26.7.3/26.7.4)."""
    df = int(df)
    if df < 1:
        raise ValueError(f'degrees of freedom must be >= 1, not {df}')
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0

    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:   # odd: A = 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term = total = math.cos(theta) if df > 1 else 0.0
        for j in range(3, df, 2):
            term *= c2 * (j - 1) / j
            total += term
        inside = 2 / math.pi * (theta + math.sin(theta) * total)
    else:        # even: A = sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term = total = 1.0
        for j in range(2, df - 1, 2):
            term *= c2 * (j - 1) / j
            total += term
        inside = math.sin(theta) * total
    inside = min(1.0, max(0.0, inside))   # P(|T| <= |t|)
    return (1 - inside) / 2 if t >= 0 else (1 + inside) / 2


@functools.lru_cache(maxsize=None)
def t_quantile(p, df):
    """The t with P(T <= t) = p (bisection on :func:`t_sf`)."""
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if 1 - t_sf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def benjamini_hochberg(pvalues):
    """Benjamini-Hochberg adjusted p-values (q-values), in the order given; None stays None."""
    indexed = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(indexed)
    adjusted = [None] * len(pvalues)
    running = 1.0
    for rank in range(m, 0, -1):
        p, i = indexed[rank - 1]
        running = min(running, p * m / rank)
        adjusted[i] = running
    return adjusted


# -- the shift test ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Method:
    """Parameters of the history test (``ibrepro report --help`` lists them with these defaults)."""

    window: int = 30          # baseline: this many sessions before the tested ones
    confirm: int = 1          # tested: the newest this many sessions, together (their median)
    alpha: float = 0.01       # false discovery rate of the alarm (Benjamini-Hochberg)
    min_effect: float = 0.05  # smallest relative change that is flagged
    min_history: int = 8      # fewer baseline sessions: not tested
    min_cv: float = 0.005     # floor of the noise scale (relative)

    def __post_init__(self):
        if self.window < 2 or self.confirm < 1 or self.min_history < 2:
            raise ValueError('window and min-history must be >= 2, confirm >= 1')
        if not 0 < self.alpha < 1 or self.min_effect < 0 or self.min_cv < 0:
            raise ValueError('alpha must be in (0, 1); min-effect and min-cv must be >= 0')


@dataclasses.dataclass
class Shift:
    """The history test of one series (a variable, or a test case's session index)."""

    verdict: str                   # regression, improvement, change, ok, or untested
    better: Optional[str]             # 'lower', 'higher', or None (two-sided)
    n: int                         # baseline sessions
    baseline: Optional[float] = None  # baseline median (the variable's unit; log units for an index)
    current: Optional[float] = None   # median of the tested sessions
    change: Optional[float] = None    # relative change, current / baseline - 1
    low: Optional[float] = None       # 95 % interval of the relative change
    high: Optional[float] = None
    noise: Optional[float] = None     # noise scale used (relative, ~ robust CV)
    t: Optional[float] = None         # the statistic, positive = worse
    df: Optional[int] = None
    p: Optional[float] = None         # p-value in the worse direction (two-sided without direction)
    p_better: Optional[float] = None  # p-value in the better direction
    q: Optional[float] = None         # Benjamini-Hochberg adjusted p (regressions / changes)
    q_better: Optional[float] = None
    reason: str = ''               # why untested

    @property
    def worse(self):
        """The relative change in the worse direction (positive = worse), or None."""
        if self.change is None:
            return None
        return -self.change if self.better == 'higher' else self.change

    @property
    def alarm(self):
        return self.verdict in ('regression', 'change')


def resolution(values):
    """The printing step of the values: 10^-d for the most decimals any of them shows (at most 6)."""
    decimals = 0
    for v in values:
        text = repr(float(v))
        if 'e' in text:
            return 1e-6
        decimals = max(decimals, len(text.split('.')[1].rstrip('0')))
    return 10.0 ** -min(decimals, 6)


def _median_var(k):
    """Variance of the median of k values relative to one value's (normal data; the mean for k <= 2)."""
    return 1.0 / k if k <= 2 else math.pi / (2 * k)


def screened(values):
    """The values without gross outliers: farther than OUTLIER_SIGMAS robust sigmas from their median, and at
    most MAX_OUTLIER_SHARE of them (a tenth of the nights far away is not a gross error but a state the machine
    is sometimes in, e.g. shared with other jobs: the baseline must keep it)."""
    center = statistics.median(values)
    spread = MAD_TO_SIGMA * mad(values)
    far = sorted((abs(v - center), i) for i, v in enumerate(values) if abs(v - center) > OUTLIER_SIGMAS * spread)
    drop = {i for _, i in far[::-1][:int(MAX_OUTLIER_SHARE * len(values))]}
    return [v for i, v in enumerate(values) if i not in drop]


def shift_log(history, tested, better, *, method=Method(), floor=0.0):
    """The test on log-scale values (see the module doc); ``floor`` is an extra scale floor (log units)."""
    if len(history) < method.min_history or not tested:
        return Shift('untested', better, len(history),
                     reason=f'{len(history)} baseline session(s), {method.min_history} needed')

    kept = screened(history)
    n = len(kept)
    center = fmean(kept)
    sd = math.sqrt(sum((v - center) ** 2 for v in kept) / (n - 1))   # statistics.stdev is exact but slow
    scale = max(sd, method.min_cv, floor)
    se = scale * math.sqrt(_median_var(len(tested)) + 1 / n)
    shift = statistics.median(tested) - center
    df = n - 1
    t = shift / se * (-1 if better == 'higher' else 1)
    if better is None:
        p = min(1.0, 2 * t_sf(abs(t), df))
        p_better = None
    else:
        p, p_better = t_sf(t, df), t_sf(-t, df)
    half = t_quantile(0.975, df) * se
    return Shift('ok', better, n, baseline=center, current=center + shift, change=math.expm1(shift),
                 low=math.expm1(shift - half), high=math.expm1(shift + half), noise=scale, t=t, df=df,
                 p=p, p_better=p_better)


def shift_test(history, tested, better, *, method=Method()):
    """The test of one variable: ``history`` and ``tested`` are its values (positive; zeros are censored)."""
    values = list(history) + list(tested)
    if not values or statistics.median(values) <= 0:
        return Shift('untested', better, len(history), reason='printed as zero')

    step = resolution(values)
    center = statistics.median(history) if history else None
    logs = [math.log(max(v, step / 2)) for v in values]   # a value printed as 0 is below half a step
    result = shift_log(logs[:len(history)], logs[len(history):], better, method=method,
                       floor=step / center if center else 0.0)
    if result.baseline is not None:
        result.baseline, result.current = math.exp(result.baseline), math.exp(result.current)
    return result


def _judge(shifts, method):
    """BH across the shifts, then the verdicts (in place)."""
    tested = [s for s in shifts if s.verdict != 'untested']
    for s, q in zip(tested, benjamini_hochberg([s.p for s in tested])):
        s.q = q
    directed = [s for s in tested if s.better]
    for s, q in zip(directed, benjamini_hochberg([s.p_better for s in directed])):
        s.q_better = q
    for s in tested:
        big = abs(s.change) >= method.min_effect
        if s.q <= method.alpha and big and (s.better is None or s.worse > 0):
            s.verdict = 'regression' if s.better else 'change'
        elif s.q_better is not None and s.q_better <= method.alpha and big and s.worse < 0:
            s.verdict = 'improvement'


@dataclasses.dataclass
class HistoryResult:
    variables: dict          # key -> Shift
    groups: dict             # group -> Shift (the session index of a test case)
    group_index: dict        # group -> [index per session, None where missing] (the trend of the index)
    method: Method
    members: dict = dataclasses.field(default_factory=dict)   # group -> keys of its directed variables

    @property
    def alarms(self):
        """(variables without a direction that changed, test cases that regressed): what raises the alarm."""
        return ([k for k, s in self.variables.items() if s.verdict == 'change'],
                [g for g, s in self.groups.items() if s.alarm])


def history_tests(series, method=Method()):
    """Test every series of a history.

    ``series`` maps a key to ``(values, better, group)``: ``values`` one per session, oldest first, aligned across
    series (None where the session has no value), ``better`` 'lower' / 'higher' / None, ``group`` the test case it
    belongs to (or None). The last ``method.confirm`` sessions are tested against up to ``method.window`` before.
    """
    k = method.confirm
    variables, members = {}, {}
    for key, (values, better, group) in series.items():
        tested = [v for v in values[-k:] if v is not None]
        history = [v for v in values[:-k][-method.window:] if v is not None]
        variables[key] = shift_test(history, tested, better, method=method)
        if group is not None and better and variables[key].verdict != 'untested':
            members.setdefault(group, []).append((values, better, variables[key], key))
    _judge(list(variables.values()), method)

    groups, index = {}, {}
    for group, items in members.items():
        index[group] = _session_index(items, method)
        sessions = index[group]
        history = [x for x in sessions[:-k][-method.window:] if x is not None]
        tested = [x for x in sessions[-k:] if x is not None]
        groups[group] = shift_log(history, tested, 'lower', method=method)
    _judge(list(groups.values()), method)
    return HistoryResult(variables, groups, index, method,
                         {group: [item[3] for item in items] for group, items in members.items()})


def confirmation_test(result, group, values, *, alpha):
    """The test of a re-run of one test case (the confirmation of a night's suspect, ``ibrepro nightly``) against
    the same baseline as the night: ``values`` maps the group's variable keys to their re-run values. Its index is
    the median over the group's variables of the log deviation from their baselines, tested like the night's index;
    it confirms when p <= ``alpha`` (one test of one pre-selected case: no multiplicity to correct) and the change
    is at least ``min_effect``. None when the re-run has none of the group's variables."""
    method = result.method
    devs = []
    for key in result.members.get(group, ()):
        shift, value = result.variables[key], values.get(key)
        if value is not None and value > 0 and shift.baseline:
            sign = -1 if shift.better == 'higher' else 1
            devs.append(sign * (math.log(value) - math.log(shift.baseline)))
    if not devs:
        return None
    sessions = result.group_index.get(group) or []
    history = [x for x in sessions[:-method.confirm][-method.window:] if x is not None]
    shift = shift_log(history, [statistics.median(devs)], 'lower', method=method)
    if shift.verdict != 'untested':
        shift.q = shift.p
        if shift.p <= alpha and shift.change >= method.min_effect:
            shift.verdict = 'regression'
    return shift


def _session_index(items, method):
    """Per session: median over the group's variables of the log deviation from their baselines, worse > 0."""
    length = len(items[0][0])
    per_session = [[] for _ in range(length)]
    for values, better, shift, _ in items:
        center = math.log(shift.baseline)
        sign = -1 if better == 'higher' else 1
        for j, v in enumerate(values):
            if v is not None and v > 0:
                per_session[j].append(sign * (math.log(v) - center))
    return [statistics.median(devs) if devs else None for devs in per_session]


# -- rates ----------------------------------------------------------------------------------------------

def _binomial_pmf(i, n, p):
    return comb(n, i) * p ** i * (1 - p) ** (n - i)


def _binomial_cdf(k, n, p):
    return sum(_binomial_pmf(i, n, p) for i in range(k + 1))


def binomial_sf(k, n, p):
    """P(at least ``k`` of ``n`` independent events of probability ``p``), summed over the upper tail (exact for
    the tiny ``p`` of a fault's flows)."""
    return min(1.0, sum(_binomial_pmf(i, n, p) for i in range(max(k, 0), n + 1)))


def clopper_pearson(count, trials, confidence=0.95):
    """The two-sided Clopper-Pearson interval ``(low, high)`` of a rate of ``count`` in ``trials`` (exact binomial;
    ``(None, None)`` without trials). With no events the upper end is 1 - ((1 - c) / 2)^(1/n)."""
    if not trials:
        return None, None
    tail = (1 - confidence) / 2

    def solve(target, k):   # the p at which P(X <= k; p) = target (decreasing in p)
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _binomial_cdf(k, trials, mid) > target else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if count == 0 else solve(1 - tail, count - 1)
    high = 1.0 if count == trials else solve(tail, count)
    return low, high
