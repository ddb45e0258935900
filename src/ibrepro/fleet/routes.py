"""The routing a fabric really has, read from its own tables: ``ibnetdiscover`` (switches, HCAs, cabling, LIDs) and
``dump_lfts`` (each switch's linear forwarding table: destination LID -> out port), both from infiniband-diags.

The fleet's pair rounds assume destination-mod-k over the node order of Slurm's ``topology.conf``
(:mod:`ibrepro.fleet.plan`). A fabric may route otherwise (another engine, nodes cabled out of the names' order):
then a flow crosses other leaf-spine links than the plan thinks, and a slow uplink would be blamed on a healthy one.
:func:`read` turns the two outputs into what the plan needs: the leaves with their nodes in port order, the spines,
and for every (source leaf, destination node) the spine its flows cross; :func:`differences` says where that is not
what destination-mod-k over ``topology.conf`` assumes.

Only two-level trees are read (a leaf: a switch with HCAs; a spine: a switch without); a path that does not go up
one spine and down to the destination's leaf is refused, named.
"""

import re
import shutil
import subprocess

#: ``Switch 8 "S-0000000000200001"  # "leaf2" base port 0 lid 3 lmc 0``; ``Ca 1 "H-..."  # "node5"``
_NODE = re.compile(r'^(Switch|Ca)\s+(\d+)\s+"([^"]+)"\s*#\s*"([^"]*)"(.*)$')
#: ``[1]  "H-0000000000100008"[1](100009)  # "node5" lid 9 4xSDR``
_PORT = re.compile(r'^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s+"([^"]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*#\s*"([^"]*)"'
                   r'(?:\s+lid\s+(\d+))?')
#: ``Unicast lids [0x0-0xc] of switch DR path slid 0; dlid 0; 0,5 guid 0x0000000000200001 (leaf2):``
_LFT_HEAD = re.compile(r'^Unicast lids \[[^\]]*\] of switch .*? guid (0x[0-9a-fA-F]+) \((.*)\):\s*$')
#: ``0x0009 005 : (Channel Adapter portguid 0x0000000000100009: 'node5')``
_LFT_ROW = re.compile(r'^(0x[0-9a-fA-F]+)\s+(\d+)\s+:')

#: A host name (what an HCA's node description begins with, and Slurm's NodeName is).
_HOST = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,252}')

#: The most switches or HCAs read (the largest fabrics have tens of thousands of HCAs).
MAX_NODES = 100_000


class RoutesError(ValueError):
    """Fabric tables that cannot be read, or a fabric this reader does not model (which output, why)."""


def switch_name(description, guid):
    """The name the fleet gives a switch: the host name of its node description (``MF0;ibsw-leaf1:MQM8700/U1``, as
    managed switches print it, is ``ibsw-leaf1``), each character outside letters, digits, ``_`` and ``.`` made
    ``_`` (a name a night stores stays plain: it reaches pages, the verdict file and NHC's messages); the GUID
    where nothing is left."""
    name = description.split(';', 1)[-1].split(':', 1)[0].strip()
    name = re.sub(r'[^A-Za-z0-9_.]', '_', name)[:64]
    return name if name.strip('_') else f'sw_{guid[-16:]}'


def parse_ibnetdiscover(text):
    """``{'switches': {guid: {'name', 'lid', 'ports': {port: (remote guid, remote port)}}}, 'hcas': {guid: {'name',
    'lid'}}}`` from ``ibnetdiscover``'s output. An HCA's name is its node description (the host name, as Slurm's
    NodeName usually is); its LID is what the switch port it is cabled to prints."""
    switches, hcas, current = {}, {}, None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        node = _NODE.match(line)
        if node:
            kind, _, guid, name, rest = node.groups()
            if len(switches) + len(hcas) >= MAX_NODES:
                raise RoutesError(f'ibnetdiscover: more than {MAX_NODES} nodes')
            if kind == 'Switch':
                lid = re.search(r'\blid (\d+)', rest)
                current = switches.setdefault(guid, {'name': switch_name(name, guid),
                                                     'lid': int(lid.group(1)) if lid else None, 'ports': {}})
            else:
                current = None
                hcas.setdefault(guid, {'name': name.split()[0] if name.split() else guid, 'lid': None})
            continue
        port = _PORT.match(line)
        if port and current is not None:
            local, remote, remote_port, remote_name, lid = port.groups()
            current['ports'][int(local)] = (remote, int(remote_port))
            if remote.startswith('H-') and lid:
                hca = hcas.setdefault(remote, {'name': remote_name.split()[0] if remote_name.split() else remote,
                                               'lid': None})
                hca['lid'] = int(lid)
        elif line.startswith('[') and current is not None:
            raise RoutesError(f'ibnetdiscover: line {number}: a port line this reader does not know: {line[:120]!r}')
    if not switches:
        raise RoutesError('ibnetdiscover: no switch in the output')
    names = [sw['name'] for sw in switches.values()]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RoutesError(f'ibnetdiscover: two switches are both named {twice[0]!r} (their node descriptions)')
    bad = next((h['name'] for h in hcas.values() if not _HOST.fullmatch(h['name'])), None)
    if bad is not None:
        raise RoutesError(f'ibnetdiscover: HCA node description {bad[:80]!r} does not begin with a host name')
    return {'switches': switches, 'hcas': hcas}


def parse_dump_lfts(text):
    """``{switch guid: {destination LID: out port}}`` from ``dump_lfts`` (or ``ibroute``) output."""
    tables, current = {}, None
    for number, line in enumerate(text.splitlines(), 1):
        head = _LFT_HEAD.match(line.strip())
        if head:
            current = tables.setdefault(f'S-{int(head.group(1), 16):016x}', {})
            continue
        row = _LFT_ROW.match(line.strip())
        if row and current is not None:
            current[int(row.group(1), 16)] = int(row.group(2))
    if not tables:
        raise RoutesError('dump_lfts: no forwarding table in the output')
    return tables


def read(ibnetdiscover, dump_lfts):
    """The fabric's two-level tree and routes: ``{'leaves': {leaf: [nodes in port order]}, 'spines': [names,
    sorted], 'routes': {(source leaf, destination node): spine}}`` from the two outputs (text)."""
    fabric, lfts = parse_ibnetdiscover(ibnetdiscover), parse_dump_lfts(dump_lfts)
    switches, hcas = fabric['switches'], fabric['hcas']
    leaves, spines = {}, {}
    for guid, sw in switches.items():
        hosts = [(port, remote) for port, (remote, _) in sorted(sw['ports'].items()) if remote in hcas]
        if hosts:
            leaves[guid] = [hcas[remote]['name'] for _, remote in hosts]
        else:
            spines[guid] = sw['name']
    if not spines:
        raise RoutesError('ibnetdiscover: no spine (a switch without HCAs): one leaf needs no routes')
    by_name = {}
    for guid, nodes in leaves.items():
        by_name[switches[guid]['name']] = nodes
    routes = {}
    for guid in leaves:
        table = lfts.get(guid)
        if table is None:
            raise RoutesError(f'dump_lfts: no table of leaf {switches[guid]["name"]}')
        for other, nodes in leaves.items():
            if other == guid:
                continue
            for hca in hcas.values():
                if hca['name'] not in nodes:
                    continue
                routes[(switches[guid]['name'], hca['name'])] = _spine_of(
                    switches, lfts, guid, other, hca, spines)
    return {'leaves': dict(sorted(by_name.items())), 'spines': sorted(spines.values()), 'routes': routes}


def _spine_of(switches, lfts, leaf, other, hca, spines):
    """The spine a flow from ``leaf`` to ``hca`` (on ``other``) goes up to, checked to come down to ``other``."""
    what = f'{switches[leaf]["name"]} -> {hca["name"]} (LID {hca["lid"]})'
    port = lfts[leaf].get(hca['lid'])
    if port is None or port not in switches[leaf]['ports']:
        raise RoutesError(f'dump_lfts: no route for {what}')
    up = switches[leaf]['ports'][port][0]
    if up not in spines:
        raise RoutesError(f'{what} leaves through port {port} to {switches.get(up, {}).get("name", up)}, no spine')
    down = lfts.get(up, {}).get(hca['lid'])
    if down is None or switches[up]['ports'].get(down, (None,))[0] != other:
        raise RoutesError(f'{what}: spine {spines[up]} does not forward it to {switches[other]["name"]}')
    return spines[up]


def differences(routes, leaves, spine_names=None):
    """Where the fabric's routes differ from destination-mod-k over ``leaves`` ({leaf: [nodes]} in topology.conf's
    order): ``[(source leaf, destination, assumed spine, measured spine)]``. Spines are numbered in sorted name
    order (``spine_names``, default the routes' own), as the plan numbers them."""
    names = spine_names or sorted({s for s in routes['routes'].values()})
    out = []
    for (leaf, dst), spine in sorted(routes['routes'].items()):
        where = next(((name, nodes.index(dst)) for name, nodes in leaves.items() if dst in nodes), None)
        if where is None:
            continue
        assumed = names[where[1] % len(names)]
        if assumed != spine:
            out.append((leaf, dst, assumed, spine))
    return out


def same_nodes(found, leaves):
    """Whether the fabric's HCAs (:func:`read`) are the nodes of ``leaves`` ({leaf: [nodes]}, the topology's)."""
    return sorted(n for ns in found['leaves'].values() for n in ns) == sorted(n for ns in leaves.values() for n in ns)


# -- reading them from the fabric ---------------------------------------------------------------------------

#: the files a night's ``IBREPRO_FLEET_ROUTES`` directory holds (:func:`ibrepro.fleet.night.night_from_environment`)
FILES = ('ibnetdiscover.txt', 'dump_lfts.txt')
#: infiniband-diags' commands, the newest name first (``dump_lfts`` is ``dump_fts``'s old name and only calls it)
COMMANDS = (('ibnetdiscover',), ('dump_fts', 'dump_lfts', 'dump_lfts.sh'))


def _output(names, timeout):
    """The standard output of the first of ``names`` on PATH, run without arguments; RoutesError naming what failed
    (not installed, no answer in ``timeout`` s, an exit status with the first line it printed on stderr)."""
    exe = next(filter(None, map(shutil.which, names)), None)
    if exe is None:
        raise RoutesError(f'{names[0]}: not found on PATH (infiniband-diags is not installed here)')
    try:
        done = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RoutesError(f'{exe}: no answer in {timeout} s') from None
    except OSError as err:
        raise RoutesError(f'{exe}: {err.strerror}') from None
    if done.returncode:
        first = next((line.strip() for line in done.stderr.splitlines() if line.strip()), '')
        raise RoutesError(f'{exe}: exit {done.returncode}' + (f': {first[:300]}' if first else ''))
    return done.stdout


def collect(timeout=300):
    """``({file name: output}, read tree)``: the two tables as the fabric prints them now (:data:`COMMANDS`, run
    here: a host with an HCA on the fabric and the right to send MADs, root or the umad devices' group), read
    (:func:`read`) before anyone writes them: RoutesError naming what failed."""
    texts = dict(zip(FILES, (_output(names, timeout) for names in COMMANDS)))
    return texts, read(*(texts[name] for name in FILES))
