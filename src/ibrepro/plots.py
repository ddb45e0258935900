"""The report's figures, drawn with matplotlib (Agg, no display) and embedded as PNG data URIs.

PNG rather than SVG: the page stays one self-contained file, and no string from a run ends up inside markup
(matplotlib's SVG writes text into XML comments).
"""

import base64
import functools
import io
import math
import os

#: One colour per seed paper, so a paper keeps its colour in every figure.
SEED_COLOURS = {'000': '#1f77b4', '001': '#2ca02c', '002': '#d62728', '003': '#9467bd', '004': '#ff7f0e'}
#: Markers of the papers' values per seed.
SEED_MARKERS = {'000': 'o', '001': 's', '002': 'D', '003': '^', '004': 'v'}
MEASURED_COLOURS = ['#111111', '#8c564b', '#17becf', '#7f7f7f', '#bcbd22', '#e377c2']


def plain(text, width=160):
    """A string from a run as matplotlib text: '$' would start mathtext (a parse error for a stray one), so it is
    escaped; one line, at most ``width`` characters."""
    text = ' '.join(str(text).split())
    text = text if len(text) <= width else text[:width - 1] + '~'
    return text.replace('$', r'\$')   # no unescaped '$' left: never mathtext


@functools.lru_cache(maxsize=None)
def _pyplot():
    """matplotlib's pyplot on the Agg backend, imported on the first figure: a second of start-up that every
    ibrepro command importing the report would pay otherwise."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    return plt


class Drawing:
    """A figure to draw later, with the report's others (:func:`draw_all`): ``plots.<kind>(*args)``."""

    def __init__(self, kind, *args):
        self.kind, self.args = kind, args

    def draw(self):
        return globals()[self.kind](*self.args)


def later(kind, *args):
    """The :class:`Drawing` of ``plots.<kind>(*args)`` (``paper_figure``, ``trend``)."""
    if kind not in ('paper_figure', 'trend', 'gpu_links'):
        raise ValueError(f'no figure {kind!r}')
    return Drawing(kind, *args)


def _draw(drawing):
    return drawing.draw()


def draw_all(model):
    """Draw every :class:`Drawing` in ``model`` (dicts and lists) in place, as its PNG data URI: on as many of
    this process's CPUs as there are figures (a report has tens of figures, each a tenth of a second of Agg
    rendering: most of a report's time), forked after matplotlib was imported, in this process when one CPU, one
    figure or another thread; the same images either way."""
    found = []

    def walk(node):
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, Drawing):
                found.append((node, key, value))
            else:
                walk(value)
    walk(model)
    import threading
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else 1
    # forked only from a process of one thread: a lock another thread held would stay locked in the child
    workers = min(cpus, len(found)) if threading.active_count() == 1 else 1
    images = None
    if workers > 1:
        import concurrent.futures
        import multiprocessing
        _pyplot()           # imported once, here: the workers inherit it
        try:
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context('fork')) \
                    as pool:
                images = list(pool.map(_draw, [d for _, _, d in found]))
        except (OSError, concurrent.futures.process.BrokenProcessPool) as err:
            import sys      # no process to spare (a limit on processes): drawn here
            print(f'ibrepro: cannot start {workers} figure workers ({err}): drawing one by one', file=sys.stderr)
    if images is None:
        images = [d.draw() for _, _, d in found]
    for (node, key, _), image in zip(found, images):
        node[key] = image
    return model


def data_uri(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=80)   # fixed layout: bbox_inches='tight' would draw everything twice
    _pyplot().close(fig)
    return 'data:image/png;base64,' + base64.b64encode(buf.getvalue()).decode('ascii')


def _size_label(size, _pos=None):
    for unit, factor in (('M', 2 ** 20), ('K', 2 ** 10)):
        if size >= factor:
            return f'{size / factor:g}{unit}'
    return f'{size:g}'


def paper_figure(title, ylabel, curves, papers, limit_now=None, limit_note=None):
    """Measured curves on the papers' axes (message size, log2) with the papers' stated values.

    ``curves``: [(label, {size: value})]; ``papers``: [(seed, label, size or None, value)] where a None size
    is a horizontal line (a peak or a large-message value); ``limit_now``: MB/s of this system's links or None
    with ``limit_note`` saying why. (The limits of the papers' testbeds are in the headline table.)
    """
    from matplotlib import ticker

    fig, ax = _pyplot().subplots(figsize=(7.3, 4.4))
    fig.subplots_adjust(left=0.1, right=0.98, top=0.88, bottom=0.12)
    sizes = sorted({s for _, points in curves for s in points if s > 0})
    for i, (label, points) in enumerate(curves):
        xs = [s for s in points if s > 0]
        ax.plot(xs, [points[s] for s in xs], marker='.', color=MEASURED_COLOURS[i % len(MEASURED_COLOURS)],
                label=plain(f'this system: {label}'))
    for seed, label, size, value in papers:
        colour = SEED_COLOURS.get(seed, 'grey')
        if size:
            ax.plot([size], [value], linestyle='none', marker=SEED_MARKERS.get(seed, 'o'), markersize=9,
                    color=colour, markeredgecolor='black', label=plain(f'{seed}: {label}'))
        else:
            ax.axhline(value, color=colour, linestyle='--', linewidth=1.2, label=plain(f'{seed}: {label}'))
    if limit_now:
        ax.axhline(limit_now, color='black', linestyle='-.', linewidth=1.5,
                   label=f'link limit here: {limit_now:,.0f} MB/s')
    if limit_note:
        ax.text(0.99, 0.02, plain(limit_note), transform=ax.transAxes, ha='right', va='bottom', fontsize=8,
                color='dimgrey')
    if sizes:
        ax.set_xscale('log', base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(_size_label))
    shown = [v for _, p in curves for s, v in p.items() if s > 0]
    if ylabel.endswith('(us)') and shown and min(shown) > 0 and max(shown) / min(shown) > 20:   # > a decade
        ax.set_yscale('log')
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: f'{v:g}'))   # plain text: no mathtext parsing
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel('message size (bytes)')
    ax.set_ylabel(plain(ylabel))
    ax.set_title('\n'.join(plain(line) for line in title.split('\n')), fontsize=10, y=1, pad=6)
    ax.grid(True, which='major', alpha=0.3)
    ax.legend(fontsize=7, loc='upper left', framealpha=0.8)
    return data_uri(fig)


def trend(title, unit, dates, values, tested, band=None, reference=None):
    """One series over sessions: ``values`` aligned with ``dates`` (None = missing), the last ``tested`` points
    highlighted, ``band`` (low, high) of the baseline, ``reference`` (value, low, high) of ReFrame."""
    fig, ax = _pyplot().subplots(figsize=(6.0, 2.8))
    fig.subplots_adjust(left=0.12, right=0.98, top=0.88, bottom=0.22)
    x = range(len(values))   # session order (sessions are not evenly spaced in time)
    points = [(i, v) for i, v in zip(x, values) if v is not None]
    if points:
        ax.plot([i for i, _ in points], [v for _, v in points], marker='.', color='#1f77b4', linewidth=1)
    last = [(i, v) for i, v in zip(x[-tested:], values[-tested:]) if v is not None]
    if last:
        ax.plot([i for i, _ in last], [v for _, v in last], linestyle='none', marker='o', markersize=8,
                color='#d62728', label='tested')
    if band:
        ax.axhspan(band[0], band[1], color='#2ca02c', alpha=0.15, label='baseline +/- 2 sigma')
    if reference and reference[0] is not None:
        value, low, high = reference
        ax.axhline(value, color='black', linestyle='--', linewidth=1, label='ReFrame reference')
        for bound in (low, high):
            if bound is not None and not math.isinf(bound):
                ax.axhline(bound, color='black', linestyle=':', linewidth=1)
    ticks = sorted({0, len(values) - 1, *range(0, len(values), max(1, len(values) // 5))})
    ax.set_xticks(ticks, [dates[i].strftime('%m-%d %H:%M') for i in ticks], fontsize=7)
    ax.set_xlabel('session (start, UTC)', fontsize=8)
    ax.set_ylabel(plain(unit))
    ax.set_title(plain(title), fontsize=9, y=1, pad=6)
    ax.grid(True, alpha=0.3)
    if last or band or reference:
        ax.legend(fontsize=7, loc='upper left', framealpha=0.8)
    return data_uri(fig)


def gpu_links(node, rows):
    """One node's GPUs: each copy's GB/s (bars, one colour per copy) beside the data rate per direction of the link
    that limits it (a line over the GPU's bars; none where sysfs gives no link state). ``rows``: the page's GPU
    rows of that node (:func:`ibrepro.report.provenance.collect`)."""
    plt = _pyplot()
    gpus = sorted({r['gpu'] for r in rows}, key=lambda g: (len(g), g))
    copies = sorted({r['case'] for r in rows})
    fig, ax = plt.subplots(figsize=(6.0, 2.8))
    fig.subplots_adjust(left=0.12, right=0.98, top=0.86, bottom=0.2)
    width = 0.8 / max(1, len(copies))
    for k, copy in enumerate(copies):
        xs = [i + (k - (len(copies) - 1) / 2) * width for i, g in enumerate(gpus)
              for r in rows if r['gpu'] == g and r['case'] == copy and r['value_GBps'] is not None]
        ys = [r['value_GBps'] for g in gpus for r in rows
              if r['gpu'] == g and r['case'] == copy and r['value_GBps'] is not None]
        ax.bar(xs, ys, width=width * 0.95, color=MEASURED_COLOURS[k % len(MEASURED_COLOURS)],
               label=plain(copy.split('%copy=')[-1], 40))
    for i, g in enumerate(gpus):
        limits = {r['limit_GBps'] for r in rows if r['gpu'] == g and r['limit_GBps'] is not None}
        if limits:
            limit = min(limits)
            ax.hlines(limit, i - 0.45, i + 0.45, colors='#d62728', linestyles='--', linewidth=1.2)
            ax.annotate(f'{limit:.1f}', (i + 0.45, limit), fontsize=7, color='#d62728', ha='right', va='bottom')
    ax.set_xticks(range(len(gpus)), [plain(g, 20) for g in gpus], fontsize=8)
    ax.set_ylabel('GB/s (10^9 B/s)')
    ax.set_ylim(0, max([r['limit_GBps'] or 0 for r in rows] + [r['value_GBps'] or 0 for r in rows] + [1]) * 1.35)
    ax.set_title(plain(f'{node}: host-device copies beside the PCIe link limit (dashed)'), fontsize=9, y=1, pad=6)
    ax.grid(True, axis='y', alpha=0.3)
    ax.legend(fontsize=7, loc='upper right', ncol=max(1, len(copies)), framealpha=0.8)
    return data_uri(fig)
