"""The report as HTML and Markdown (Jinja templates in ``ibrepro/templates``), and the night's verdict as lines."""

import math
import re
from pathlib import Path

import jinja2

from .. import trust


def num(value, digits=4):
    if value is None:
        return '-'
    if isinstance(value, str):
        return value
    if value == 0:
        return '0'
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f'{value:,.{decimals}f}'


def pct(value, signed=True):
    if value is None:
        return '-'
    return f'{value * 100:+.1f} %' if signed else f'{value * 100:.1f} %'


_MD_SPECIAL = re.compile(r'([\\`*_\[\]<>|#!])')
#: Characters that start a mention or a reference where CI posts the summary (GitHub, GitLab: @user, #1, !1,
#: ~label, %milestone, $snippet, &epic): a zero-width space after each keeps the text and breaks the link.
_MD_REFERENCE = re.compile(r'([@#!~%$^]|&amp;)')
_ZWSP = '\u200b'
#: Bare links, defanged as security advisories write them (``https[:]//``, ``www[.]``, ``me[@]host``): cmark-gfm still
#: links a scheme or ``www.`` with a zero-width space inside (which browsers then drop), and GitLab links on the text.
_MD_LINKS = [(re.compile(r'://'), r'\\[:\\]//'), (re.compile(r'(?i)\b(www)\.'), r'\1\\[.\\]'),
             (re.compile(rf'(?<=\w)@{_ZWSP}(?=\w)'), r'\\[@\\]')]


def _md(value):
    """A string safe inside a Markdown table cell: no markup, no HTML, no line breaks, no mention, reference or
    bare link (``https://``, ``www.`` and e-mail addresses are defanged: not autolinked)."""
    text = ' '.join(str(value).split()).replace('&', '&amp;')
    text = _MD_SPECIAL.sub(r'\\\1', text)
    text = _MD_REFERENCE.sub(rf'\1{_ZWSP}', text)
    for pattern, replacement in _MD_LINKS:
        text = pattern.sub(replacement, text)
    return text


def _code(value):
    """A string as a Markdown code span: one line (a line break would end it and let HTML through), no backticks."""
    return '`' + (' '.join(str(value).split()).replace('`', '') or ' ') + '`'


def _environment(autoescape):
    env = jinja2.Environment(loader=jinja2.PackageLoader('ibrepro', 'templates'), autoescape=autoescape,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=num, pct=pct, md=_md, code=_code)
    return env


def render(model, html_name='index.html'):
    """(HTML, Markdown) of a model."""
    html = _environment(True).get_template('report.html.j2').render(m=model)
    md = _environment(False).get_template('summary.md.j2').render(m=model, html_name=html_name)
    return html, md


def write(model, output_dir):
    stamp = str(model['newest'].get('time_start') or 'unknown').split('+')[0]
    output_dir = Path(output_dir)
    target = output_dir / _safe(model['system']) / _safe(stamp)
    # pages others may read (0644), in directories that are ours (ibrepro.trust): Refused, one line, otherwise
    trust.make_dir(target, root=output_dir, mode=0o755, name='--output-dir')
    html, md = render(model)
    trust.write_file(target / 'index.html', html, mode=0o644, root=output_dir)
    trust.write_file(target / 'summary.md', md, mode=0o644, root=output_dir)
    return target


def _safe(name):
    """A path component from a run's string: no separators, no dot-dot."""
    return re.sub(r'[^A-Za-z0-9._+-]', '_', name).lstrip('.') or '_'


def nightly_lines(model):
    """The night's verdict: the alarms (each test case with the sizes that moved most), then the test cases a
    confirmation cleared and those too noisy to judge."""
    lines = []
    for g in model['group_alarms']:
        s, again = g['shift'], g.get('confirmation')
        what = 'REGRESSION' if g.get('verdict', 'regression') == 'regression' else 'REGRESSION (unconfirmed)'
        lines.append(f"{what} test case {g['name']} @{g['partition']}+{g['environ']}: its variables moved "
                     f"{pct(s.change)} (median over sizes; 95 % interval {pct(s.low)} .. {pct(s.high)}), "
                     f"q = {s.q:.2g}, baseline n = {s.n}"
                     + (f"; confirmed by a re-run: {pct(again.change)}, p = {again.p:.2g}" if again else ''))
        # the sizes that moved most (each with its own q: with a short history single sizes rarely pass BH)
        moved = [r for r in model['variables'] if r['shift'].worse is not None and r['shift'].q is not None
                 and (r['partition'], r['environ'], r['name']) == (g['partition'], g['environ'], g['name'])]
        for r in sorted(moved, key=lambda r: -r['shift'].worse)[:8]:
            lines.append(f"    {_variable_line(r)}")
    for r in model['alarms']:
        lines.append(f"CHANGE {r['name']} @{r['partition']}+{r['environ']} {_variable_line(r)}")
    for g in model.get('cleared', []):
        s, again = g['shift'], g['confirmation']
        lines.append(f"cleared: test case {g['name']} @{g['partition']}+{g['environ']} moved {pct(s.change)} "
                     f"(q = {s.q:.2g}); its confirmation re-run moved {pct(again.change)}"
                     + (f" (p = {again.p:.2g})" if again.p is not None else '') + ': not an alarm')
    for g in model.get('unverified', []):
        lines.append(unverified_line(g, model.get('alarm_alpha')))
    for c in model.get('ignored_confirmations', []):
        lines.append(f"ignored confirmation session {c['uuid']}: {c['why']}")
    for g in model.get('inconclusive', []):
        lines.append(f"INCONCLUSIVE test case {g['name']} @{g['partition']}+{g['environ']}: "
                     f"{g['confirmation_noise'] or g['noise']}")
    return lines


def unverified_line(g, alarm_alpha):
    """A suspect whose confirmation measured nothing: not confirmed, not cleared, and what the night alone says."""
    s = g['shift']
    alone = (f"the night alone crosses the alarm limit (q <= {alarm_alpha:g}): an alarm" if g['alarm'] else
             f"the night alone is below the alarm limit (q > {alarm_alpha:g}): could not judge")
    return (f"NOT CONFIRMED test case {g['name']} @{g['partition']}+{g['environ']}: moved {pct(s.change)}"
            + (f" (q = {s.q:.2g})" if s.q is not None else '') + f"; {g['reason']}: not confirmed, not cleared; "
            + alone)


def _variable_line(r):
    s = r['shift']
    return (f"{r['variable']}: {num(s.baseline)} -> {num(s.current)} {r['unit']} ({pct(s.change)}; 95 % interval "
            f"{pct(s.low)} .. {pct(s.high)}), q = {s.q:.2g}, baseline n = {s.n}")
