"""Theoretical bus and link limits: host buses (PCI, PCI-X, PCIe) and networks (InfiniBand,
Ethernet/RoCE, Myrinet-2000, Quadrics Elan3), and the bound of a host bus plus its links.

Every rate is a *theoretical data rate* in bytes per second: the signalling rate minus the line
encoding (8b/10b, 64b/66b, 128b/130b, FEC). Protocol overhead is NOT included: PCIe TLP/DLLP
headers, flow control and ACKs, InfiniBand LRH/BTH/ICRC/VCRC, Ethernet framing, RoCE headers.
Measured bandwidth therefore stays below these limits; :func:`pcie_tlp_efficiency` and
:meth:`Bound.effective` estimate protocol overhead with an explicit, documented efficiency,
never a hidden factor.

Directions: ``uni`` is one direction (what a uni-directional bandwidth test can reach), ``bi`` is
both directions together (a bi-directional test). A full-duplex link (PCIe, every network) carries
its per-direction rate in each direction at once; a shared parallel bus (PCI, PCI-X) is half
duplex, so both directions together share the one-direction rate.

Spec strings (case-insensitive, ``ibrepro limits --help`` repeats this)::

    pci:<32|64>:<33|66>                          conventional PCI, bus width in bits, clock in MHz
    pcix:<32|64>:<66|100|133|266|533>            PCI-X (266/533: PCI-X 2.0 DDR/QDR transfer rates)
    pcie:gen<1-6>:x<1|2|4|8|12|16|32>            PCI Express generation and link width
    ib:<sdr|ddr|qdr|fdr10|fdr|edr|hdr|ndr|xdr>:<1x|2x|4x|8x|12x>[:<ports>]
    roce:<gbps>g[:<ports>]  eth:<gbps>g[:<ports>]  <gbps> in 1 2.5 5 10 25 40 50 100 200 400 800
    myrinet:2000[:<ports>]                       Myrinet-2000 (paper 002)
    quadrics:elan3[:<ports>]                     Quadrics QsNet Elan3 (paper 002)

A configuration is several specs in series (``pcie:gen1:x8 ib:sdr:4x:2``, or joined with ``+``):
its bound is the smallest component, per direction and for both directions.
"""

import argparse
import json
import re
import sys

from . import compat
from .compat import dataclasses

MB = 1e6           # ibrepro's MB: 10^6 bytes
MiB = 2.0 ** 20    # paper 002's "MB"
GB = 1e9

DIRECTIONS = {'uni': 'uni', 'per-direction': 'uni', 'one': 'uni',
              'bi': 'bi', 'both': 'bi', 'both-directions': 'bi', 'bidirectional': 'bi'}


class SpecError(ValueError):
    """A spec string that does not follow the grammar; ``str()`` says which and why."""

    def __init__(self, spec, reason):
        self.spec = spec
        self.reason = reason
        super().__init__(f'bad limit spec {spec!r}: {reason}')


# -- units ------------------------------------------------------------------------------------

def to_MBps(bytes_per_s):
    """Bytes/s -> MB/s with MB = 10^6 bytes (ibrepro's unit)."""
    return bytes_per_s / MB


def to_MiBps(bytes_per_s):
    """Bytes/s -> MiB/s (2^20 bytes; what paper 002 calls MB/s)."""
    return bytes_per_s / MiB


def to_GBps(bytes_per_s):
    return bytes_per_s / GB


def to_Gbps(bytes_per_s):
    """Bytes/s -> Gb/s (10^9 bits/s)."""
    return bytes_per_s * 8 / 1e9


#: unit name -> bytes/s per unit
UNITS = {'B/s': 1.0, 'MB/s': MB, 'MiB/s': MiB, 'GB/s': GB, 'Gb/s': 1e9 / 8}


def convert(bytes_per_s, unit):
    """Bytes/s in ``unit`` (one of :data:`UNITS`)."""
    if unit not in UNITS:
        raise ValueError(f'unknown unit {unit!r}; known: {", ".join(UNITS)}')

    return bytes_per_s / UNITS[unit]


# -- components -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Component:
    """One part of the data path with its theoretical data rates (bytes/s)."""

    spec: str                   # canonical spec string, e.g. 'pcie:gen1:x8'
    kind: str                   # pci, pcix, pcie, ib, eth, roce, myrinet, quadrics, parallel
    label: str                  # human description
    per_direction: float        # data rate in one direction, bytes/s
    both_directions: float      # data rate of both directions together, bytes/s
    signalling: 'float | None'    # raw line rate in one direction, bits/s, all lanes and ports
    encoding: str               # line code or bus transfer, e.g. '8b/10b'
    half_duplex: bool = False   # a shared bus: both directions share per_direction
    lanes: int = 1              # lanes (PCIe, IB) of one port
    ports: int = 1
    source: str = ''            # where the constants come from

    @classmethod
    def from_dict(cls, d):
        """The component of a :meth:`to_dict` dict (its derived keys are ignored)."""
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})

    def to_dict(self):
        d = dataclasses.asdict(self)
        d.update(per_direction_MBps=to_MBps(self.per_direction),
                 both_directions_MBps=to_MBps(self.both_directions),
                 data_Gbps=to_Gbps(self.per_direction),
                 signalling_Gbps=self.signalling / 1e9 if self.signalling else None)
        return d


# Conventional PCI and PCI-X: nominal clock name -> clock in Hz. The nominal names round the spec
# clocks: PCI Local Bus Spec 3.0 gives a 30 ns minimum cycle at "33 MHz" and 15 ns at "66 MHz";
# PCI-X 1.0b gives 15 / 10 / 7.5 ns at "66 / 100 / 133 MHz". PCI-X 2.0 "266" and "533" transfer
# 2x and 4x per 133.33 MHz clock (DDR/QDR source-synchronous strobes).
_PCI_CLOCKS = {33: 100e6 / 3, 66: 200e6 / 3}
_PCIX_CLOCKS = {66: 200e6 / 3, 100: 100e6, 133: 400e6 / 3, 266: 800e6 / 3, 533: 1600e6 / 3}


def _bus(kind, name, width_bits, transfers_per_s, source):
    rate = width_bits / 8 * transfers_per_s
    return Component(
        spec=f'{kind}:{width_bits}:{name}', kind=kind,
        label=f'{"PCI-X" if kind == "pcix" else "PCI"} {width_bits}-bit/{name} MHz, shared half-duplex bus',
        per_direction=rate, both_directions=rate, signalling=width_bits * transfers_per_s,
        encoding='parallel bus', half_duplex=True, lanes=width_bits, source=source)


def pci(width_bits=32, mhz=33):
    """Conventional PCI: a shared half-duplex parallel bus, ``width/8 * clock`` bytes/s."""
    if width_bits not in (32, 64):
        raise SpecError(f'pci:{width_bits}:{mhz}', 'PCI width must be 32 or 64 (bits)')
    if mhz not in _PCI_CLOCKS:
        raise SpecError(f'pci:{width_bits}:{mhz}', 'PCI clock must be 33 or 66 (MHz)')

    return _bus('pci', mhz, width_bits, _PCI_CLOCKS[mhz],
                'PCI Local Bus Spec 3.0: 33.33/66.67 MHz clock, one transfer per clock')


def pcix(width_bits=64, mhz=133):
    """PCI-X: a shared half-duplex parallel bus, ``width/8 * transfer rate`` bytes/s."""
    if width_bits not in (32, 64):
        raise SpecError(f'pcix:{width_bits}:{mhz}', 'PCI-X width must be 32 or 64 (bits)')
    if mhz not in _PCIX_CLOCKS:
        raise SpecError(f'pcix:{width_bits}:{mhz}', 'PCI-X rate must be 66, 100, 133, 266 or 533 (MHz)')

    return _bus('pcix', mhz, width_bits, _PCIX_CLOCKS[mhz],
                'PCI-X 1.0b / 2.0: 66.67/100/133.33 MHz clock; 266 and 533 are 2 and 4 transfers '
                'per 133.33 MHz clock')


# PCI Express per generation: (transfer rate per lane in T/s, data bits per line bit, encoding).
# PCIe Base Spec 1.1 and 2.0: 2.5 and 5.0 GT/s, 8b/10b (paper 001 Sec. 2 gives the same).
# PCIe Base Spec 3.0/4.0/5.0: 8, 16, 32 GT/s, 128b/130b.
# PCIe Base Spec 6.0: 64 GT/s PAM4 (2 bits per symbol, 32 GBd), no 8b/10b or 128b/130b
# ("1b/1b"), and FLIT mode is mandatory: each 256-byte flit carries 236 B of TLPs, 6 B of
# data-link payload (DLP), 8 B CRC and 6 B FEC. We count 242/256 as data: FEC and CRC are the
# physical-layer code that replaces the line encoding of gen1-5, while the DLP bytes carry the
# data-link traffic that gen1-5 send as DLLPs, which their data rates also include. (Counting
# only the TLP bytes would give 236/256, 2.5 % lower.)
PCIE_GENS = {
    1: (2.5e9, 8 / 10, '8b/10b'),
    2: (5.0e9, 8 / 10, '8b/10b'),
    3: (8.0e9, 128 / 130, '128b/130b'),
    4: (16.0e9, 128 / 130, '128b/130b'),
    5: (32.0e9, 128 / 130, '128b/130b'),
    6: (64.0e9, 242 / 256, 'PAM4, FLIT 242B/256B'),
}
PCIE_WIDTHS = (1, 2, 4, 8, 12, 16, 32)
_PCIE_VERSION = {1: '1.x', 2: '2.0', 3: '3.0', 4: '4.0', 5: '5.0', 6: '6.0'}


def pcie(gen=1, lanes=8):
    """A PCI Express link: full duplex, ``lanes * rate * encoding / 8`` bytes/s per direction."""
    if gen not in PCIE_GENS:
        raise SpecError(f'pcie:gen{gen}:x{lanes}', 'PCIe generation must be gen1 .. gen6')
    if lanes not in PCIE_WIDTHS:
        raise SpecError(f'pcie:gen{gen}:x{lanes}',
                        f'PCIe width must be one of {", ".join(f"x{w}" for w in PCIE_WIDTHS)}')

    rate, efficiency, encoding = PCIE_GENS[gen]
    per_direction = lanes * rate * efficiency / 8
    return Component(
        spec=f'pcie:gen{gen}:x{lanes}', kind='pcie',
        label=f'PCI Express {_PCIE_VERSION[gen]} x{lanes} ({rate / 1e9:g} GT/s per lane)',
        per_direction=per_direction, both_directions=2 * per_direction,
        signalling=lanes * rate, encoding=encoding, lanes=lanes,
        source=f'PCIe Base Spec {_PCIE_VERSION[gen]}: {rate / 1e9:g} GT/s per lane, {encoding}')


# InfiniBand per lane: (line rate in bits/s, data bits per line bit, encoding, source).
# IBTA InfiniBand Architecture Spec Vol. 2 (Physical) Rel. 1.2-1.5 and the IBTA roadmap.
_RS_FEC = (514 / 544) * (256 / 257)   # RS(544,514) FEC + 256b/257b transcoding: 53.125 -> 50 Gb/s
IB_SPEEDS = {
    'sdr': (2.5e9, 8 / 10, '8b/10b', 'IBTA Vol.2 Rel.1.2: 2.5 Gb/s per lane, 8b/10b'),
    'ddr': (5.0e9, 8 / 10, '8b/10b', 'IBTA Vol.2 Rel.1.2: 5 Gb/s per lane, 8b/10b'),
    'qdr': (10.0e9, 8 / 10, '8b/10b', 'IBTA Vol.2 Rel.1.2: 10 Gb/s per lane, 8b/10b'),
    # FDR10 is Mellanox's, not IBTA's: 10.3125 Gb/s with 64b/66b -> 10 Gb/s data per lane
    # (Mellanox MSB7890 switch manual: 40 Gb/s at 4X, "20% more bandwidth over QDR").
    'fdr10': (10.3125e9, 64 / 66, '64b/66b', 'Mellanox FDR10: 10.3125 Gb/s per lane, 64b/66b'),
    'fdr': (14.0625e9, 64 / 66, '64b/66b', 'IBTA Vol.2 Rel.1.3: 14.0625 Gb/s per lane, 64b/66b'),
    'edr': (25.78125e9, 64 / 66, '64b/66b', 'IBTA Vol.2 Rel.1.3: 25.78125 Gb/s per lane, 64b/66b'),
    'hdr': (53.125e9, _RS_FEC, 'PAM4, RS-FEC',
            'IBTA Vol.2 Rel.1.4: 50 Gb/s data per lane, 53.125 Gb/s PAM4 (26.5625 GBd)'),
    'ndr': (106.25e9, _RS_FEC, 'PAM4, RS-FEC',
            'IBTA Vol.2 Rel.1.5: 100 Gb/s data per lane, 106.25 Gb/s PAM4 (53.125 GBd)'),
    # XDR: IBTA roadmap, 200 Gb/s data per lane (800 Gb/s at 4X); the line rate is taken to be
    # IEEE 802.3dj's 212.5 Gb/s per 200G lane with the same FEC ratio.
    'xdr': (212.5e9, _RS_FEC, 'PAM4, RS-FEC',
            'IBTA roadmap: 200 Gb/s data per lane; line rate as IEEE 802.3dj (212.5 Gb/s)'),
}
IB_WIDTHS = (1, 2, 4, 8, 12)


def infiniband(speed='sdr', width=4, ports=1):
    """InfiniBand link(s): ``ports`` ports of ``width`` lanes at ``speed``, full duplex."""
    speed = speed.lower()
    spec = f'ib:{speed}:{width}x' + (f':{ports}' if ports != 1 else '')
    if speed not in IB_SPEEDS:
        raise SpecError(spec, f'InfiniBand speed must be one of {", ".join(IB_SPEEDS)}')
    if width not in IB_WIDTHS:
        raise SpecError(spec, f'InfiniBand width must be one of '
                              f'{", ".join(f"{w}x" for w in IB_WIDTHS)}')
    _check_ports(spec, ports)

    line, efficiency, encoding, source = IB_SPEEDS[speed]
    per_direction = ports * width * line * efficiency / 8
    return Component(
        spec=spec, kind='ib',
        label=f'InfiniBand {width}X {speed.upper()}' + (f', {ports} ports' if ports != 1 else ''),
        per_direction=per_direction, both_directions=2 * per_direction,
        signalling=ports * width * line, encoding=encoding, lanes=width, ports=ports, source=source)


#: Ethernet speeds (Gb/s) the spec parser accepts. The MAC data rate is the nominal speed: the
#: PCS line code (64b/66b, 256b/257b + RS-FEC) runs on top of it (IEEE 802.3).
ETHERNET_GBPS = (1, 2.5, 5, 10, 25, 40, 50, 100, 200, 400, 800)


def ethernet(gbps, ports=1, roce=False):
    """Ethernet (or RoCE over Ethernet) at ``gbps`` Gb/s MAC data rate, full duplex.

    Any positive rate is accepted here (a netdev may report any speed); the spec parser only
    accepts :data:`ETHERNET_GBPS`.
    """
    kind = 'roce' if roce else 'eth'
    spec = f'{kind}:{gbps:g}g' + (f':{ports}' if ports != 1 else '')
    if not gbps > 0:
        raise SpecError(spec, 'Ethernet speed must be positive')
    _check_ports(spec, ports)

    per_direction = ports * gbps * 1e9 / 8
    return Component(
        spec=spec, kind=kind,
        label=f'{"RoCE over " if roce else ""}{gbps:g} Gb/s Ethernet' + (f', {ports} ports' if ports != 1 else ''),
        per_direction=per_direction, both_directions=2 * per_direction, signalling=None,
        encoding='MAC data rate', ports=ports,
        source='IEEE 802.3 nominal MAC rate; Ethernet/IP/UDP/RoCE headers not included')


def myrinet2000(ports=1):
    """Myrinet-2000: 2 Gb/s per direction (paper 002 Sec. 2.2)."""
    spec = 'myrinet:2000' + (f':{ports}' if ports != 1 else '')
    _check_ports(spec, ports)
    per_direction = ports * 2e9 / 8
    return Component(
        spec=spec, kind='myrinet', label='Myrinet-2000' + (f', {ports} ports' if ports != 1 else ''),
        per_direction=per_direction, both_directions=2 * per_direction, signalling=None,
        encoding='as stated by paper 002', ports=ports,
        source='002 Sec. 2.2: "The link bandwidth of the Myrinet network is 2Gbps in each direction."')


def quadrics_elan3(ports=1):
    """Quadrics QsNet Elan3: 400 MB/s per link direction (paper 002 Sec. 2.3).

    Paper 002 says "unless stated otherwise, the unit MB in this paper is an abbreviation for
    2^20 bytes", so 400 MB/s is taken as 400 MiB/s = 419.4 * 10^6 bytes/s.
    """
    spec = 'quadrics:elan3' + (f':{ports}' if ports != 1 else '')
    _check_ports(spec, ports)
    per_direction = ports * 400 * MiB
    return Component(
        spec=spec, kind='quadrics', label='Quadrics Elan3' + (f', {ports} ports' if ports != 1 else ''),
        per_direction=per_direction, both_directions=2 * per_direction, signalling=None,
        encoding='as stated by paper 002 (MB = 2^20)', ports=ports,
        source='002 Sec. 2.3: "The Quadrics network has a transmission bandwidth of 400MB/s in each '
               'link direction."')


def parallel(components):
    """Several links used side by side (e.g. two ports of different speeds): rates add up."""
    components = list(components)
    if not components:
        raise ValueError('parallel() needs at least one component')
    if len(components) == 1:
        return components[0]

    return Component(
        spec=' + '.join(c.spec for c in components), kind='parallel',
        label=' + '.join(c.label for c in components),
        per_direction=sum(c.per_direction for c in components),
        both_directions=sum(c.both_directions for c in components),
        signalling=(sum(c.signalling for c in components)
                    if all(c.signalling for c in components) else None),
        encoding=', '.join(sorted({c.encoding for c in components})),
        ports=sum(c.ports for c in components), source='sum of the parallel links')


def _check_ports(spec, ports):
    if not isinstance(ports, int) or ports < 1:
        raise SpecError(spec, 'the number of ports must be a positive integer')


# -- spec strings -----------------------------------------------------------------------------

def _int(spec, text, what):
    try:
        return int(text)
    except ValueError:
        raise SpecError(spec, f'{what} must be an integer, not {text!r}') from None


def _ports(spec, fields, at):
    if len(fields) > at + 1:
        raise SpecError(spec, f'too many fields (expected at most {at + 1})')
    return _int(spec, fields[at], 'the number of ports') if len(fields) > at else 1


def parse_spec(spec):
    """One spec string -> :class:`Component`. Raises :class:`SpecError` naming the problem."""
    text = spec.strip().lower()
    fields = text.split(':')
    kind = fields[0]
    try:
        if kind == 'pci' or kind == 'pcix':
            if len(fields) != 3:
                raise SpecError(spec, f'expected {kind}:<width bits>:<MHz>, e.g. '
                                      f'{"pci:64:66" if kind == "pci" else "pcix:64:133"}')
            build = pci if kind == 'pci' else pcix
            return build(_int(spec, fields[1], 'the bus width'), _int(spec, fields[2], 'the clock'))

        if kind == 'pcie':
            if len(fields) != 3:
                raise SpecError(spec, 'expected pcie:gen<N>:x<lanes>, e.g. pcie:gen2:x8')
            gen = _int(spec, compat.removeprefix(fields[1], 'gen'), 'the PCIe generation')
            return pcie(gen, _int(spec, compat.removeprefix(fields[2], 'x'), 'the PCIe width'))

        if kind == 'ib':
            if len(fields) not in (3, 4):
                raise SpecError(spec, 'expected ib:<speed>:<width>x[:<ports>], e.g. ib:qdr:4x:2')
            width = _int(spec, compat.removesuffix(fields[2], 'x'), 'the InfiniBand width')
            return infiniband(fields[1], width, _ports(spec, fields, 3))

        if kind in ('eth', 'roce'):
            if len(fields) not in (2, 3) or not re.fullmatch(r'[\d.]+g', fields[1]):
                raise SpecError(spec, f'expected {kind}:<Gb/s>g[:<ports>], e.g. {kind}:100g')
            gbps = float(fields[1][:-1])
            if gbps not in ETHERNET_GBPS:
                raise SpecError(spec, f'Ethernet speed must be one of '
                                      f'{", ".join(f"{g:g}g" for g in ETHERNET_GBPS)}')
            return ethernet(gbps, _ports(spec, fields, 2), roce=kind == 'roce')

        if kind == 'myrinet':
            if len(fields) < 2 or fields[1] != '2000':
                raise SpecError(spec, 'expected myrinet:2000[:<ports>] (only Myrinet-2000 is known)')
            return myrinet2000(_ports(spec, fields, 2))

        if kind == 'quadrics':
            if len(fields) < 2 or fields[1] != 'elan3':
                raise SpecError(spec, 'expected quadrics:elan3[:<ports>] (only Elan3 is known)')
            return quadrics_elan3(_ports(spec, fields, 2))
    except SpecError as err:
        if err.spec != spec:   # re-raise naming what the user wrote
            raise SpecError(spec, err.reason) from None
        raise

    raise SpecError(spec, 'unknown kind; expected pci, pcix, pcie, ib, eth, roce, myrinet or quadrics')


def parse_config(config):
    """Specs in series -> list of :class:`Component`.

    ``config`` is a string (specs separated by blanks, commas or ``+``), a list of spec strings
    or components, or a :class:`Bound` (its components).
    """
    if isinstance(config, Bound):
        return list(config.components)
    if isinstance(config, Component):
        return [config]
    if isinstance(config, str):
        config = [s for s in re.split(r'[\s,+]+', config) if s]
    components = [c if isinstance(c, Component) else parse_spec(c) for c in config]
    if not components:
        raise ValueError('empty configuration: give at least one spec, e.g. pcie:gen1:x8')
    return components


# -- the bound of a configuration ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Bound:
    """The theoretical limit of components in series, and which of them set it."""

    components: tuple
    per_direction: float                 # bytes/s
    both_directions: float               # bytes/s
    bottleneck_per_direction: tuple      # specs of the components at the minimum (ties: several)
    bottleneck_both_directions: tuple

    def value(self, direction='uni'):
        return self.per_direction if _direction(direction) == 'uni' else self.both_directions

    def bottleneck(self, direction='uni'):
        return (self.bottleneck_per_direction if _direction(direction) == 'uni'
                else self.bottleneck_both_directions)

    def effective(self, payload_efficiency, direction='uni'):
        """An estimate of what a benchmark can reach: the bound times ``payload_efficiency``.

        ``payload_efficiency`` (0 < e <= 1) is the caller's explicit assumption about protocol
        overhead, e.g. :func:`pcie_tlp_efficiency`; it is never applied implicitly.
        """
        if not 0 < payload_efficiency <= 1:
            raise ValueError(f'payload efficiency must be in (0, 1], not {payload_efficiency}')
        return self.value(direction) * payload_efficiency

    def to_dict(self):
        return {
            'components': [c.to_dict() for c in self.components],
            'per_direction': self.per_direction,
            'both_directions': self.both_directions,
            'per_direction_MBps': to_MBps(self.per_direction),
            'both_directions_MBps': to_MBps(self.both_directions),
            'bottleneck_per_direction': list(self.bottleneck_per_direction),
            'bottleneck_both_directions': list(self.bottleneck_both_directions),
        }


def _direction(direction):
    try:
        return DIRECTIONS[direction]
    except KeyError:
        raise ValueError(f'unknown direction {direction!r}; use "uni" (one direction) or "bi" '
                         f'(both directions together)') from None


def _minimum(components, rate):
    low = min(rate(c) for c in components)
    return low, tuple(c.spec for c in components if rate(c) <= low * (1 + 1e-9))


def bound(config):
    """The :class:`Bound` of a configuration (see :func:`parse_config`)."""
    if isinstance(config, Bound):
        return config

    components = tuple(parse_config(config))
    per_direction, uni_by = _minimum(components, lambda c: c.per_direction)
    both, bi_by = _minimum(components, lambda c: c.both_directions)
    return Bound(components, per_direction, both, uni_by, bi_by)


def limit_MBps(config, direction='uni'):
    """The bound of ``config`` in MB/s (10^6 bytes/s)."""
    return to_MBps(bound(config).value(direction))


def fraction_of_limit(measured_MBps_SI, config, direction='uni'):
    """``measured`` (MB/s, 10^6 bytes/s) as a fraction of the bound of ``config``.

    ``direction`` is ``uni`` (a one-direction test) or ``bi`` (both directions together).
    """
    return measured_MBps_SI * MB / bound(config).value(direction)


def pcie_tlp_efficiency(max_payload=256, header_bytes=16, gen=3):
    """Payload share of a PCIe link carrying back-to-back maximum-size memory-write TLPs.

    Per TLP the link also carries the header (12 B for 32-bit, 16 B for 64-bit addresses) and
    8 B of framing: gen1/2 STP (1) + sequence number (2) + LCRC (4) + END (1); gen3-5 a 4-byte
    STP token (which holds the sequence number) + LCRC (4). DLLPs (ACK, flow-control updates),
    read requests and completions are NOT counted, so the real efficiency is lower still. FLIT
    mode (gen6) packs TLPs differently and is not modelled.
    """
    if gen not in (1, 2, 3, 4, 5):
        raise ValueError(f'PCIe gen{gen}: only non-FLIT generations 1-5 are modelled')
    if max_payload not in (128, 256, 512, 1024, 2048, 4096):
        raise ValueError(f'max payload must be 128 .. 4096 bytes (a power of 2), not {max_payload}')
    if header_bytes not in (12, 16):
        raise ValueError(f'TLP header must be 12 or 16 bytes, not {header_bytes}')

    return max_payload / (max_payload + header_bytes + 8)


# -- the papers' own statements ---------------------------------------------------------------

def paper_statements(path=None):
    """The papers' statements about bus and link speeds (``reference-data/limits/statements.yaml``)."""
    import yaml
    from . import paths

    path = path or paths.REFERENCE_DATA / 'limits' / 'statements.yaml'
    try:
        with open(path) as f:
            entries = yaml.safe_load(f)
    except OSError as err:
        raise ValueError(f'{path}: cannot read: {err.strerror}') from None

    if not isinstance(entries, list):
        raise ValueError(f'{path}: expected a list of statements')
    for i, entry in enumerate(entries):
        missing = {'seed', 'section', 'quote', 'spec', 'quantity', 'value', 'unit'} - set(entry)
        if missing:
            raise ValueError(f'{path}: statement {i + 1}: missing {", ".join(sorted(missing))}')

    return entries


#: quantity of a statement -> how to compute it from a component, in bytes/s or bits/s
def _computed(component, quantity, unit):
    if quantity == 'signalling':
        if component.signalling is None:
            raise ValueError(f'{component.spec} has no signalling rate')
        if unit == 'GT/s':   # per lane, as PCIe rates are quoted
            return component.signalling / component.lanes / component.ports / 1e9
        if unit == 'Gb/s':
            return component.signalling / 1e9
        return convert(component.signalling / 8, unit)   # raw rate in bytes, e.g. "2.5 GB/s raw"

    rate = {'per_direction': component.per_direction,
            'both_directions': component.both_directions}.get(quantity)
    if rate is None:
        raise ValueError(f'unknown quantity {quantity!r}')
    return convert(rate, unit)


def check_statements(entries=None):
    """Each statement with the computed value in the statement's own unit, and their ratio."""
    rows = []
    for entry in entries if entries is not None else paper_statements():
        component = parse_spec(entry['spec'])
        computed = _computed(component, entry['quantity'], entry['unit'])
        rows.append(dict(entry, computed=computed, ratio=computed / entry['value']))
    return rows


# -- command line ------------------------------------------------------------------------------

def _table(headers, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    lines = ['  '.join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()
             for r in [headers, ['-' * w for w in widths], *rows]]
    return '\n'.join(lines)


def _fmt(bytes_per_s, unit):
    return f'{convert(bytes_per_s, unit):,.1f} {unit}'


def add_cli(subparsers):
    p = subparsers.add_parser(
        'limits', help='theoretical bus and link limits of a configuration, or the papers\' own',
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description='Print the theoretical data rate of each component (line encoding removed, '
                    'protocol overhead NOT included) and the bound of them in series: per '
                    'direction and both directions together, with the bottleneck.\n\n'
                    + __doc__[__doc__.index('Spec strings'):])
    p.add_argument('specs', nargs='*', metavar='SPEC',
                   help='e.g. pcie:gen1:x8 ib:sdr:4x:2 (a configuration in series)')
    p.add_argument('--papers', action='store_true',
                   help='the papers\' statements about bus and link speeds beside the computed values')
    p.add_argument('--unit', default='MB/s', choices=[u for u in UNITS if u != 'B/s'],
                   help='unit of the table (default MB/s = 10^6 bytes/s)')
    p.add_argument('--payload-efficiency', type=float, metavar='E',
                   help='also print bound x E, an explicit protocol-overhead assumption (0 < E <= 1)')
    p.add_argument('--json', action='store_true', help='print JSON (rates in bytes/s and MB/s)')
    p.set_defaults(func=_cli_limits)


def _cli_limits(args):
    if args.papers:
        return _cli_papers(args)
    if not args.specs:
        print('ibrepro limits: give specs (e.g. pcie:gen1:x8 ib:sdr:4x:2) or --papers', file=sys.stderr)
        return 2

    try:
        b = bound(args.specs)
        effective = (b.effective(args.payload_efficiency), b.effective(args.payload_efficiency, 'bi')) \
            if args.payload_efficiency is not None else None
    except ValueError as err:
        print(f'ibrepro limits: {err}', file=sys.stderr)
        return 2

    if args.json:
        out = b.to_dict()
        if effective:
            out.update(payload_efficiency=args.payload_efficiency,
                       effective_per_direction=effective[0], effective_both_directions=effective[1])
        json.dump(out, sys.stdout, indent=2)
        print()
        return 0

    u = args.unit
    rows = [[c.spec, c.label, c.encoding,
             f'{c.signalling / 1e9:.4g} Gb/s' if c.signalling else '-',
             _fmt(c.per_direction, u), _fmt(c.both_directions, u) + (' (shared)' if c.half_duplex else '')]
            for c in b.components]
    rows.append(['bound', '', '', '',
                 f'{_fmt(b.per_direction, u)} [{" = ".join(b.bottleneck_per_direction)}]',
                 f'{_fmt(b.both_directions, u)} [{" = ".join(b.bottleneck_both_directions)}]'])
    if effective:
        rows.append([f'x {args.payload_efficiency:g}', 'effective estimate (your assumption)', '', '',
                     _fmt(effective[0], u), _fmt(effective[1], u)])
    print(_table(['component', 'description', 'encoding', 'signalling/dir',
                  'per direction', 'both directions'], rows))
    print('\nData rates after line encoding; protocol overhead (PCIe TLP/DLLP, IB/Ethernet headers) '
          'is not included.')
    return 0


def _cli_papers(args):
    try:
        rows = check_statements()
    except ValueError as err:
        print(f'ibrepro limits: {err}', file=sys.stderr)
        return 1

    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0

    table = [[i, r['seed'][:3], r['section'], r['spec'], r['quantity'].replace('_', ' '),
              f'{r["value"]:g} {r["unit"]}', f'{r["computed"]:.4g} {r["unit"]}', f'{r["ratio"]:.3f}']
             for i, r in enumerate(rows, 1)]
    print(_table(['#', 'seed', 'section', 'spec', 'quantity', 'paper says', 'computed',
                  'computed/paper'], table))
    print('\nQuotes (verbatim):')
    for i, r in enumerate(rows, 1):
        note = f' [{r["note"]}]' if r.get('note') else ''
        print(f'{i:>3}. {r["seed"]} Sec. {r["section"]}: "{r["quote"]}"{note}')
    return 0
