"""The parts of a fabric the fleet names: :class:`Component`, one type for all of them, parsed here and nowhere else.

A component is what a flow crosses and what a night may name: the localiser's hypotheses, a confirmation's suspects,
a stored night's ``fleet_named``, the verdict's findings. Its label is what is stored, shown and read back, so the
type *is* its label (a ``str``, equal to and hashed as the label) with its parts read once:

=========================  ===========================================================  =======================
label                      what                                                         parts
=========================  ===========================================================  =======================
``node H``                 node ``H``: its PCIe, memory, CPUs, every HCA                host
``port H:D/P``             HCA port ``P`` of device ``D`` on node ``H``                 host, rail
``cable H:D/P up``         that port's cable, node to leaf (``down``: leaf to node)     host, rail, direction
``uplink L>spineQ``        leaf ``L``'s link to spine ``Q``, upward (all its cables)    leaf, spine
``downlink spineQ>L``      the same trunk, downward                                     leaf, spine
``spine link L-spineQ``    the trunk, both directions                                   leaf, spine
=========================  ===========================================================  =======================

Host names are :data:`HOST_NAME`; a leaf is the topology's switch name (it may hold ``-``, ``.`` or ``>``: the
spine is read from the end). Node-side code: Python 3.6.
"""

import re

#: A plain host name (what Slurm's NodeName and NHC's $HOSTNAME are): sweep lines, flows' hosts and verdicts
#: accept no other.
HOST_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,252}')

NODE_KINDS = ('node', 'port', 'cable')
LINK_KINDS = ('uplink', 'downlink', 'spine link')
DIRECTIONS = ('up', 'down')

_HOST = HOST_NAME.pattern
#: a rail is ``device/port``; the device as a stored night has it (a name is data: shown escaped, never refused
#: here, so that a night with an odd device name is still judged)
_RAIL = r'(?P<rail>.{1,200}/[0-9]{1,3})'
_LABELS = {
    'node': re.compile(f'node (?P<host>{_HOST})'),
    'port': re.compile(f'port (?P<host>{_HOST}):{_RAIL}'),
    'cable': re.compile(f'cable (?P<host>{_HOST}):{_RAIL} (?P<direction>up|down)'),
    'uplink': re.compile(r'uplink (?P<leaf>.{1,253})>spine(?P<spine>[0-9]{1,6})'),
    'downlink': re.compile(r'downlink spine(?P<spine>[0-9]{1,6})>(?P<leaf>.{1,253})'),
    'spine link': re.compile(r'spine link (?P<leaf>.{1,253})-spine(?P<spine>[0-9]{1,6})'),
}


class Component(str):
    """A fabric component by its label (the table in the module doc); ValueError for any other text.

    ``kind`` (one of :data:`NODE_KINDS` + :data:`LINK_KINDS`) and its parts: ``host``, ``rail`` (``device/port``),
    ``direction`` (``up``/``down``) of node-side ones; ``leaf`` and ``spine`` (the spine's index) of links; the
    parts a kind does not have are None."""

    def __new__(cls, label):
        if isinstance(label, Component):
            return label
        text = str(label)
        kind = 'spine link' if text.startswith('spine link ') else text.partition(' ')[0]
        match = _LABELS[kind].fullmatch(text) if kind in _LABELS else None
        if match is None:
            raise ValueError(f'{text!r:.100} is not a fabric component (node, port, cable, uplink, downlink or '
                             'spine link)')
        self = super().__new__(cls, text)
        parts = match.groupdict()
        self.kind = kind
        self.host, self.rail, self.direction, self.leaf = (parts.get(k) for k in ('host', 'rail', 'direction', 'leaf'))
        self.spine = int(parts['spine']) if parts.get('spine') is not None else None
        return self

    def __getnewargs__(self):
        return (str(self),)

    # -- the labels, built ---------------------------------------------------------------------------------
    @classmethod
    def node(cls, host):
        return cls(f'node {host}')

    @classmethod
    def port(cls, host, rail):
        return cls(f'port {host}:{rail_name(rail)}')

    @classmethod
    def cable(cls, host, rail, direction):
        return cls(f'cable {host}:{rail_name(rail)} {direction}')

    @classmethod
    def uplink(cls, leaf, spine):
        return cls(f'uplink {leaf}>spine{spine}')

    @classmethod
    def downlink(cls, spine, leaf):
        return cls(f'downlink spine{spine}>{leaf}')

    @classmethod
    def spine_link(cls, leaf, spine):
        return cls(f'spine link {leaf}-spine{spine}')

    # -- what it is ------------------------------------------------------------------------------------------
    @property
    def is_link(self):
        """A leaf-spine link (confirmed by loading it), not a node's side."""
        return self.kind in LINK_KINDS

    def on_host(self, host):
        """Whether it is ``host``'s own side: the node, one of its ports, one of its cables."""
        return self.host is not None and self.host == host

    def directed_links(self):
        """The directed leaf-spine links it is (as :meth:`ibrepro.fleet.plan.Fabric.directed_links` names them):
        ``{'L>spineQ'}`` for an uplink, ``{'spineQ>L'}`` for a downlink, both for a spine link, none for a node's
        side."""
        up, down = f'{self.leaf}>spine{self.spine}', f'spine{self.spine}>{self.leaf}'
        return {'uplink': {up}, 'downlink': {down}, 'spine link': {up, down}}.get(self.kind, set())


def rail_name(rail):
    """``device/port`` of a rail given as ``(device, port)`` or already as its name."""
    return rail if isinstance(rail, str) else f'{rail[0]}/{rail[1]}'


def component_or_none(label):
    """:class:`Component` of ``label``, or None when it is none (a stored name may hold anything)."""
    try:
        return Component(label)
    except ValueError:
        return None
