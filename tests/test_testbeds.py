"""configs/testbeds.py: the papers' testbeds as partitions, judged against the papers' own numbers."""

import json
import runpy

import yaml

from conftest import ROOT, output
from ibrepro import paths, references

GENERATOR = runpy.run_path(str(ROOT / 'scripts' / 'testbed_references.py'))
SYSTEM_DIR = paths.system_references_dir('testbeds')


def test_committed_references_are_what_the_generator_writes():
    refs, provenance = GENERATOR['build']()
    assert yaml.safe_load((SYSTEM_DIR / 'references.yaml').read_text()) == refs
    assert yaml.safe_load((SYSTEM_DIR / 'provenance.yaml').read_text()) == provenance


def test_every_reference_value_is_a_number_the_paper_states():
    for check, params, partition, environ, variable, entry_id in GENERATOR['MAPPING']:
        entry = references.entry(entry_id)
        node = yaml.safe_load((SYSTEM_DIR / 'references.yaml').read_text())[check][f'testbeds:{partition}']
        for value in [environ, *params.values()]:
            node = node[value]
        value, lower, upper, unit = node[variable]
        # 002's MB is 2^20 bytes: its numbers enter as MB/s of 10^6 bytes (value_si)
        scale = 1000 if entry['unit_si'] == 'GB/s' else 1
        assert value == entry['value_si'] * scale, entry_id
        assert unit in ('us', 'MB/s', 's') and (lower is None) != (upper is None)
        # the entry is about this experiment's check: the metric and configuration fit
        assert entry['kind'] == 'result'
        assert ('bandwidth' in entry['metric']) == variable.startswith('bw')


def test_checks_on_the_example_cluster_carry_the_papers_references(reframe):
    proc = reframe('--describe', '--system', 'testbeds:connectx-qdr', '-n', 'OSULatency',
                   config='configs/testbeds.py')
    assert proc.returncode == 0, output(proc)
    (case,) = json.loads(proc.stdout[proc.stdout.index('['):])
    assert case['reference']['testbeds:connectx-qdr']['mvapich2']['lat_1'] == [1.06, None, 0.25, 'us']
