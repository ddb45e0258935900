"""The knobs every family takes under the same name (README: the knobs every family takes), in one home.

``-S message_sizes=1:64K -S iterations=100 -S warmup=10``: each family maps them to its tool's options and says in
its docstring what its tool cannot take. ``window`` (messages in flight, the papers' W) is the fourth common name:
a variable of the bandwidth families where it is a knob, a parameter where the papers sweep it (OSUBandwidth
%window=16). ``repetitions`` is the repetition plugin's (:mod:`ibrepro.rfm.repeat`).
"""

import re

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import variable

_SIZE = re.compile(r'(\d+)([KMG]?)', re.I)


def size_bytes(text):
    """'64K' -> 65536 (K, M, G are powers of 2^10, as the papers' axes)."""
    m = _SIZE.fullmatch(str(text).strip())
    if not m:
        raise ValueError(f'invalid message size {text!r}: expected bytes, optionally with K, M or G (64K)')
    return int(m.group(1)) << {'': 0, 'K': 10, 'M': 20, 'G': 30}[m.group(2).upper()]


def powers_of_two(lo, hi):
    """The powers of two from ``lo`` to ``hi`` bytes (the rows of a size sweep)."""
    sizes, size = [], 1
    while size <= hi:
        if size >= lo:
            sizes.append(size)
        size *= 2
    return sizes


def expand_sizes(text):
    """Message sizes from ``MIN:MAX`` (powers of two from MIN to MAX), ``N`` or ``N1,N2,...``: a sorted list."""
    text = str(text).strip()
    if ':' in text:
        lo, _, hi = text.partition(':')
        lo, hi = size_bytes(lo or 1), size_bytes(hi)
        if lo > hi:
            raise ValueError(f'invalid message sizes {text!r}: {lo} > {hi}')
        return ([0] if lo == 0 else []) + powers_of_two(lo, hi)
    return sorted({size_bytes(part) for part in text.split(',') if part.strip()})


class Knobs(rfm.RegressionTestPlugin):
    """Plugin: the common knobs, and the message sizes the output must then contain."""

    #: Message sizes: empty for the tool's full sweep (which covers the papers' figures), else ``MIN:MAX`` (the
    #: powers of two between, ``K``/``M``/``G`` = 2^10/2^20/2^30) or ``N1,N2,...``.
    message_sizes = variable(str, value='')

    #: Timed iterations per message size; None: the family's default (the papers' count where they state one,
    #: else the tool's).
    iterations = variable(int, type(None), value=None)

    #: Warm-up iterations per message size; None: the tool's default.
    warmup = variable(int, type(None), value=None)

    #: Message sizes the output must contain; an output missing one fails as an incomplete sweep.
    expected_sizes = variable(typ.List[int], value=[])

    def unmeasured_sizes(self, table):
        """The expected sizes ``table`` lacks, sorted."""
        return sorted(set(self.expected_sizes) - set(table.sizes()))

    def deprecated(self, old, new, value, default):
        """The value of a renamed knob: ``new`` unless only the old name ``old`` was set (with a warning)."""
        if value == default:
            return None
        from reframe.core.logging import getlogger
        getlogger().warning(f'{self.name}: {old!r} is deprecated and goes in the next release: use {new!r}')
        return value
