"""Size ranges ("bands") the nightly verdict charts, and the night a family runs for them: one home.

A regression rarely moves every message size of a benchmark: a per-message overhead moves the latency-bound sizes,
an eager/rendezvous switch the protocol sizes, a copy path or a link the bandwidth-bound ones. One median over all
sizes dilutes it (+10 % on small messages only is +4.9 % of the whole case), so the verdict keeps one chart per
case *and* band. A night measures only the bands' sizes (the full sweep is for the report's figures, run when the
software changes), in ``rounds`` repetitions each framed by the control measurement (:mod:`ibrepro.rfm.repeat`),
with enough iterations that one latency-bound size spans milliseconds: a preempted slice is then a small share of
its average, not a 10x value.

:data:`NIGHT` is what the nightly mode of every configuration sets (``rfmconfig.site_configuration``); a family not
listed runs as before. The bands of a family are ``{name: sizes}``; the metrics of each size are the family's.
"""

#: Per check family: the bands (name -> message sizes in bytes, each a few sizes of one regime).
BANDS = {
    'IMBPointToPoint': {
        'latency': (8, 64, 512),                     # per-message cost: the eager path, shared-memory or wire latency
        'protocol': (4096, 16384, 65536),            # the eager/rendezvous switch and the copy path
        'bandwidth': (1048576, 4194304),             # the link, the bus or the memory copy
    },
}

#: Per check family: the night's settings (``-S <family>.<name>=<value>`` in the nightly mode). ``repetitions``
#: are the night's rounds (each framed by the control): 5, because a chart's night is its best round the controls
#: accept, and on the 2-core VM's first 91 nights of 3 rounds the controls accepted no round in 25 PingPong and 39
#: Uniband nights (docs/verdict-protocol.md); ``iterations`` IMB's ``-iter``: 10000 ping-pongs of
#: 0.15-0.4 us span 3-8 ms per latency-bound size (IMB's default 1000: 0.3 ms, where one preempted slice is a 10x
#: value), and Uniband's 10000 windows of 64 messages stay under a second per size (IMB lowers the count for large
#: messages by itself; 20000 made a busy night's Uniband take 2 minutes).
NIGHT = {
    'IMBPointToPoint': {'repetitions': 5, 'control': 'true', 'iterations': 10000},
}


def sizes(family):
    """Every size of a family's bands, ascending (what its night measures)."""
    return sorted({s for band in BANDS[family].values() for s in band})


def band_of(family, size):
    """The band of ``size`` for ``family``, or None (a size no band charts)."""
    for name, members in BANDS.get(family, {}).items():
        if size in members:
            return name
    return None


def night_options():
    """The nightly mode's ``-S`` options for the families with bands."""
    options = []
    for family, settings in NIGHT.items():
        options.append(f'-S{family}.message_sizes={",".join(map(str, sizes(family)))}')
        options += [f'-S{family}.{name}={value}' for name, value in settings.items()]
    return options
