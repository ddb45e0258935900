"""The experiments of the seed papers (reference-data/experiments.yaml) and the tags that name them."""

import functools

import yaml

from . import paths

EXPERIMENTS_FILE = paths.REFERENCE_DATA / 'experiments.yaml'


class CatalogError(ValueError):
    pass


@functools.lru_cache(maxsize=None)
def experiments():
    """All experiments, keyed by id (the row number of the papers' checklist)."""
    try:
        with open(EXPERIMENTS_FILE) as fp:
            data = yaml.safe_load(fp)
    except (OSError, yaml.YAMLError) as err:
        raise CatalogError(f'{EXPERIMENTS_FILE}: {err}') from None

    return {row['id']: row for row in data['experiments']}


def experiment(exp_id):
    try:
        return experiments()[exp_id]
    except KeyError:
        raise CatalogError(f'no experiment {exp_id} in {EXPERIMENTS_FILE} '
                           f'(known: 1..{max(experiments())})') from None


def tags_for(exp_ids):
    """ReFrame tags naming experiments, seeds and figures: exp11, s000, s000-fig12, ..."""
    tags = set()
    for exp_id in exp_ids:
        row = experiment(exp_id)
        tags.add(f'exp{exp_id}')
        for seed in row['seeds']:
            tags.add(f's{seed}')
            tags.update(f's{seed}-{fig}' for fig in row['figures'])

    return tags
