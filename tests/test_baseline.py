"""ibrepro baseline: references from the last nights, not the last sessions (a GitLab night stores one session per
test case). The history is scripts/bench_report.py's synthetic database (the stored report of a real short
`make run`, one session a day), its sessions grouped into nights through their ``nightly`` extra."""

import json
import sqlite3

from ibrepro import results
from test_report import _script

bench = _script('bench_report')


def _night_of(db, groups):
    """Give the stored sessions, oldest first, the ``nightly`` extras ``groups`` lists (None: none), and make the
    last one a confirmation of its night."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute('SELECT uuid, json_blob FROM sessions ORDER BY session_start_unix').fetchall()
        assert len(rows) == len(groups)
        for (uuid, blob), night in zip(rows, groups):
            report = json.loads(blob)
            report['session_info']['nightly'] = night
            if uuid == rows[-1][0]:
                report['session_info']['confirms'] = night
            conn.execute('UPDATE sessions SET json_blob = ? WHERE uuid = ?', (json.dumps(report), uuid))
    conn.close()
    return [uuid for uuid, _ in rows]


def test_the_last_nights_are_whole_nights_and_no_confirmation(tmp_path):
    db = tmp_path / 'results.db'
    bench.make_db(db, 8, 20)
    uuids = _night_of(db, [None, 'n1', 'n1', 'n1', 'n2', 'n3', 'n3', 'n3'])
    got = [r['session_info']['uuid'] for r in results.last_nights(2, db)]
    assert got == uuids[4:7]                     # n2, and n3 without its confirmation
    assert [r['session_info']['uuid'] for r in results.last_nights(3, db)] == uuids[1:7]
    assert [r['session_info']['uuid'] for r in results.last_nights(9, db)] == uuids[:7]
    assert results.last_nights(0, db) == []
