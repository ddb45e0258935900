"""ibrepro.limits against the papers' own statements about bus and link speeds (seeds 001-003)."""

import json

import pytest

from ibrepro import cli, limits
from ibrepro.limits import MiB, bound, fraction_of_limit, parse_spec


def rate(spec, direction='uni'):
    return bound(spec).value(direction)


# -- host buses --------------------------------------------------------------------------------

def test_pcie_gen1_lane_and_x8_as_the_papers_state():
    # 003 Sec. II.B: 250 MB/s per lane per direction; x8: 2 GB/s per direction, 4 GB/s total
    assert rate('pcie:gen1:x1') == pytest.approx(250e6)
    assert rate('pcie:gen1:x8') == pytest.approx(2e9)
    assert rate('pcie:gen1:x8', 'bi') == pytest.approx(4e9)
    assert parse_spec('pcie:gen1:x1').signalling == pytest.approx(2.5e9)   # 001 Sec. 2


def test_pcie_gen2_x8_is_4GBps_per_direction():
    # 001 Sec. 2: "allowing an 8x PCIe 2.0 slot to provide 4GB/sec of bandwidth in each direction"
    assert rate('pcie:gen2:x8') == pytest.approx(4e9)
    assert parse_spec('pcie:gen2:x8').encoding == '8b/10b'


@pytest.mark.parametrize('gen, lane_MBps', [(3, 8000 * 128 / 130 / 8), (4, 16000 * 128 / 130 / 8),
                                            (5, 32000 * 128 / 130 / 8), (6, 64000 * 242 / 256 / 8)])
def test_pcie_later_generations_remove_their_encoding(gen, lane_MBps):
    assert rate(f'pcie:gen{gen}:x16') == pytest.approx(16 * lane_MBps * 1e6)
    assert rate(f'pcie:gen{gen}:x16', 'bi') == pytest.approx(32 * lane_MBps * 1e6)


def test_pcix_is_a_shared_half_duplex_bus():
    c = parse_spec('pcix:64:133')
    assert c.half_duplex
    # 8 bytes x 133.33 MHz; both directions together share it
    assert c.per_direction == pytest.approx(8 * 400e6 / 3)
    assert c.both_directions == c.per_direction
    # 003: "around 1 GB/s"; 002 Sec. 4.7: 1024 MB/s (MB = 2^20) for PCI-X vs 512 for PCI
    assert c.both_directions / MiB == pytest.approx(1024, rel=0.01)
    assert rate('pci:64:66', 'bi') / MiB == pytest.approx(512, rel=0.01)
    assert rate('pci:32:33') == pytest.approx(400e6 / 3)
    assert rate('pcix:64:533') == pytest.approx(4 * rate('pcix:64:133'))


# -- networks ----------------------------------------------------------------------------------

def test_infiniband_4x_sdr_ddr_qdr_as_the_papers_state():
    sdr, ddr, qdr = parse_spec('ib:sdr:4x'), parse_spec('ib:ddr:4x'), parse_spec('ib:qdr:4x')
    # 003 Sec. I: 1 GB/s in each link direction, 2 GB/s aggregate per port; 001: 10 Gb/s signalling
    assert (sdr.per_direction, sdr.both_directions, sdr.signalling) == pytest.approx((1e9, 2e9, 10e9))
    # 001 Sec. 4: 4x DDR "2.5 GB/s raw, 2 GB/s data"
    assert (ddr.signalling / 8, ddr.per_direction) == pytest.approx((2.5e9, 2e9))
    # 001 Sec. 3.1: 4X QDR 40 Gb/s signalling, 32 Gb/s data
    assert (qdr.signalling, qdr.per_direction * 8) == pytest.approx((40e9, 32e9))
    # 003 Sec. I: two ports "up to 4 GB/s combined theoretical bandwidth"
    assert rate('ib:sdr:4x:2', 'bi') == pytest.approx(4e9)
    assert parse_spec('ib:sdr:12x').signalling == pytest.approx(30e9)


@pytest.mark.parametrize('speed, data_Gbps_4x', [('fdr10', 40), ('fdr', 4 * 14.0625 * 64 / 66),
                                                 ('edr', 100), ('hdr', 200), ('ndr', 400),
                                                 ('xdr', 800)])
def test_infiniband_later_rates_give_the_ibta_data_rates(speed, data_Gbps_4x):
    assert limits.to_Gbps(rate(f'ib:{speed}:4x')) == pytest.approx(data_Gbps_4x)
    assert limits.to_Gbps(rate(f'ib:{speed}:1x')) == pytest.approx(data_Gbps_4x / 4)


def test_ethernet_myrinet_quadrics():
    assert rate('roce:100g') == pytest.approx(12.5e9)
    assert rate('eth:25g:2', 'bi') == pytest.approx(4 * 25e9 / 8)
    assert rate('myrinet:2000') == pytest.approx(2e9 / 8)          # 002 Sec. 2.2: 2 Gbps
    assert rate('quadrics:elan3') == pytest.approx(400 * MiB)      # 002 Sec. 2.3: 400 MB/s


# -- the bound of a configuration ---------------------------------------------------------------

def test_pcix_with_two_sdr_ports_is_bus_bound():
    b = bound('pcix:64:133 ib:sdr:4x:2')
    assert b.per_direction == b.both_directions == pytest.approx(1066.67e6, rel=1e-5)
    assert b.bottleneck('uni') == b.bottleneck('bi') == ('pcix:64:133',)


def test_pcie_gen1_x8_with_two_sdr_ports_is_a_tie():
    b = bound('pcie:gen1:x8+ib:sdr:4x:2')
    assert (b.per_direction, b.both_directions) == pytest.approx((2e9, 4e9))
    assert b.bottleneck_per_direction == ('pcie:gen1:x8', 'ib:sdr:4x:2')


def test_001_configurations():
    # DDR-1.1: "limited by the PCIe 1.1 8x bus" -- 2 GB/s, equal to 4x DDR data
    assert bound('pcie:gen1:x8 ib:ddr:4x').per_direction == pytest.approx(2e9)
    # QDR-2.0: the link (4 GB/s) equals the PCIe 2.0 x8 bus (4 GB/s)
    assert bound('pcie:gen2:x8 ib:qdr:4x').bottleneck() == ('pcie:gen2:x8', 'ib:qdr:4x')
    assert bound('pcie:gen3:x16 ib:hdr:4x').bottleneck() == ('pcie:gen3:x16',)
    assert bound('pcie:gen5:x16 ib:ndr:4x').bottleneck() == ('ib:ndr:4x',)


def test_fraction_of_limit_uses_si_megabytes():
    # 003 Fig. 6: 968 MB/s unidirectional, 1916 MB/s bidirectional with one 4x SDR port on PCIe x8
    assert fraction_of_limit(968, 'pcie:gen1:x8 ib:sdr:4x', 'uni') == pytest.approx(0.968)
    assert fraction_of_limit(1916, ['pcie:gen1:x8', 'ib:sdr:4x'], 'bi') == pytest.approx(0.958)
    # PCI-X: 946 MB/s bidirectional is 89 % of the shared bus
    assert fraction_of_limit(946, bound('pcix:64:133 ib:sdr:4x'), 'both') == pytest.approx(0.8869, abs=1e-4)
    with pytest.raises(ValueError, match='unknown direction'):
        fraction_of_limit(1, 'ib:sdr:4x', 'sideways')


def test_effective_needs_an_explicit_efficiency():
    eff = limits.pcie_tlp_efficiency(max_payload=256, header_bytes=16, gen=1)
    assert eff == pytest.approx(256 / 280)
    assert bound('pcie:gen1:x8').effective(eff) == pytest.approx(2e9 * 256 / 280)
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match='payload efficiency'):
            bound('pcie:gen1:x8').effective(bad)
    with pytest.raises(ValueError, match='only non-FLIT generations 1-5'):
        limits.pcie_tlp_efficiency(gen=6)


def test_units():
    assert limits.to_MBps(2e9) == 2000
    assert limits.to_MiBps(MiB) == 1
    assert limits.to_Gbps(1e9) == 8
    assert limits.convert(1e9, 'GB/s') == 1
    with pytest.raises(ValueError, match='unknown unit'):
        limits.convert(1, 'furlongs')


@pytest.mark.parametrize('spec, reason', [
    ('pcie:gen7:x8', 'gen1 .. gen6'),
    ('pcie:gen3:x3', 'x1, x2, x4'),
    ('PCIe:3', 'expected pcie:gen<N>:x<lanes>'),
    ('pcix:64:150', '66, 100, 133'),
    ('pci:16:33', '32 or 64'),
    ('ib:sdr:3x', '1x, 2x, 4x'),
    ('ib:gdr:4x', 'sdr, ddr, qdr'),
    ('ib:sdr:4x:0', 'positive integer'),
    ('ib:sdr:4x:two', 'must be an integer'),
    ('eth:33g', '1g, 2.5g'),
    ('roce:fast', 'expected roce:<Gb/s>g'),
    ('usb:3', 'unknown kind'),
    ('myrinet:xp', 'Myrinet-2000'),
])
def test_bad_specs_say_why(spec, reason):
    with pytest.raises(limits.SpecError) as err:
        parse_spec(spec)
    assert spec in str(err.value) and reason in str(err.value)


def test_specs_are_case_insensitive_and_canonical():
    assert parse_spec(' IB:QDR:4X:2 ').spec == 'ib:qdr:4x:2'
    assert parse_spec('pcie:2:8').spec == 'pcie:gen2:x8'
    assert limits.Component.from_dict(parse_spec('ib:hdr:2x').to_dict()) == parse_spec('ib:hdr:2x')


# -- the papers' statements --------------------------------------------------------------------

def test_every_paper_statement_matches_the_computed_value():
    rows = limits.check_statements()
    assert len(rows) >= 25
    assert {r['seed'][:3] for r in rows} == {'001', '002', '003'}
    for r in rows:
        # "around 1 GB/s" (PCI-X) and 002's rounded 1024/512 MB/s are the only inexact ones
        tolerance = 0.07 if 'around' in r['quote'] or r['unit'] == 'MiB/s' else 1e-9
        assert r['ratio'] == pytest.approx(1, abs=tolerance), r


def test_statement_file_errors_name_the_file(tmp_path):
    bad = tmp_path / 'statements.yaml'
    bad.write_text('- seed: 003\n  quote: x\n')
    with pytest.raises(ValueError, match=r'statements.yaml: statement 1: missing quantity'):
        limits.paper_statements(bad)
    with pytest.raises(ValueError, match='cannot read'):
        limits.paper_statements(tmp_path / 'absent.yaml')


# -- command line ------------------------------------------------------------------------------

def test_cli_table_and_json(capsys):
    assert cli.main(['limits', 'pcix:64:133', 'ib:sdr:4x:2']) == 0
    out = capsys.readouterr().out
    assert 'bound' in out and '1,066.7 MB/s [pcix:64:133]' in out and '(shared)' in out

    assert cli.main(['limits', 'pcie:gen1:x8', 'ib:sdr:4x:2', '--json', '--payload-efficiency', '0.9']) == 0
    data = json.loads(capsys.readouterr().out)
    assert data['per_direction_MBps'] == pytest.approx(2000)
    assert data['bottleneck_per_direction'] == ['pcie:gen1:x8', 'ib:sdr:4x:2']
    assert data['effective_per_direction'] == pytest.approx(1.8e9)


def test_cli_bad_spec_exits_2(capsys):
    assert cli.main(['limits', 'pcie:gen9:x8']) == 2
    assert "bad limit spec 'pcie:gen9:x8'" in capsys.readouterr().err


def test_cli_papers(capsys):
    assert cli.main(['limits', '--papers']) == 0
    out = capsys.readouterr().out
    assert '003_f22261506c1d4362.txt Sec. II.B' in out
    assert '"Thus, a 4X QDR InfiniBand link has a signaling rate of 40Gb/sec, or 32Gb/sec data rate."' in out
    assert cli.main(['limits', '--papers', '--json']) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(limits.paper_statements())
