"""The HTML report in a real browser: headless Chromium renders its figures, offline.

Needs Debian's `chromium` (`apt-get install -y chromium`); skipped, saying so, where it is not installed.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import ReFrameRunner, output
from ibrepro import plots
from test_report import MAKE_RUN, Page, run_report

CHROMIUM = next((shutil.which(name) for name in ('chromium', 'chromium-browser', 'google-chrome')
                 if shutil.which(name)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason='chromium is not installed (apt-get install -y chromium)')

#: A closed network: nothing in the background, no updates, no QUIC; root needs --no-sandbox.
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
         '--disable-dev-shm-usage', '--hide-scrollbars']

#: Appended to a copy of the page: at the load event (every image fetched and decoded, or failed), write what the
#: browser made of the images. (Synchronous, so --dump-dom always sees it.)
PROBE = """<script>
window.addEventListener('load', () => {
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify([...document.images].map(img => ({
    complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
    shown: img.getBoundingClientRect().width})));
  document.body.appendChild(out);
});
</script>"""


def chromium(tmp_path, *args):
    profile = tmp_path / f'chromium-profile-{len(list(tmp_path.glob("chromium-profile-*")))}'
    proc = subprocess.run([CHROMIUM, *FLAGS, f'--user-data-dir={profile}', *args], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, output(proc)
    return proc


@pytest.fixture(scope='module')
def page(tmp_path_factory):
    runner = ReFrameRunner(tmp_path_factory.mktemp('browser') / 'ibrepro-home')
    proc = run_report(runner, '--report', str(MAKE_RUN))
    assert proc.returncode == 0, output(proc)
    return Path(proc.stdout.splitlines()[0])


def test_screenshot_shows_the_figures(page, tmp_path):
    shot = tmp_path / 'shot.png'
    chromium(tmp_path, '--window-size=1280,2400', f'--screenshot={shot}', page.as_uri())
    image = Image.open(shot).convert('RGB')
    assert image.size == (1280, 2400)
    pixels = np.asarray(image).reshape(-1, 3)
    not_white = (pixels.min(axis=1) < 235).mean()
    assert not_white > 0.05, f'only {not_white:.1%} of the screenshot is not white'
    # the plots' own colours: this system's curve and paper 002's markers (text and broken-image icons have
    # neither), so the figures were drawn, not just their frames
    def near(colour):
        rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
        return int((np.abs(pixels.astype(int) - rgb).sum(axis=1) < 30).sum())
    assert near(plots.MEASURED_COLOURS[0]) > 500
    assert near(plots.SEED_COLOURS['002']) > 100


def test_every_figure_decodes(page, tmp_path):
    html = page.read_text()
    expected = len(Page(html).images)
    assert expected >= 10
    probe = page.with_name('probe.html')
    probe.write_text(html.replace('</body>', PROBE + '</body>'))
    proc = chromium(tmp_path, '--dump-dom', '--virtual-time-budget=20000', probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:]
    images = json.loads(found.group(1).replace('&quot;', '"'))
    assert len(images) == expected
    for img in images:
        assert img['complete'], img
        assert img['width'] >= 400 and img['height'] >= 150 and img['shown'] > 100, img
    # the dumped DOM is the report: its figures and tables are there
    dom = Page(proc.stdout)
    assert dom.tags.count('figure') == len(re.findall('<figure', html))
    assert {'headline', 'groups', 'platforms'} <= dom.tables


def test_a_hostile_host_name_in_a_fleet_night_stays_text(tmp_path):
    """A real pair-round night (tests/data/fleet) with its rail's device renamed to an HTML payload (a node name
    that is no host name is refused with its fabric: tests/test_fleet_plan.py): in the browser the fleet section's
    tables are there and the payload is text (no image element, nothing ran)."""
    from test_report_fleet import FLEET, report
    data = json.loads((FLEET / 'fattree-uplink-leaf1-spine1-25.report.json').read_text())
    case = next(c for run in data['runs'] for c in run['testcases'] if 'fleet_flows' in c)
    payload = '<img src=x onerror=document.title=1>'
    for key in ('fleet_flows', 'fleet_confirmation'):
        case[key] = json.loads(json.dumps(case[key]).replace('fab0', payload))
    (tmp_path / 'hostile.json').write_text(json.dumps(data))
    report(tmp_path, tmp_path / 'hostile.json')
    (page,) = (tmp_path / 'out').rglob('index.html')
    probe = page.with_name('probe.html')
    probe.write_text(page.read_text().replace('</body>', PROBE + '</body>'))
    proc = chromium(tmp_path, '--dump-dom', '--virtual-time-budget=5000', probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:]
    images = json.loads(found.group(1).replace('&quot;', '"'))
    assert len(images) == len(Page(page.read_text()).images)          # the page's figures only
    assert {'fleet-nights', 'fleet-leaves', 'fleet-verified'} <= Page(proc.stdout).tables
    assert 'onerror=document.title=1' in proc.stdout and '<title>1</title>' not in proc.stdout
