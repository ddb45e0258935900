"""Bringing your own benchmarks (README: "Bring your own benchmarks") and partial installs.

The prefixes here are laid out like real installs and hold real programs only: the IMB of the impi-rt wheel and
our own benchmarks (no OSU or NPB sources exist on this machine's registries). Where a test needs OSU or NPB
*names* to select on (a partial install), it uses a dry run: the programs are looked for, never run.
"""

import os
import re
import subprocess

import pytest

from conftest import IMPI, ROOT, SHORT_IMB, needs_impi, output
from ibrepro import rfmconfig

BENCH = ROOT / 'build' / 'bench' / 'bin'
needs_bench = pytest.mark.skipif(not (BENCH / 'ibrepro_bilat').exists(), reason='run `make setup` first')


def install(prefix, layout):
    """``{relative path: real program}``: symlinks laid out like an install under ``prefix``."""
    for rel, program in layout.items():
        path = prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(program, path)
    return prefix


@needs_impi
@needs_bench
def test_prefixes_are_searched_like_an_install_with_omb_5_and_7_layouts(tmp_path):
    imb = install(tmp_path / 'imb-2021.8', {'bin/IMB-MPI1': IMPI})
    omb7 = install(tmp_path / 'omb-7', {'libexec/osu-micro-benchmarks/mpi/pt2pt/standard/ibrepro_bilat':
                                        BENCH / 'ibrepro_bilat'})
    omb5 = install(tmp_path / 'omb-5', {'libexec/osu-micro-benchmarks/mpi/collective/ibrepro_bibw':
                                        BENCH / 'ibrepro_bibw'})
    env = rfmconfig.system_environment(extra_prefixes=[imb, omb7, omb5])
    assert {'IMB-MPI1', 'ibrepro_bilat', 'ibrepro_bibw'} <= set(env['extras']['programs'])
    assert {'imb', 'ibrepro-bench'} <= set(env['features'])
    path = dict(env['env_vars'])['PATH']
    for d in (imb / 'bin', omb7 / 'libexec/osu-micro-benchmarks/mpi/pt2pt/standard',
              omb5 / 'libexec/osu-micro-benchmarks/mpi/collective'):
        assert f'"{d}"' in path


@needs_impi
@pytest.mark.integration
def test_your_own_imb_runs_in_the_system_environment(reframe, tmp_path):
    """The README's recipe: IBREPRO_PREFIXES names the install, the MPI it was built with is first on PATH."""
    prefix = install(tmp_path / 'my-imb', {'bin/IMB-MPI1': IMPI})
    env = {'IBREPRO_PREFIXES': str(prefix), 'PATH': f'{IMPI.parent}{os.pathsep}{reframe.env["PATH"]}',
           'LD_LIBRARY_PATH': f'{IMPI.parents[1] / "lib"}:{IMPI.parents[1] / "lib" / "libfabric"}',
           'FI_PROVIDER_PATH': str(IMPI.parents[1] / 'lib' / 'libfabric' / 'prov')}
    proc = reframe('-r', '-p', 'system', '-n', 'IMBPointToPoint%benchmark=PingPong%layout=1x2', *SHORT_IMB, env=env)
    assert proc.returncode == 0, output(proc)
    assert '@local:default+system' in proc.stdout and 'Ran 1/1 test case' in proc.stdout, output(proc)


# -- partial installs: what is missing is skipped with the reason, never failed ---------------------------------

PARTIAL_CONFIG = '''
from ibrepro import rfmconfig
system = rfmconfig.local_system()
system.update(name='partial', descr='a two-node cluster whose environment has a partial OSU and NPB install')
part = system['partitions'][0]
part.update(features=['mpi', 'ib', *rfmconfig.layout_features(2, 8)], environs=['site'])
part['extras'] = {{**part['extras'], 'nodes': 2, 'cores_per_node': 8}}
env = rfmconfig.prefix_environment('site', {prefix!r}, descr='OSU pt2pt only, NPB IS and FT only',
                                   features=['openmpi'])
site_configuration = rfmconfig.site_configuration(systems=[system], environments=[env])
'''


@needs_bench
def test_a_partial_install_skips_the_programs_it_lacks_with_the_reason(reframe, tmp_path):
    # An install with OSU's point-to-point directory only and NPB built for IS and FT only. The names are what
    # is tested (the programs are looked for in a dry run, never run): real binaries of ours stand under them.
    real = str(BENCH / 'ibrepro_bilat')
    prefix = install(tmp_path / 'site', {
        **{f'libexec/osu-micro-benchmarks/mpi/pt2pt/standard/{p}': real for p in ('osu_latency', 'osu_bw')},
        'bin/is.B.x': real, 'bin/ft.B.x': real})
    config = tmp_path / 'partial.py'
    config.write_text(PARTIAL_CONFIG.format(prefix=str(prefix)))
    proc = reframe('--dry-run', '--nocolor', '--system', 'partial', '-n', 'OSULatency',
                   '-n', 'OSUCollective%case=osu_bcast-4x1', '-n', 'NPB%case=(is|ft|cg).B-2x1', config=str(config))
    assert proc.returncode == 0, output(proc)              # skipped, not failed
    skipped = dict(re.findall(r'^\[\s*SKIP\s*\] \(\s*\d+/\d+\) (.+?) /[0-9a-f]{8} @\S+ \[(.*)\]$', proc.stdout, re.M))
    assert skipped == {'NPB %case=cg.B-2x1': "'cg.B.x' is not installed in environment 'site' (its npb programs: "
                                             "ft.B.x, is.B.x)"}, proc.stdout
    assert re.search(r'^\[\s*OK\s*\] .*NPB %case=is\.B-2x1', proc.stdout, re.M), proc.stdout
    assert re.search(r'^\[\s*OK\s*\] .*OSULatency ', proc.stdout, re.M), proc.stdout
    # a collective needs 4 nodes here anyway: no case (the catalog says why), nothing to skip
    assert not re.search(r'^\[.*osu_bcast-4x1', proc.stdout, re.M)


@needs_bench
def test_a_partial_osu_install_without_collectives_skips_them(reframe, tmp_path):
    real = str(BENCH / 'ibrepro_bilat')
    prefix = install(tmp_path / 'site', {'libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency': real})
    config = tmp_path / 'partial.py'
    config.write_text(PARTIAL_CONFIG.format(prefix=str(prefix))
                      .replace('layout_features(2, 8)', 'layout_features(4, 8)').replace("'nodes': 2", "'nodes': 4"))
    proc = reframe('--dry-run', '--nocolor', '--system', 'partial', '-n', 'OSUCollective%case=osu_bcast-4x1',
                   config=str(config))
    assert proc.returncode == 0, output(proc)
    assert "'osu_bcast' is not installed in environment 'site' (its osu programs: osu_latency)" in proc.stdout, \
        output(proc)


MODULES_CONFIG = '''
from ibrepro import rfmconfig
system = rfmconfig.local_system()
system.update(name='omb7mod', descr='OMB 7.4 from a module only', modules_system='nomod')
part = system['partitions'][0]
part.update(features=['mpi', 'ib', *rfmconfig.layout_features(2, 8)], environs=['site'])
part['extras'] = {**part['extras'], 'nodes': 2, 'cores_per_node': 8}
env = rfmconfig.site_environment('site', descr='OMB 7.4 from a module', mpi='openmpi', tools=['osu'],
                                 modules=['osu-micro-benchmarks/7.4'])
site_configuration = rfmconfig.site_configuration(systems=[system], environments=[env])
'''


@needs_bench
def test_omb_7_from_a_module_that_puts_omb_5s_directories_on_path_is_found(reframe, tmp_path):
    """Spack's osu-micro-benchmarks module prepends libexec/osu-micro-benchmarks/mpi/{pt2pt,collective,...}: OMB 5's
    directories. The job script's own line, run by bash with that PATH, finds OMB 7's programs one level down."""
    config = tmp_path / 'modules.py'
    config.write_text(MODULES_CONFIG)
    proc = reframe('--dry-run', '--system', 'omb7mod', '-n', 'OSULatency$', config=str(config))
    assert proc.returncode == 0, output(proc)
    (script,) = [os.path.join(d, 'rfm_job.sh') for d, _, files in os.walk(reframe.home) if 'rfm_job.sh' in files]
    lines = open(script).read().splitlines()
    launch = next(i for i, line in enumerate(lines) if line.endswith(' osu_latency'))
    real = str(BENCH / 'ibrepro_bilat')
    omb = install(tmp_path / 'omb 7.4', {'libexec/osu-micro-benchmarks/mpi/pt2pt/standard/osu_latency': real,
                                         'libexec/osu-micro-benchmarks/mpi/collective/blocking/osu_bcast': real})
    (omb / 'libexec/osu-micro-benchmarks/mpi/startup').mkdir()
    spack_module_path = ':'.join(str(omb / 'libexec/osu-micro-benchmarks/mpi' / d) for d in ('pt2pt', 'collective',
                                                                                              'startup'))
    found = subprocess.run(['bash', '-c', '\n'.join(lines[1:launch]) + '\ncommand -v osu_latency osu_bcast'],
                           env={'PATH': f'/usr/bin:/bin:{spack_module_path}'}, capture_output=True, text=True)
    assert found.stdout.split('\n')[:2] == [f'{omb}/libexec/osu-micro-benchmarks/mpi/pt2pt/standard/osu_latency',
                                            f'{omb}/libexec/osu-micro-benchmarks/mpi/collective/blocking/osu_bcast'], \
        found
