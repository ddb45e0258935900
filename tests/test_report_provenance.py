"""The provenance part of the report: the catalog's answer for the checks not run, kept between reports."""

import json
import shutil

import pytest

from ibrepro import paths
from ibrepro.report import provenance

PLATFORM = {('default', 'impi'): {'features': ['mpi'], 'extras': {'nodes': 1}, 'environ_features': ['mpi', 'imb'],
                                  'environ_extras': {}}}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
    return tmp_path / 'cache' / 'ibrepro'


@pytest.fixture
def children(monkeypatch):
    """The catalog children started (each a real one)."""
    started = []
    real = provenance._catalog_child

    def counted(*args):
        started.append(args)
        return real(*args)

    monkeypatch.setattr(provenance, '_catalog_child', counted)
    return started


def test_the_second_report_of_unchanged_checks_starts_no_catalog(cache, children):
    first = provenance.not_run_verdicts('local', None, PLATFORM)
    assert len(children) == 1 and first[0] and first[1]
    (kept,) = cache.glob('catalog-*.json')
    assert oct(kept.stat().st_mode & 0o777) == '0o600' and oct(cache.stat().st_mode & 0o777) == '0o700'

    assert provenance.not_run_verdicts('local', None, PLATFORM) == first and len(children) == 1

    # a kept file of another shape is not believed: the catalog runs again and the file is rewritten
    kept.write_text(json.dumps({'verdicts': {'IMBPointToPoint': 'everything'}, 'experiments': {}}))
    assert provenance.not_run_verdicts('local', None, PLATFORM) == first and len(children) == 2
    assert json.loads(kept.read_text())['verdicts'] == first[0]


def test_a_configuration_given_with_C_is_never_kept(cache, children):
    verdicts, _ = provenance.not_run_verdicts('local', paths.CONFIGS_DIR / 'local.py')
    assert verdicts and len(children) == 1 and not cache.exists()


def test_the_key_follows_the_checks_the_package_the_system_and_what_it_recorded(tmp_path, monkeypatch):
    checks = tmp_path / 'checks'
    shutil.copytree(paths.CHECKS_DIR, checks, ignore=shutil.ignore_patterns('__pycache__'))
    monkeypatch.setattr(paths, 'CHECKS_DIR', checks)
    recorded = provenance.recorded_configuration('local', PLATFORM)
    key = provenance._catalog_key('local', recorded)
    assert key == provenance._catalog_key('local', recorded)
    assert provenance._catalog_key('other', recorded) != key
    assert provenance._catalog_key('local', None) != key
    changed = provenance.recorded_configuration('local', {('default', 'impi'): {**PLATFORM[('default', 'impi')],
                                                                                  'features': ['mpi', 'ib']}})
    assert provenance._catalog_key('local', changed) != key

    one = next(checks.rglob('*.py'))
    one.write_text(one.read_text() + '\n# one more line\n')
    assert provenance._catalog_key('local', recorded) != key
    (checks / 'extra.yaml').write_text('a: 1\n')
    assert provenance._catalog_key('local', recorded) not in (key, provenance._catalog_key('local', None))


ANSWER = {'verdicts': {'IMBPointToPoint %benchmark=PingPong': [['kept', '']]}, 'experiments': {'1': []}}


def test_a_kept_answer_others_could_write_is_not_read_nor_written_there(cache):
    key = 'b' * 64
    provenance._keep(key, ANSWER)
    assert provenance._cached(key) == ANSWER
    (cache / f'catalog-{key}.json').chmod(0o646)
    assert provenance._cached(key) is None
    cache.chmod(0o777)
    provenance._keep('c' * 64, ANSWER)
    assert not (cache / f'catalog-{"c" * 64}.json').exists() and provenance._cached(key) is None


@pytest.mark.parametrize('answer', [[], {'verdicts': None}, {'verdicts': None, 'experiments': {'x': []}},
                                    {'verdicts': {'a': [['why']]}, 'experiments': {}},
                                    {'verdicts': {'a': [['why', 1]]}, 'experiments': {}},
                                    {'verdicts': None, 'experiments': {'1': [['item', 'names']]}}])
def test_an_answer_of_another_shape_is_refused(answer):
    assert not provenance._well_formed(answer)
    assert provenance._well_formed(ANSWER) and provenance._well_formed({'verdicts': None, 'experiments': {}})
