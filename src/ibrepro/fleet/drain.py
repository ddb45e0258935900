"""What a fleet night does to nodes: the verdict file a Slurm HealthCheckProgram reads, and the drain list.

A night's findings come from the state sweep (``ibrepro fleet sweep --json``: faults whose component starts with
``<host>:``) and from the localiser (``ibrepro fleet analyse --json``: the named components). A finding that belongs
to a node (the node, its HCA port, its PCIe link, its host cable) marks that node bad; a switch link (a leaf uplink
or downlink, a leaf-spine cable) belongs to no node: it is listed for the fabric's admins and drains nothing.

The verdict file is one line per finding, read on every node by ``scripts/nhc/ibrepro_fleet.nhc`` (an LBNL NHC
check: a grep of a small local or shared file, well inside HealthCheckProgram's 60 s)::

    # ibrepro fleet verdict v1 night=<id> written=<unix time>
    bad <node> <reason>
    link <component> <reason>
    untested <component> <reason>

Only a component a confirmation re-tested, on nodes of the night's fabric, is ``bad`` or a ``link``; one named from
the night alone, or naming a host the fabric does not have, is ``untested``: written down, drains nothing.

Node names and reasons come from data (sweep lines, flow records): a node name that is not a plain host name is
refused; a reason keeps plain characters only (no quote, ``$``, backquote or backslash: NHC's ``die`` evals its
message inside single quotes) on one line. The drain list is printed as ``scontrol``
commands (shell-quoted); ``--apply`` runs them (argv, no shell), only when asked.
"""

import re
import shlex
import subprocess
import time

from . import localise as fleet_localise
from .component import HOST_NAME, Component

VERSION = 'v1'
REASON_CHARS = 200


class VerdictError(ValueError):
    """A finding that cannot be attributed (a node name that is not a host name)."""


def _reason(text):
    """One line of plain characters: NHC's die() evals its message inside single quotes, and Slurm shows it."""
    text = re.sub(r'[^A-Za-z0-9 _.,:;/%+=()<>@#-]', '_', ' '.join(str(text).split()))
    return text[:REASON_CHARS] or '(no reason given)'


def _host(name):
    if not HOST_NAME.fullmatch(name or ''):
        raise VerdictError(f'{name!r:.60} is not a host name')
    return name


def _component(label):
    """The :class:`Component` a finding names; VerdictError for any other text (its node would be a guess)."""
    try:
        return Component(label)
    except ValueError as err:
        raise VerdictError(str(err)) from None


def findings(sweep=None, analysis=None):
    """``(bad nodes {node: [reasons]}, switch links [(component, reason)], untested [(component, reason)])`` from a
    sweep's JSON result and a localiser's JSON result (either may be None). A named component drains only when a
    confirmation re-tested it (``confirmed``) and its nodes are nodes of the night's fabric (``fabric_nodes``);
    otherwise it is *untested*: listed, drains nothing (a night whose confirmation never ran, a stored night naming
    a host of no topology)."""
    bad, links, untested = {}, [], []
    nodes = (analysis or {}).get('fabric_nodes')
    nodes = set(nodes) if isinstance(nodes, list) else None
    for fault in (sweep or {}).get('faults', []):
        host = _host(str(fault.get('component', '')).split(':', 1)[0])
        bad.setdefault(host, []).append(_reason(f"{fault.get('component')}: {fault.get('fault')} "
                                                f"({fault.get('evidence')})"))
    for named in (analysis or {}).get('named', []):
        members = named.get('members') or [named.get('name', '')]
        effect = named.get('effect')
        metric = named.get('metric') if named.get('metric') in fleet_localise.VALUE else fleet_localise.BANDWIDTH
        why = _reason(f"{named.get('name')}: {metric} {effect:+.1%} over {len(named.get('flows') or [])} flow(s)"
                      + (' flapping (slow in some rounds only)' if named.get('flapping') is True else '')
                      if isinstance(effect, (int, float)) else named.get('name'))
        hosts = {c.host for c in map(_component, members) if c.host is not None}
        outside = sorted(h for h in hosts if nodes is None or h not in nodes)
        if named.get('confirmed') is not True:
            untested.append((_reason(named.get('name')), _reason(f'{why}: named from the night alone, no '
                                                                 'confirmation re-tested it')))
        elif outside:
            untested.append((_reason(named.get('name')), _reason(
                f'{why}: {" ".join(outside)} not a node of the fabric the night ran on' if nodes is not None else
                f'{why}: the analysis names no fabric (written before ibrepro listed it: run fleet analyse again)')))
        elif hosts:
            for host in sorted(hosts):
                bad.setdefault(host, []).append(why)
        else:
            links.append((_reason(named.get('name')), why))
    return bad, links, untested


def verdict_text(bad, links, night='', now=None, untested=()):
    """The verdict file's text (NHC's check reads only its ``bad`` lines)."""
    night = re.sub(r'[^A-Za-z0-9_.:-]', '_', str(night))[:64] or '-'
    lines = [f'# ibrepro fleet verdict {VERSION} night={night} written={int(now if now is not None else time.time())}']
    lines += [f'bad {host} {"; ".join(reasons)[:REASON_CHARS * 2]}' for host, reasons in sorted(bad.items())]
    lines += [f'link {component.replace(" ", "_")} {why}' for component, why in links]
    lines += [f'untested {component.replace(" ", "_")} {why}' for component, why in untested]
    return '\n'.join(lines) + '\n'


def drain_commands(bad):
    """One ``scontrol update ... State=DRAIN`` argv per bad node."""
    return [['scontrol', 'update', f'NodeName={host}', 'State=DRAIN',
             f'Reason=ibrepro fleet: {_reason(reasons[0])[:100]}'] for host, reasons in sorted(bad.items())]


def printable(argv):
    return ' '.join(shlex.quote(a) for a in argv)


def apply(commands):
    """Run the drain commands; ``[(argv, exit status, stderr)]``."""
    done = []
    for argv in commands:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            done.append((argv, proc.returncode, proc.stderr.strip()))
        except (OSError, subprocess.TimeoutExpired) as err:
            done.append((argv, 127, str(err)))
    return done
