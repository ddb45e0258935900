"""What the modules a compute node runs take from Pythons newer than 3.6, in one home.

The modules of :data:`ibrepro.fleet.rounds.NODE_MODULES` run under the node's own Python, 3.6 at the oldest (EL8's
platform Python; EL9's is 3.9), and read as today's Python with these. tests/test_compat.py holds them to 3.6
(vermin, and a real run under 3.6 and 3.9 where pyenv has them)."""

import math

try:
    import dataclasses  # novm  (3.7; below, the backport)
except ImportError:     # Python 3.6: PyPI's backport by the module's author, shipped unchanged (ibrepro._vendor)
    from ._vendor import dataclasses  # noqa: F401


def fmean(values):
    """:func:`statistics.fmean` (3.8): the floating-point mean, ``fsum / n``; StatisticsError-like ValueError when
    empty."""
    values = list(values)
    if not values:
        raise ValueError('fmean requires at least one data point')
    return math.fsum(values) / len(values)


def comb(n, k):
    """:func:`math.comb` (3.8) for integers ``0 <= k``: n choose k, 0 when k > n."""
    if k > n:
        return 0
    return math.factorial(n) // (math.factorial(k) * math.factorial(n - k))


def removeprefix(text, prefix):
    """:meth:`str.removeprefix` (3.9)."""
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def removesuffix(text, suffix):
    """:meth:`str.removesuffix` (3.9)."""
    return text[:-len(suffix)] if suffix and text.endswith(suffix) else text
