"""The provenance part of the report: system, partitions, environments, topology, software, failures, and the
check families this system did not run with the reason."""

import hashlib
import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import catalog, compare, paths, plots, software, verdict
from .. import gpu as ibgpu
from .. import topology as ibtopology


LABEL_EMULATED = 'emulated hardware: not performance data'
LABEL_LOCAL = 'shared memory, one node: not an interconnect'

def collect(system, selected, current, problems, platforms_config=None):
    platforms, topologies, softwares, versions, failures, flaky, gpus = {}, {}, {}, set(), [], [], []
    gpudirect = []
    info = selected[-1]['session_info']
    for (partition, environ, name), (case, variables) in sorted(current.items()):
        where = f'session {case.get("session_uuid") or info.get("uuid", "?")}: test case {name} @{partition}+{environ}'
        if case.get('platform'):
            platforms[(partition, environ)] = _guarded(problems, where, 'platform', _platform, case['platform'])
        if name.startswith('RdmaTopology') and case.get('topology'):
            topologies[partition] = _guarded(problems, where, 'topology', _topology, case['topology'])
            if topologies[partition]:     # the node it was read on: the cases may have run on others
                topology, text = topologies[partition]
                topologies[partition] = ({**topology, 'read_on': _nodes(case)}, text)
        if case.get('gpu_links'):       # GpuHostDevice: each GPU's copy beside the PCIe link it trained to
            gpus += _guarded(problems, where, 'gpu_links', _gpu_links, (name, partition, _nodes(case),
                                                                       case['gpu_links'])) or []
        if name.split()[0] in ibgpu.GPUDIRECT_FAMILIES:     # catalog row 45: the GPU each side or rank used
            gpudirect += _guarded(problems, where, 'gpu_placement', _gpudirect, (partition, environ, name, case,
                                                                                 variables)) or []
        if case.get('software'):
            softwares[(partition, environ)] = _guarded(problems, where, 'software', _software, case['software'])
        if case.get('ibrepro_version'):
            versions.add(case['ibrepro_version'])
        if case.get('result') == 'fail':
            failures.append({'name': name, 'partition': partition, 'environ': environ,
                             'phase': case.get('fail_phase'), 'reason': case.get('fail_reason'),
                             'reason_line': verdict.reason_line(case.get('fail_reason')) or 'no reason recorded'})
        elif case.get('flaky'):
            flaky.append({'name': name, 'partition': partition, 'environ': environ, 'earlier': case['flaky']})
    platforms = {k: v for k, v in platforms.items() if v is not None}
    topologies = {k: v for k, v in topologies.items() if v is not None}
    softwares = {k: v for k, v in softwares.items() if v is not None}
    versions |= {s['ibrepro'] for s, _ in softwares.values() if isinstance(s.get('ibrepro'), str)}

    return {
        'platforms': platforms,
        'topologies': {p: t for p, (t, _) in topologies.items()},
        'topology_text': {p: text for p, (_, text) in topologies.items()},
        'software': {k: lines for k, (_, lines) in softwares.items()},
        'ibrepro_versions': sorted(versions),
        'reframe_version': info.get('version'),
        'failures': failures,
        'flaky': flaky,
        'gpu_links': sorted(gpus, key=lambda g: (g['node'], g['gpu'], g['case'])),
        'gpudirect': ibgpu.distance_costs(gpudirect),
        'gpu_figures': [{'node': node, 'image': plots.later('gpu_links', node, [g for g in gpus if g['node'] == node])}
                        for node in sorted({g['node'] for g in gpus})],
        'skipped': _skipped_families(system, current, platforms, platforms_config),
        'session_info': {k: info.get(k) for k in ('uuid', 'time_start', 'time_end', 'hostname', 'user',
                                                   'cmdline', 'version', 'workdir', 'num_cases',
                                                   'num_failures', 'num_skipped')},
        'config_files': [str(f) for f in info.get('config_files') or [] if f != '<builtin>'],
    }


def _guarded(problems, where, field, read, value):
    """``read(value)``, or None with a line in ``problems`` naming the session, test case and field: a stored
    field of the wrong shape loses that field, not the report."""
    try:
        return read(value)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as err:
        problems.append(f'{where}: {field} unreadable ({type(err).__name__}: {err}): left out')
        return None


def _gpu_links(stored):
    """The rows of the page's GPU table from a case's stored ``gpu_links`` (:func:`ibrepro.gpu.beside_links`), with
    the types it needs: GB/s (10^9 B/s, nvbandwidth's and the PCIe specification's unit) and the fraction."""
    name, partition, nodes, links = stored
    rows = []
    for gpu, link in sorted(links.items()):
        def number(key, scale=1.0):
            return None if link.get(key) is None else float(link[key]) * scale
        rows.append({'node': ','.join(nodes) or partition, 'case': name, 'gpu': str(gpu),
                     'name': str(link.get('name') or '-'), 'address': str(link.get('address') or '-'),
                     'value_GBps': number('value_MBps', 1e-3), 'link': str(link.get('link') or ''),
                     'limit_GBps': number('limit_MBps', 1e-3), 'fraction': number('fraction'),
                     'degraded': bool(link.get('degraded'))})
    return rows


def _gpudirect(stored):
    """A case of catalog row 45 as :func:`ibrepro.gpu.distance_costs` takes it, its stored placement checked:
    ``{side: {'address', 'distance', 'device'}}`` of strings."""
    partition, environ, name, case, variables = stored
    placement = case.get('gpu_placement') or {}
    for side, where in placement.items():
        if not isinstance(where, dict) or not all(isinstance(where.get(k), str) for k in ('address', 'distance')):
            raise TypeError(f'{side}: not a GPU address and distance ({where!r:.60})')
    params = {p: case.get(p) for p in case.get('reference_index') or []}
    return [(partition, environ, name.split()[0], params, variables, placement)]


def _platform(platform):
    """What the page shows of a stored platform description (SoftwareVersions), with the types it needs."""
    def strings(items):
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise TypeError(f'a list of strings expected, not {items!r:.60}')
        return items
    extras = platform.get('extras') or {}
    if not isinstance(extras, dict):
        raise TypeError(f'extras is not an object: {extras!r:.60}')
    environ_extras = platform.get('environ_extras') or {}
    if not isinstance(environ_extras, dict):
        raise TypeError(f'environ_extras is not an object: {environ_extras!r:.60}')
    return {'system_descr': str(platform.get('system_descr') or ''),
            'partition_descr': str(platform.get('partition_descr') or ''),
            'features': strings(platform.get('features') or []),
            'environ_features': strings(platform.get('environ_features') or []), 'extras': extras,
            'environ_extras': environ_extras}


def _nodes(case):
    """The nodes a test case's job ran on, as ReFrame recorded them ([] when it did not)."""
    nodes = case.get('job_nodelist')
    return [n for n in nodes if isinstance(n, str)] if isinstance(nodes, list) else []


def elsewhere(topo, case):
    """Why the link limit of ``case`` may not be its nodes' own: the topology was read on other nodes, or ''."""
    read_on, ran_on = (topo or {}).get('read_on') or [], _nodes(case)
    if not read_on or not ran_on or set(ran_on) & set(read_on):
        return ''
    return (f'limit from the topology read on {", ".join(read_on)}; this case ran on {", ".join(ran_on)} '
            '(RdmaTopology ran as a job of its own)')


def _topology(topology):
    """``(topology, text)``, read as the report reads it (the text and the link limit), or an error."""
    text = ibtopology.format_topology(topology) if topology.get('devices') is not None else str(topology)
    compare.limit_now(topology, False)
    compare.limit_now(topology, True)
    return topology, text


def _software(probe):
    return probe, software.summary(probe)


def _skipped_families(system, current, platforms, platforms_config):
    """Test cases the sessions skipped (their ``skip_reason``), and the catalog's check families absent from them,
    with why this system cannot run them."""
    skipped = [{'check': f'{name} @{partition}+{environ}',
                'experiments': ', '.join(f'#{t[3:]}' for t in sorted(case.get('tags') or ()) if t.startswith('exp')),
                'reason': case.get('skip_reason') or 'skipped (no reason recorded)'}
               for (partition, environ, name), (case, _) in sorted(current.items()) if case.get('result') == 'skip']
    return skipped + absent_families(system, current, platforms, platforms_config)


def recorded_configuration(system, platforms):
    """A ReFrame configuration (JSON data, nothing to import) of the system as its sessions recorded it:
    SoftwareVersions' platform descriptions, the partitions' and environments' features and extras.

    Never the configuration file a session names: importing it would run whatever a stored session points at.
    """
    partitions, environments = {}, {}
    for (partition, environ), platform in sorted(platforms.items()):
        part = partitions.setdefault(partition, {'name': partition, 'scheduler': 'local', 'launcher': 'local',
                                                 'environs': [], 'features': platform['features'],
                                                 'extras': platform['extras']})
        part['environs'].append(environ)
        # ReFrame selects environments per system, not per partition: one entry per name, features of all
        env = environments.setdefault(environ, {'name': environ, 'features': [], 'extras': {},
                                                'target_systems': [system]})
        env['features'] = list(dict.fromkeys(env['features'] + platform['environ_features']))
        env['extras'] = {**platform['environ_extras'], **env['extras']}
    if not partitions:
        return None
    return {'systems': [{'name': system, 'hostnames': ['.*'], 'partitions': list(partitions.values())}],
            'environments': list(environments.values())}


#: Run in a child: ReFrame's runtime (which the test variants need to say what they require) is one per process.
#: Prints the verdicts of the system (null without a configuration) and which cases reproduce each experiment.
_VERDICTS = ('import json, sys\nfrom ibrepro import catalog\n'
             'config, system, checks = sys.argv[1:4]\n'
             'verdicts = None\n'
             'if config:\n'
             '    verdicts = {name: whys for name, (_, whys)\n'
             '                in catalog.system_view(config, system, checks)[0].items()}\n'
             'found = {e: [(item, sorted(names)) for item, names in items] for e, items in '
             'catalog.reproducing(checks).items()}\n'
             'print(json.dumps({"verdicts": verdicts, "experiments": found}))')


def not_run_verdicts(system, config=None, platforms=None):
    """({test variant: [(why it cannot run, how to enable)]} on ``system``, {experiment id: [(item, [its test
    cases])]}), from the configuration given explicitly (``-C``) or the platforms the sessions recorded; the
    verdicts are None when neither says; CatalogError if it cannot be read.

    Without ``-C`` the answer is a function of the check files, this package, ReFrame, Python and the recorded
    configuration (JSON data): it is kept in the user's cache (:func:`_cached`), so a report does not load every
    check again (seconds) while none of them changed. A ``-C`` file is Python and may read anything: never cached."""
    recorded = None if config else recorded_configuration(system, platforms or {})
    key = None if config else _catalog_key(system, recorded)
    answer = _cached(key) if key else None
    if answer is None:
        answer = _catalog_child(system, config, recorded)
        if key:
            _keep(key, answer)
    return answer['verdicts'], {int(e): items for e, items in answer['experiments'].items()}


def _catalog_child(system, config, recorded):
    with tempfile.TemporaryDirectory(prefix='ibrepro-report-') as tmp:
        if recorded is not None:
            config = Path(tmp) / 'recorded.json'
            config.write_text(json.dumps(recorded))
        proc = subprocess.run([sys.executable, '-c', _VERDICTS, str(config or ''), system, str(paths.CHECKS_DIR)],
                              capture_output=True, text=True, timeout=600)
    if proc.returncode:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise catalog.CatalogError(lines[-1] if lines else f'exit {proc.returncode}')
    answer = json.loads(proc.stdout.splitlines()[-1])
    if not _well_formed(answer):
        raise catalog.CatalogError('the catalog printed an answer of another shape')
    return answer


def _catalog_key(system, recorded):
    """A digest of everything the catalog's answer depends on, or None when a file of it cannot be read."""
    digest = hashlib.sha256()
    digest.update(json.dumps([sys.version, _reframe_version(), system, recorded], sort_keys=True).encode())
    try:
        # the check files, the package they import, and the embedded default the tags are read under
        files = [*sorted(Path(paths.CHECKS_DIR).rglob('*')), *sorted(Path(catalog.__file__).parent.rglob('*')),
                 paths.CONFIGS_DIR / 'local.py']
        for path in files:
            if path.suffix in ('.py', '.yaml', '.yml', '.json') and '__pycache__' not in path.parts:
                digest.update(f'{path}\0{path.stat().st_size}\0'.encode())
                digest.update(path.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _reframe_version():
    try:
        return importlib.metadata.version('reframe-hpc')
    except importlib.metadata.PackageNotFoundError:
        return None


def _cache_file(key):
    return paths.cache_home() / f'catalog-{key}.json'


def _cached(key):
    """The kept answer for ``key``, or None: absent, not ours to trust (:mod:`ibrepro.trust`), or not of its shape."""
    from .. import trust

    path = _cache_file(key)
    try:
        trust.check(path, kind='file', root=path.parent, name='XDG_CACHE_HOME')
        answer = json.loads(path.read_text(encoding='utf-8'))
    except (OSError, ValueError):       # trust.Untrusted is a ValueError, as is a JSON or decoding error
        return None
    return answer if _well_formed(answer) else None


def _keep(key, answer):
    """Keep ``answer`` for ``key`` in a private cache directory; a cache that cannot be written is only slower."""
    from .. import trust

    path = _cache_file(key)
    try:
        trust.make_dir(path.parent, root=path.parent, name='XDG_CACHE_HOME')
        trust.write_file(path, json.dumps(answer), root=path.parent, name='XDG_CACHE_HOME')
    except (OSError, ValueError):
        pass


def _well_formed(answer):
    """Whether ``answer`` has the catalog child's shape (a kept file is data someone may have changed)."""
    def pairs(value, second):
        return isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                               and second(p[1]) for p in value)

    def strings(value):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)

    if not isinstance(answer, dict) or set(answer) != {'verdicts', 'experiments'}:
        return False
    verdicts, found = answer['verdicts'], answer['experiments']
    return ((verdicts is None or isinstance(verdicts, dict)
             and all(isinstance(k, str) and pairs(v, lambda how: isinstance(how, str)) for k, v in verdicts.items()))
            and isinstance(found, dict)
            and all(k.isdigit() and pairs(v, strings) for k, v in found.items()))


def absent_families(system, current, platforms, platforms_config):
    present = {name for _, _, name in current}
    try:
        verdicts, found = not_run_verdicts(system, platforms_config, platforms)
    except (catalog.CatalogError, subprocess.SubprocessError, OSError, ValueError, IndexError) as err:
        return [{'check': '-', 'experiments': '', 'reason': f'could not evaluate the catalog: {err}'}]

    rows = {}
    for exp in catalog.experiments().values():
        for check, names in found.get(exp['id'], []):
            if present & set(names):
                continue
            row = rows.setdefault(check, {'check': check, 'experiments': [], 'reason': ''})
            row['experiments'].append(exp['id'])
            if verdicts is None:
                row['reason'] = ('not run in the selected sessions (they recorded no platform description: run the '
                                 'SoftwareVersions check, or give the configuration with -C)')
                continue
            whys = list(dict.fromkeys(tuple(w) for name in names for w in verdicts.get(name, ())))
            row['reason'] = ('; '.join(f'{why} (to enable: {how})' if how else why for why, how in whys[:3])
                             or 'runnable here, but not run in the selected sessions')
    for row in rows.values():
        row['experiments'] = ', '.join(f'#{e}' for e in row['experiments'])
    return list(rows.values())


def _int(value, default):
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def labels_of(system, platforms):
    labels = []
    extras = [p['extras'] for p in platforms.values()]
    if any(e.get('emulated') for e in extras):
        labels.append(LABEL_EMULATED)
    if system == 'local' and all(_int(e.get('nodes', 1), 1) == 1 for e in extras):
        labels.append(LABEL_LOCAL)
    # several nodes without RDMA (e.g. the CI cluster's namespace nodes): say what carries the messages
    labels += sorted({f'{e["interconnect"]}: not an RDMA network' for e in extras
                      if _int(e.get('nodes', 1), 1) > 1 and e.get('interconnect') and not e.get('rdma_devices')
                      and not e.get('emulated') and not e.get('simulated')})
    return labels
