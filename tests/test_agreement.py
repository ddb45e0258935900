"""scripts/agreement.py: the live ``ibrepro nightly``'s chart lines read back, and the offline replay's states of the
same nights from the ledger (the measurement itself needs the campaign's results database: the protocol's)."""

import sys

from conftest import ROOT
from ibrepro import ledger, paths

sys.path.insert(0, str(ROOT / 'scripts'))
import agreement  # noqa: E402

PP = 'IMBPointToPoint %benchmark=PingPong %layout=1x2'


def test_the_live_lines_are_read_per_chart():
    text = (f'== ibrepro nightly n: the charts across nights\ncharts of local: 3 night(s) since the baseline\n'
            f'ok {PP} @default+impi | bandwidth: tonight z -0.27, evidence 3% of an alarm (catches 9.0% / - / -)\n'
            f'excluded {PP} @default+impi | latency: the control says the machine was in its slow state\n'
            f'REGRESSION {PP} @default+impi | protocol: since n (one night beyond the limit), +30.0%\n'
            f'change {PP} @default+impi | protocol: Otava finds a change at night n\n')
    assert agreement.live_states(text) == {(PP, 'bandwidth'): ('ok', -0.27, 3),
                                           (PP, 'latency'): ('excluded', None, None),
                                           (PP, 'protocol'): ('alarm', None, None)}


def test_the_offline_states_cover_every_chart_of_each_night():
    nights = ledger.read(paths.REFERENCE_DATA / 'ledger' / 'vm-impi-1x2.jsonl')
    states, alarms = agreement.offline_states(nights, 't0001', 30, 5, series=20)
    assert [night for night, _ in states] == [f't{n:04d}' for n in range(31, 36)]
    for _, charts_ in states:
        assert len(charts_) == 6
        assert all(state in ('ok', 'excluded', 'alarm') for state, _, _ in charts_.values())
        assert all(z is not None and s is not None for state, z, s in charts_.values() if state == 'ok')
