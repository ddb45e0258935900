"""nvbandwidth 0.8 outputs of a real NVIDIA H200 on PCI Express 5.0 x16 (tests/fixtures/nvbandwidth/0.8-h200, its
MANIFEST): every measured cell a table of its own, GB/s as MB/s, ns as us, waived test cases kept by count or name."""

import re
from pathlib import Path

import pytest

from ibrepro import limits, parsers

H200 = Path(__file__).parent / 'fixtures' / 'nvbandwidth' / '0.8-h200'


def _values(name):
    parsed = parsers.parse_file(H200 / name)
    assert parsed.tool == 'nvbandwidth'      # detected, not told
    return parsed, {t.benchmark: dict((v, x) for v, x, _ in t.metric_values()) for t in parsed.tables}


def test_the_text_output_reads_to_the_manifests_values():
    parsed, values = _values('nvbandwidth-h200.txt')
    assert parsed.version == 'v0.8' and parsed.meta['devices'] == ['0: NVIDIA H200 (00000000:00:06)']
    assert parsed.meta['driver'] == '580.159.04' and parsed.meta['cuda_runtime'] == '13000'
    # the MANIFEST's facts, nvbandwidth's GB/s (10^9 B/s) as ibrepro's MB/s
    assert values['host_to_device_memcpy_ce'] == {'bw': 55480.0}
    assert values['device_to_host_memcpy_ce'] == {'bw': 55330.0}
    assert values['host_to_device_bidirectional_memcpy_ce'] == {'bw': 50930.0}
    assert values['host_to_device_memcpy_sm'] == {'bw': 51390.0}
    assert values['device_to_host_memcpy_sm'] == {'bw': 52650.0}
    assert values['host_device_latency_sm'] == {'lat': 1.18536}       # 1185.36 ns
    assert values['device_local_copy'] == {'bw': 2092550.0}
    # one GPU: the device-to-device cases are waived (the text names none of them)
    assert len(parsed.tables) == 18 and len(parsed.meta['waived']) == 17
    assert {(t.params['row'], t.params['column']) for t in parsed.tables} == {(0, 0)}


def test_the_json_output_reads_to_its_own_run():
    parsed, values = _values('nvbandwidth-h200.json')
    assert values['host_to_device_memcpy_ce'] == {'bw': 55503.1} and values['device_to_host_memcpy_ce'] == \
        {'bw': 55372.5}
    assert values['host_device_latency_sm'] == {'lat': 1.18772}
    assert 'device_to_device_memcpy_read_ce' in parsed.meta['waived'] and len(parsed.tables) == 18


def test_a_shorter_run_reads_its_two_cases():
    parsed, values = _values('nvbandwidth-h200-b64-i10.txt')
    assert values == {'host_to_device_memcpy_ce': {'bw': 55380.0}, 'device_to_host_memcpy_ce': {'bw': 55220.0}}
    assert parsed.table('host_to_device_memcpy_ce', row=0, column=0).metrics == {'bw': 'bw_mbps'}


def test_host_to_device_against_the_links_limit():
    # the issue's figure: 55.48 GB/s is 88 % of PCIe 5.0 x16's 63.0 GB/s per direction (128b/130b)
    _, values = _values('nvbandwidth-h200.txt')
    link = limits.pcie(5, 16).per_direction / 1e6        # MB/s
    assert round(link / 1000, 1) == 63.0
    assert 0.875 < values['host_to_device_memcpy_ce']['bw'] / link < 0.885


def test_an_output_cut_inside_a_case_is_refused_naming_it():
    text = (H200 / 'nvbandwidth-h200.txt').read_text()
    cut = text[:text.index('SUM device_to_host_memcpy_ce')]
    with pytest.raises(parsers.ParseError, match='device_to_host_memcpy_ce: its matrix is incomplete'):
        parsers.parse_text(cut, tool='nvbandwidth')


def test_a_run_that_measured_nothing_is_refused():
    text = (H200 / 'nvbandwidth-h200.txt').read_text()
    head = text[:text.index('Running ')]
    with pytest.raises(parsers.ParseError, match='nvbandwidth measured no test case'):
        parsers.parse_text(head + 'Waived: \nWaived: \n', tool='nvbandwidth')


def test_other_tools_outputs_are_not_taken_for_nvbandwidth():
    fixtures = Path(__file__).parent / 'fixtures'
    for path in [*sorted((fixtures / 'imb').rglob('*.txt'))[:3], *sorted((fixtures / 'osu').rglob('*.txt'))[:3]]:
        assert parsers.detect_tool(path.read_text(errors='replace')) != 'nvbandwidth', path


@pytest.mark.parametrize('doc, says', [
    ({'testcases': 7}, 'testcases is not a list of test cases'),
    ({'testcases': [{'name': 'h2d', 'status': 'Passed', 'bandwidth_matrix': 5,
                     'bandwidth_description': 'x (GB/s)'}]}, 'h2d: bandwidth_matrix is not a list of rows'),
    ({'testcases': [{'name': 'h2d', 'status': 'Passed', 'bandwidth_matrix': [['$(reboot)']],
                     'bandwidth_description': 'x (GB/s)'}]}, "h2d: cell (0, 0) is '$(reboot)', not a number"),
])
def test_json_of_the_wrong_shape_is_refused_naming_it(doc, says):
    import json
    with pytest.raises(parsers.ParseError, match=re.escape(says)):
        parsers.parse_text(json.dumps({'nvbandwidth': doc}), tool='nvbandwidth')
