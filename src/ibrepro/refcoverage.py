"""Is every number in the seed texts captured? (``ibrepro refs coverage --seeds DIR``)

Every number printed in a seed text must be *claimed* by a quote of the reference data, or match a
rule of ``reference-data/coverage-ignore.yaml`` that says why it is not data (citation, section
number, grant number, bibliography, OCR residue...). A quote claims only the numbers its record
accounts for, at the places the quote is found:

* a paper entry: its value (or ``printed`` form), its message size (also as "2K", "8 KB") and its
  numeric parameters (pairs, nodes, window...);
* a testbed field: the numbers in its value ("MVAPICH 0.9.1", ``{type: pci-x, mhz: 133}``);
* the paper header's MB and message-size definitions: all their numbers.

It also reports quotes not found in the text (a mistyped or invented quote) and ignore rules that
match nothing (stale). The seed texts are not distributed with ibrepro; point ``--seeds`` (or
``$IBREPRO_SEEDS``) at a directory holding them.
"""

import dataclasses
import os
import re
import sys
from pathlib import Path

from . import references as refs

_SIZE_SUFFIX = re.compile(r'\s?(K|KB|M|MB)\b')
_SIZE_FACTORS = {'K': 1024, 'KB': 1024, 'M': 1024 ** 2, 'MB': 1024 ** 2}


@dataclasses.dataclass
class Number:
    """A number printed in a seed text."""

    start: int
    end: int
    text: str
    line: int
    claimed_by: str | None = None
    ignored_by: str | None = None


@dataclasses.dataclass
class SeedCoverage:
    seed: str
    file: str
    numbers: list
    missing_quotes: list      # (record, quote)
    stale_rules: list         # rule ids that matched nothing in this seed

    @property
    def uncovered(self):
        return [n for n in self.numbers if not n.claimed_by and not n.ignored_by]

    @property
    def ok(self):
        return not self.uncovered and not self.missing_quotes


def find_numbers(text):
    """Standalone numbers: '3.8', '10,000', '2.6.18'. A number glued to a lowercase word counts only
    if it has a decimal point (OCR "achieves6.9"); after an uppercase letter it is a model name
    (MT25208, P4DL6) and after '_' an identifier."""
    found = []
    for m in refs.NUMBER_RE.finditer(text):
        before = text[m.start() - 1] if m.start() else ' '
        if before.isupper() or before == '_' or (before.islower() and '.' not in m.group()):
            continue
        found.append(Number(m.start(), m.end(), m.group(), text.count('\n', 0, m.start()) + 1))
    return found


def _spans(text, quote):
    return [(m.start(), m.end()) for m in refs.quote_regex(quote).finditer(text)]


def _size_values(size):
    """The byte counts a message_size stands for: 2048 -> {2048}; '16K-1M' -> {16384, 1048576}."""
    if isinstance(size, int):
        return {size}
    values = set()
    for num, suffix in re.findall(r'([0-9]+)([KM]?)', size or ''):
        values.add(int(num) * _SIZE_FACTORS.get(suffix, 1))
    return values


def _token_values(text, number):
    """What a printed number may stand for: itself, and as a size when followed by K/KB/M/MB."""
    value = _key(number.text)
    values = {value}
    suffix = _SIZE_SUFFIX.match(text, number.end)
    if suffix and isinstance(value, float):
        values.add(value * _SIZE_FACTORS[suffix.group(1)])
    return values


def _same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return refs.same_number(a, b)


def _claim_within(text, numbers, span, wanted, printed, record):
    """Claim the numbers inside ``span`` whose value is in ``wanted`` or that lie inside ``printed``."""
    start, end = span
    inside = [n for n in numbers if start <= n.start and n.end <= end]
    if printed:
        for m in refs.quote_regex(printed).finditer(text, start, end):
            for n in inside:
                if m.start() <= n.start < m.end():
                    n.claimed_by = n.claimed_by or record
    for n in inside:
        if any(_same(v, w) for v in _token_values(text, n) for w in wanted):
            n.claimed_by = n.claimed_by or record


def _entry_claims(item):
    wanted = set()
    if isinstance(item['value'], (int, float)):
        wanted.add(float(item['value']))
    wanted |= {float(v) for v in _size_values(item.get('message_size'))}
    for val in (item.get('parameters') or {}).values():
        if isinstance(val, (int, float)):
            wanted.add(float(val))
    printed = item.get('printed') or (item['value'] if isinstance(item['value'], str) else None)
    return wanted, printed


def _key(printed):
    """A comparable form of a printed number: its float, or the text itself ('2.6.18')."""
    value = refs.number_value(printed)
    return printed if value is None else value


def _field_numbers(value):
    """Numbers inside a testbed field value (strings, numbers, nested mappings)."""
    if isinstance(value, dict):
        return set().union(*(_field_numbers(v) for v in value.values())) if value else set()
    if isinstance(value, bool):
        return set()
    if isinstance(value, (int, float)):
        return {float(value)}
    return {_key(m.group()) for m in refs.NUMBER_RE.finditer(str(value))}


def _rule_spans(rule, text):
    if 'pattern' in rule:
        return [m.span() for m in re.finditer(rule['pattern'], text, re.MULTILINE)]
    if 'text' in rule:
        return _spans(text, rule['text'])
    spans = []
    for m in refs.quote_regex(rule['span']['from']).finditer(text):
        if rule['span']['to'] == '$':
            spans.append((m.start(), len(text)))
            break
        end = refs.quote_regex(rule['span']['to']).search(text, m.end())
        if end:
            spans.append((m.start(), end.end()))
    return spans


def seed_text_path(seeds_dir, paper):
    exact = Path(seeds_dir) / paper['seed_file']
    if exact.exists():
        return exact
    matches = sorted(Path(seeds_dir).glob(f'{paper["seed"]}_*.txt'))
    return matches[0] if matches else None


def check_seed(paper, testbed_file, rules, text, file='?', other_quotes=()):
    """Coverage of one seed text by its paper file, its testbed file and the ignore rules;
    ``other_quotes`` are (record, quote) pairs of other files that must also be found in the text."""
    numbers = find_numbers(text)
    missing = [(record, quote) for record, quote in other_quotes if not _spans(text, quote)]

    for item in paper.get('entries') or []:
        wanted, printed = _entry_claims(item)
        spans = _spans(text, item['quote'])
        if not spans:
            missing.append((item['id'], item['quote']))
        for span in spans:
            _claim_within(text, numbers, span, wanted, printed, item['id'])

    for bed in (testbed_file or {}).get('testbeds') or []:
        for owner in [bed] + list(bed.get('configurations') or []):
            for name, field in (owner.get('fields') or {}).items():
                quotes = field.get('quote') or []
                for quote in [quotes] if isinstance(quotes, str) else quotes:
                    spans = _spans(text, quote)
                    if not spans:
                        missing.append((f'{owner["id"]}.{name}', quote))
                    for span in spans:
                        _claim_within(text, numbers, span, _field_numbers(field['value']), None,
                                      f'{owner["id"]}.{name}')

    for key in ('mb_definition', 'size_units'):
        quote = (paper.get(key) or {}).get('quote')
        if quote:
            spans = _spans(text, quote)
            if not spans:
                missing.append((f'{paper["seed"]} {key}', quote))
            for start, end in spans:
                for n in numbers:
                    if start <= n.start and n.end <= end:
                        n.claimed_by = n.claimed_by or f'{key} statement'

    stale = []
    for rule in rules:
        if rule['seeds'] != 'all' and paper['seed'] not in rule['seeds']:
            continue
        hits = 0
        for start, end in _rule_spans(rule, text):
            for n in numbers:
                if n.start < end and start < n.end:
                    hits += 1
                    n.ignored_by = n.ignored_by or rule['id']
        if not hits:
            stale.append(rule['id'])

    return SeedCoverage(paper['seed'], file, numbers, missing, stale)


def coverage(seeds_dir, root=None, seeds=None):
    """Coverage of every seed (or those in ``seeds``); the second value lists stale rules (in no seed)."""
    root = refs.data_root(root)
    papers = refs.load_papers(root)
    beds = refs.load_testbed_files(root)
    ignore = root / 'coverage-ignore.yaml'
    rules = refs.read_yaml(ignore, root)['rules'] if ignore.exists() else []
    statements_file = root / 'limits' / 'statements.yaml'
    statements = refs.read_yaml(statements_file, root) if statements_file.exists() else []
    results = []
    for seed, paper in sorted(papers.items()):
        if seeds and seed not in seeds:
            continue
        path = seed_text_path(seeds_dir, paper)
        if path is None:
            raise FileNotFoundError(f'{seeds_dir}: no seed text for {seed} ({paper["seed_file"]})')
        quotes = [(f'limits/statements.yaml #{n}', s['quote']) for n, s in enumerate(statements, 1)
                  if s.get('seed') == paper['seed_file']]
        results.append(check_seed(paper, beds.get(seed), rules, path.read_text(encoding='utf-8'), path.name, quotes))
    checked = {r.seed for r in results}
    stale_everywhere = [rule['id'] for rule in rules
                        if all(rule['id'] in r.stale_rules for r in results
                               if rule['seeds'] == 'all' or r.seed in rule['seeds'])
                        and (rule['seeds'] == 'all' or checked & set(rule['seeds']))]
    return results, stale_everywhere


def _context(text, number, width=50):
    line_start = text.rfind('\n', 0, number.start) + 1
    line_end = text.find('\n', number.end)
    line = text[line_start:line_end if line_end >= 0 else None]
    col = number.start - line_start
    lo = max(0, col - width)
    return ('...' if lo else '') + line[lo:col + len(number.text) + width].strip()


def cli(args):
    seeds_dir = args.seeds or os.environ.get('IBREPRO_SEEDS')
    if not seeds_dir:
        print('ibrepro refs coverage: give --seeds DIR or set IBREPRO_SEEDS (the seed texts are not '
              'distributed with ibrepro)', file=sys.stderr)
        return 2
    try:
        results, stale = coverage(seeds_dir, root=args.root, seeds=args.seed)
    except (FileNotFoundError, refs.DataError) as err:
        print(f'ibrepro refs coverage: {err}', file=sys.stderr)
        return 2

    status = 0
    for res in results:
        text = (Path(seeds_dir) / res.file).read_text(encoding='utf-8')
        claimed = sum(1 for n in res.numbers if n.claimed_by)
        ignored = sum(1 for n in res.numbers if n.ignored_by and not n.claimed_by)
        print(f'{res.seed} ({res.file}): {len(res.numbers)} numbers, {claimed} captured, {ignored} ignored, '
              f'{len(res.uncovered)} uncovered, {len(res.missing_quotes)} quotes not found')
        for n in res.uncovered:
            print(f'  uncovered {res.file}:{n.line}: {n.text!r} in "{_context(text, n)}"')
        for record, quote in res.missing_quotes:
            print(f'  quote not found: {record}: "{quote}"')
        if args.verbose:
            for n in res.numbers:
                if n.ignored_by and not n.claimed_by:
                    print(f'  ignored ({n.ignored_by}) {res.file}:{n.line}: {n.text!r} in "{_context(text, n)}"')
        status |= not res.ok
    for rule in stale:
        print(f'stale ignore rule (matches no number): {rule}')
    return 1 if status or stale else 0
