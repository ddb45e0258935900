"""perftest (verbs-level latency and bandwidth) driven by ReFrame: flows of the pair runner
(:class:`~ibrepro.rfm.pair_runner.PairRunner`, whose docstring says how flows are placed on two nodes, two rails of
one node or loopback).

Concurrent flows (two ports at once, N pairs) measure *simultaneous* traffic, which is what the papers' two-port
and multi-pair results are: the flows of a case run in rounds, one message size per round, all clients start
together after a barrier and measure for the same time (perftest ``-D``); the runner pins every side to its own
CPU near its device and records where and when each flow ran (``flow_windows``), and the check fails when the
measurement windows did not overlap (``min_overlap``).

Partition extras read here besides the pair runner's (all optional): ``perftest_options`` (options every perftest
run on the partition needs); ``perftest_unusable_options`` (options its devices cannot take: dropped).
"""

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, variable
from reframe.core.exceptions import SanityError

from .. import parsers
from . import DEFAULT_TIME_LIMIT, Knobs, PaperExperiment, Placement, expand_sizes
from .pair_runner import PairRunner, zero_rates

#: Message sizes of concurrent flows when the check names none: powers of four from 4 B to 4 MiB (one round of
#: ``duration`` seconds each), which covers the papers' two-port and multi-pair figures.
CONCURRENT_SIZES = [4 ** i for i in range(1, 12)]


def aggregate(tables, source):
    """One table for concurrent flows: bandwidth and message rate summed, latency averaged, per size."""
    first = tables[0]
    rows = []
    for row in first.rows:
        size = row[first.size_key]
        merged = dict(row)
        for metric, key in first.metrics.items():
            values = []
            for table in tables:
                match = [r for r in table.rows if r[table.size_key] == size]
                if not match:
                    raise SanityError(f'{source}: flows disagree on message sizes ({size} B missing)')
                values.append(match[0][key])
            merged[key] = sum(values) / (len(values) if metric == 'lat' else 1)
        rows.append(merged)

    return parsers.Table(benchmark=first.benchmark, columns=first.columns, rows=rows,
                         params={**first.params, 'flows': len(tables)}, metrics=first.metrics,
                         size_key=first.size_key, notes=[f'aggregate of {len(tables)} concurrent flows'])


def starved(tables, flow_ids, emulated=False):
    """Concurrent flows: a flow that printed a rate of 0 at a size moved nothing while the others measured, and the
    sum is not simultaneous traffic: SanityError naming the flow and size on a real partition; on an emulated one
    (a starved window of emulated CPUs) the list of them, for the record."""
    found = zero_rates(tables, flow_ids)
    if found and not emulated:
        raise SanityError(f'concurrent flows: {"; ".join(found)}: a starved flow moved nothing while the others '
                          'measured, so their sum is not simultaneous traffic')
    return found


def overlap(windows):
    """Fraction of the union of ``windows`` ([start, end] pairs) during which all of them ran."""
    start, end = max(w[0] for w in windows), min(w[1] for w in windows)
    span = max(w[1] for w in windows) - min(w[0] for w in windows)
    return max(0.0, end - start) / span if span > 0 else 1.0


def perftest_margin(options, duration):
    """Seconds perftest's duration mode leaves out at each end of ``duration`` (``-f``; default D/4)."""
    for i, opt in enumerate(options):
        if opt in ('-f', '--margin') and i + 1 < len(options):
            return float(options[i + 1])
    return duration / 4


class PerftestFlows(rfm.RunOnlyRegressionTest, PairRunner, Placement, Knobs, PaperExperiment):
    """perftest flows run by the pair runner; subclasses say which flows (:meth:`flows`)."""

    tool = 'perftest'
    level = 'verbs'
    # a perftest built with CUDA (an environment with feature `cuda`) runs the GPUDirect family; host-memory cases
    # run once, with the partition's plain perftest
    valid_prog_environs = ['+perftest -cuda']
    time_limit = DEFAULT_TIME_LIMIT

    #: The perftest program (ib_send_lat, ib_write_lat, ib_read_lat, ib_atomic_lat, ib_write_bw, ...).
    test = variable(str)

    # The common knobs: ``message_sizes`` (empty: the whole sweep, perftest's ``-a`` (2 B .. 8 MiB) for one flow,
    # :data:`CONCURRENT_SIZES` for concurrent flows; else one round per size), ``iterations`` (``-n`` of one flow;
    # concurrent flows measure for ``duration`` seconds instead), ``window`` (``-t``, the bandwidth families).
    # perftest has no warm-up count (its bandwidth tests take ``--perform_warm_up``): ``warmup`` is refused.

    #: Deprecated (use ``message_sizes``): ``all_sizes=false`` measures only ``message_size``.
    all_sizes = variable(typ.Bool, value=True)

    #: Deprecated (use ``message_sizes``): the one size measured when ``all_sizes`` is off.
    message_size = variable(int, value=65536)

    #: Seconds each round of concurrent flows measures (perftest's duration mode ``-D``; perftest leaves a
    #: quarter of it out at each end, so the middle half is measured).
    duration = variable(int, value=4)

    #: The least fraction of their measurement windows concurrent flows must share; below it the flows did not
    #: run at the same time and their sum is not a bandwidth.
    min_overlap = variable(float, value=0.75)

    #: More perftest options, e.g. ``-R`` (rdma_cm) or ``-x 3`` (GID index).
    extra_options = variable(typ.List[str], value=[])

    #: Smallest overlap of the concurrent flows' measurement windows over the rounds (set after the run).
    flow_overlap = variable(float, type(None), value=None, loggable=True)

    # -- what runs --------------------------------------------------------------------------------------

    def program_name(self):
        return self.test

    def options(self):
        """The perftest options common to every flow."""
        opts = ['-F']                       # the CPU-frequency check fails spuriously on VMs and laptops
        if self.concurrent:
            opts += ['-D', str(self.duration)]
        elif not self.round_sizes:
            opts += ['-a']
        if self.iterations is not None and not self.concurrent:
            opts += ['-n', str(self.iterations)]
        # what the partition's devices need on every run (e.g. a longer QP timeout for emulated RoCE),
        # and what they cannot take (e.g. --perform_warm_up, which hangs perftest 4.5 over rxe)
        extras = self.current_partition.extras
        unusable = set(extras.get('perftest_unusable_options', []))
        opts += list(extras.get('perftest_options', [])) + list(self.extra_options)
        return [opt for opt in opts if opt not in unusable]

    @property
    def concurrent(self):
        return len(self.flow_ids) > 1

    @run_after('setup')
    def refuse_a_warmup_count(self):
        if self.warmup is not None:
            raise ValueError('perftest takes no warm-up count (its bandwidth tests warm up with --perform_warm_up): '
                             'warmup cannot be set for the perftest families')

    @property
    def round_sizes(self):
        """Message sizes of the rounds; [] for one round sweeping with ``-a``."""
        text = self.message_sizes or ('' if self.deprecated('all_sizes', 'message_sizes', self.all_sizes, True)
                                      is None else str(self.message_size))
        if text:
            return expand_sizes(text)
        return list(CONCURRENT_SIZES) if self.concurrent else []

    def spec_options(self):
        return {'options': self.options(), 'sizes': self.round_sizes or None}

    # -- what came out ----------------------------------------------------------------------------------

    def combine_flows(self, tables, emulated):
        """Concurrent flows: one table of their sum (a starved flow fails a real partition); one flow: its own."""
        if not self.concurrent:
            return super().combine_flows(tables, emulated)
        self.starved_flows = starved(tables, self.flow_ids, emulated)
        return aggregate(tables, self.name)

    def check_rounds(self):
        """Concurrent flows: each round's measurement windows must overlap; record the smallest overlap."""
        if not self.concurrent:
            return
        margin = perftest_margin(self.options(), self.duration)
        worst = None
        for size in self.round_sizes:
            clients = [w for w in self.flow_windows if w['side'] == 'client' and w['size'] == size
                       and w['start'] and w['end']]
            if len(clients) < len(self.flow_ids):
                raise SanityError(f'concurrent flows at {size} B: only {len(clients)} of {len(self.flow_ids)} '
                                  'clients recorded their run')
            # perftest -D measures from `margin` after its traffic starts until `margin` before it stops
            measured = [[w['end'] - self.duration + margin, w['end'] - margin] for w in clients]
            share = overlap(measured)
            worst = share if worst is None else min(worst, share)
            if share < self.min_overlap:
                spans = '; '.join(f'flow {w["flow"]} on {w["host"]} {w["start"]:.2f}-{w["end"]:.2f}'
                                  for w in clients)
                raise SanityError(f'concurrent flows at {size} B overlapped {share:.0%} of their measurement '
                                  f'windows (at least {self.min_overlap:.0%} needed): {spans}; their sum is not '
                                  'simultaneous traffic')
        self.flow_overlap = round(worst, 3)
