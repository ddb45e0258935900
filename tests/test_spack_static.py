"""Static checks of spack-repo/ and configs/spack/ that need no Spack (they run in CI).

What Spack itself would reject, what a spack-packages reviewer would send back, or what would
make a build unverifiable, is checked from the source: package files parse, directives are well
formed, every package names its homepage, licence and maintainers, every downloaded version is
pinned by a sha256, patches exist, what perftest's configure links is declared, and the
environments only name packages and variants that exist in ibrepro or in the pinned builtin
repository (tests/data/spack-builtin.json, dumped from spack-packages v2026.06.0 by
tests/data/spack_builtin_facts.py; the GPU packages it lacks from tests/data/spack-builtin-source.json,
read from the same release's sources by tests/data/spack_builtin_source_facts.py, whose reading agrees
with Spack's on the packages both hold). Spack's own audits and spack-packages' lint run in
tests/test_spack_live.py and tests/test_spack_lint.py.
"""

import ast
import json
import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / 'spack-repo' / 'spack_repo' / 'ibrepro'
ENVS_DIR = ROOT / 'configs' / 'spack'
BUILTIN = json.loads((Path(__file__).parent / 'data' / 'spack-builtin.json').read_text())
SOURCE = json.loads((Path(__file__).parent / 'data' / 'spack-builtin-source.json').read_text())
#: What is known of each builtin package: Spack's own dump first, the reading of the sources for the rest.
FACTS = {**SOURCE['packages'], **BUILTIN['packages']}

PACKAGE_FILES = sorted(REPO.glob('packages/*/package.py'))
ENV_FILES = sorted(ENVS_DIR.glob('*/spack.yaml'))
EXAMPLE_FILES = sorted(ENVS_DIR.glob('*.example.yaml'))

SHA256 = re.compile(r'^[0-9a-f]{64}$')

#: Keyword arguments each directive accepts (Spack 1.1, package API v2.2).
DIRECTIVE_KEYWORDS = {
    'version': {'sha256', 'commit', 'tag', 'branch', 'url', 'git', 'submodules', 'expand',
                'extension', 'deprecated', 'preferred', 'no_cache', 'get_full_repo'},
    'variant': {'default', 'description', 'values', 'multi', 'validator', 'when', 'sticky'},
    'depends_on': {'type', 'when', 'patches'},
    'requires': {'when', 'msg', 'policy'},
    'conflicts': {'when', 'msg'},
    'patch': {'when', 'level', 'working_dir', 'sha256', 'reverse'},
    'license': {'when', 'checked_by'},
    'provides': {'when'},
    'maintainers': set(),
}
#: A GitHub user name (what `maintainers()` takes): letters, digits, single inner hyphens.
GITHUB_HANDLE = re.compile(r'^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$')
#: An SPDX licence expression of identifiers joined by AND / OR.
SPDX_EXPRESSION = re.compile(r'^[A-Za-z0-9.+-]+(?: (?:AND|OR) [A-Za-z0-9.+-]+)*$')
DEPENDENCY_TYPES = {'build', 'link', 'run', 'test'}


def pkg_name_to_class_name(name: str) -> str:
    """Spack 1.1 lib/spack/spack/util/naming.py:pkg_name_to_class_name."""
    class_name = string.capwords(re.sub(r'[-_]+', '-', name), '-').replace('-', '')
    return f'_{class_name}' if re.match(r'^[0-9]', class_name) else class_name


def pkg_dir_to_pkg_name(dirname: str) -> str:
    """Spack 1.1 lib/spack/spack/util/naming.py:pkg_dir_to_pkg_name (package API >= 2.0)."""
    return dirname.lstrip('_').replace('_', '-')


@dataclass
class Directive:
    name: str
    args: list
    keywords: dict
    line: int


@dataclass
class PackageFile:
    path: Path
    name: str
    classes: list
    directives: list = field(default_factory=list)
    attributes: dict = field(default_factory=dict)
    builtin_parents: list = field(default_factory=list)

    @property
    def variants(self) -> set:
        return {d.args[0] for d in self.directives if d.name == 'variant'}


def _literal(node):
    """The value of a literal node, or the node itself when it is not a literal."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return node


def load_package(path: Path) -> PackageFile:
    tree = ast.parse(path.read_text(), filename=str(path))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    package = PackageFile(path, pkg_dir_to_pkg_name(path.parent.name), classes)
    # module-level string constants (e.g. a version range shared by directives)
    constants = {s.targets[0].id: s.value.value for s in tree.body
                 if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                 and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)}

    def value(node):
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        return _literal(node)

    # builtin package classes it subclasses (not mixins such as MpichEnvironmentModifications)
    builtin_classes = {
        alias.asname or alias.name: pkg_dir_to_pkg_name(m.group(1))
        for n in tree.body if isinstance(n, ast.ImportFrom)
        if (m := re.fullmatch(r'spack_repo\.builtin\.packages\.(\w+)\.package', n.module or ''))
        for alias in n.names if alias.name == pkg_name_to_class_name(pkg_dir_to_pkg_name(m.group(1)))}
    package.builtin_parents = [builtin_classes[base.id] for cls in classes for base in cls.bases
                               if isinstance(base, ast.Name) and base.id in builtin_classes]
    for cls in classes:
        for statement in cls.body:
            if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
                package.attributes[statement.targets[0].id] = statement.value
            elif (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
                  and isinstance(statement.value.func, ast.Name)):
                call = statement.value
                package.directives.append(Directive(
                    call.func.id, [value(a) for a in call.args],
                    {k.arg: value(k.value) for k in call.keywords}, call.lineno))
    return package


PACKAGES = {p.name: p for p in map(load_package, PACKAGE_FILES)}
KNOWN_PACKAGES = set(PACKAGES) | set(FACTS) | set(BUILTIN['virtuals'])


def where(package: PackageFile, directive: Directive) -> str:
    return f'{package.path.relative_to(ROOT)}:{directive.line} {directive.name}()'


def spec_names(spec: str) -> list:
    """Package names in a spec string: the root and every name after ^ or %."""
    return re.findall(r'(?:^|[\^%]\s*)([a-z0-9][a-z0-9_-]*)', spec.strip())


def spec_variants(spec: str) -> list:
    """(package, variant) pairs of the root of a spec string (dependencies are not checked)."""
    root = re.split(r'\s*[\^%]', spec.strip())[0]
    name = spec_names(root)[0]
    tokens = re.findall(r'(?:[+~]([\w-]+))|(?:\b([\w-]+)==?[^\s]+)', root)
    return [(name, flag or key) for flag, key in tokens]


def versions_of(name: str) -> set:
    if name in PACKAGES:
        own = {d.args[0] for d in PACKAGES[name].directives if d.name == 'version'}
        return own | {v for parent in PACKAGES[name].builtin_parents
                      for v in BUILTIN['packages'][parent]['versions']}
    return set(FACTS[name]['versions'])


def variants_of(name: str) -> set:
    if name in PACKAGES:
        # an ibrepro package also has the variants of the builtin recipe it subclasses
        inherited = {v for parent in PACKAGES[name].builtin_parents
                     for v in BUILTIN['packages'][parent]['variants']}
        return PACKAGES[name].variants | inherited | {'build_system'}
    return set(FACTS[name]['variants'])


def test_repository_layout():
    repo_yaml = yaml.safe_load((REPO / 'repo.yaml').read_text())
    assert repo_yaml == {'repo': {'namespace': 'ibrepro', 'api': 'v2.2'}}
    assert PACKAGE_FILES, 'no package.py under spack-repo/spack_repo/ibrepro/packages'


@pytest.mark.parametrize('path', PACKAGE_FILES, ids=lambda p: p.parent.name)
def test_package_class_is_named_after_its_directory(path):
    package = load_package(path)
    assert re.fullmatch(r'[a-z_][a-z0-9_]*', path.parent.name) and '__' not in path.parent.name
    expected = pkg_name_to_class_name(package.name)
    names = [c.name for c in package.classes]
    assert names == [expected], f'{path}: classes {names}, Spack expects one class {expected}'
    imports = {n.module for n in ast.walk(ast.parse(path.read_text()))
               if isinstance(n, ast.ImportFrom)}
    assert 'spack.package' in imports, f'{path}: no `from spack.package import *`'


@pytest.mark.parametrize('path', PACKAGE_FILES, ids=lambda p: p.parent.name)
def test_directives_are_well_formed(path):
    package = load_package(path)
    for d in package.directives:
        if d.name not in DIRECTIVE_KEYWORDS:
            continue
        unknown = set(d.keywords) - DIRECTIVE_KEYWORDS[d.name]
        assert not unknown, f'{where(package, d)}: unknown keyword(s) {sorted(unknown)}'
        assert d.args and isinstance(d.args[0], str), f'{where(package, d)}: needs a string first'
        if d.name == 'depends_on':
            for name in spec_names(d.args[0]):
                assert name in KNOWN_PACKAGES, f'{where(package, d)}: unknown package {name!r}'
            types = d.keywords.get('type', ('build', 'link'))
            types = {types} if isinstance(types, str) else set(types)
            assert types <= DEPENDENCY_TYPES, f'{where(package, d)}: bad type {types}'
        elif d.name == 'variant':
            description = d.keywords.get('description')
            assert isinstance(description, str) and description, f'{where(package, d)}: no description'
            values, default = d.keywords.get('values'), d.keywords.get('default')
            if isinstance(values, tuple) and not d.keywords.get('multi'):
                assert default in values, f'{where(package, d)}: default {default!r} not in {values}'
        elif d.name == 'patch' and str(d.args[0]).startswith('https://'):
            # a remote patch: Spack (and a mirror) fetch it and check its sha256
            assert re.fullmatch(r'[0-9a-f]{64}', d.keywords.get('sha256', '')), f'{where(package, d)}: no sha256'
        elif d.name == 'patch':
            assert (path.parent / d.args[0]).is_file(), f'{where(package, d)}: no file {d.args[0]}'


def is_checkout_uri(node) -> bool:
    """`CHECKOUT.as_uri()`: the file:// URI of the checkout holding the package repository."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == 'as_uri' and isinstance(node.func.value, ast.Name)
            and node.func.value.id == 'CHECKOUT')


@pytest.mark.parametrize('path', PACKAGE_FILES, ids=lambda p: p.parent.name)
def test_every_download_is_pinned(path):
    """Every version fetched from the network is an archive with its sha256, so that a source
    mirror holds checksummed files; only a package built from the local checkout (its `git` is
    the checkout's file:// URI, never a download) may name a branch instead."""
    package = load_package(path)
    versions = [d for d in package.directives if d.name == 'version']
    sources = {k: package.attributes[k] for k in ('url', 'git', 'list_url') if k in package.attributes}
    if not versions:
        # a subclass of a builtin recipe fetches the builtin's (checksummed) versions
        assert package.builtin_parents and not sources, f'{path}: no version() of its own'
    local = is_checkout_uri(sources.get('git'))
    if local:
        assert set(sources) == {'git'}, f'{path}: built from the checkout, yet downloads {sources}'
        assert 'CHECKOUT = Path(__file__).resolve().parents[5]' in path.read_text()
    for key, value in sources.items():
        assert local or (isinstance(value, ast.Constant) and value.value.startswith('https://')), (
            f'{path}: {key} is not an https:// URL')
    for d in versions:
        if local:
            assert set(d.keywords) == {'branch'}, f'{where(package, d)}: the checkout: a branch'
            continue
        sha256 = d.keywords.get('sha256')
        assert isinstance(sha256, str) and SHA256.match(sha256), (
            f'{where(package, d)} {d.args[0]!r}: no sha256')
        assert not {'commit', 'tag', 'branch', 'git'} & set(d.keywords), (
            f'{where(package, d)}: an archive, not a git checkout')
        url = d.keywords.get('url', '')
        assert url == '' or url.startswith('https://'), f'{where(package, d)}: url {url!r}'


@pytest.mark.parametrize('path', PACKAGE_FILES, ids=lambda p: p.parent.name)
def test_package_metadata(path):
    """What `spack info` shows and a spack-packages reviewer asks for: a description, a homepage
    (`spack audit packages-https` crashes without one), the licence and the maintainers."""
    package = load_package(path)
    (cls,) = package.classes
    assert (ast.get_docstring(cls) or '').strip(), f'{path}: no docstring (the description)'
    homepage = package.attributes.get('homepage')
    assert homepage is not None, f'{path}: no homepage'
    if not (isinstance(homepage, ast.Constant) and homepage.value.startswith('https://')):
        # the project's own benchmarks: its home is the checkout (docs/spack.md)
        assert ast.unparse(homepage) == "(CHECKOUT / 'README.md').as_uri()", ast.unparse(homepage)
        assert (ROOT / 'README.md').is_file()
    licenses = [d for d in package.directives if d.name == 'license']
    assert len(licenses) == 1 and 'when' not in licenses[0].keywords, f'{path}: one license()'
    assert SPDX_EXPRESSION.match(licenses[0].args[0]), f'{path}: {licenses[0].args[0]!r}'
    maintainers = [name for d in package.directives if d.name == 'maintainers' for name in d.args]
    assert maintainers, f'{path}: no maintainers()'
    assert all(isinstance(m, str) and GITHUB_HANDLE.match(m) for m in maintainers), maintainers


def depends(package: PackageFile) -> dict:
    """{spec string: its when= condition (None: always)} of a package's depends_on()."""
    return {d.args[0]: d.keywords.get('when') for d in package.directives if d.name == 'depends_on'}


def test_perftest_declares_what_its_configure_links():
    """configure.ac of 26.04.17 links libnuma whenever it finds it, and from 25.07 on enables
    CUDA whenever /usr/local/cuda/include/cuda.h exists: both must come from the spec."""
    perftest = PACKAGES['perftest']
    deps = depends(perftest)
    assert deps['rdma-core'] is None and deps['pciutils+shared'] is None
    assert deps['numactl'] == '@26.04:'
    assert deps['cuda'] == '+cuda'
    (cuda,) = [d for d in perftest.directives if d.name == 'variant' and d.args[0] == 'cuda']
    assert cuda.keywords['default'] is False
    (patch,) = [d for d in perftest.directives if d.name == 'patch']
    assert patch.args[0] == 'no-usr-local-cuda.patch' and patch.keywords['when'] == '@25.07:'
    removed = [line for line in (perftest.path.parent / patch.args[0]).read_text().splitlines()
               if line.startswith('-') and not line.startswith('---')]
    assert removed[0] == '-if test -f "/usr/local/cuda/include/cuda.h"; then'
    assert not any(line.startswith('+') and not line.startswith('+++')
                   for line in (perftest.path.parent / patch.args[0]).read_text().splitlines())


def test_perftest_keeps_the_release_of_the_fixtures():
    """Debian 12's perftest 4.5+0.17-1 (the fixtures) is the GitHub tag v4.5-0.17."""
    versions = {d.args[0]: d.keywords for d in PACKAGES['perftest'].directives if d.name == 'version'}
    assert versions['4.5-0.17'] == {
        'sha256': 'e0cce1eed8414d9c22e58b5cc65b43718ea341b6020a08266b751695ef2b620a',
        'url': 'https://github.com/linux-rdma/perftest/archive/refs/tags/v4.5-0.17.tar.gz'}


def test_mvapich2_striping_is_its_own_recipe():
    """Not a subclass (which would re-run the builtin's maintainers, detection and versions):
    only the releases our patch was checked on, with the builtin's checksums for them."""
    package = PACKAGES['mvapich2-striping']
    assert package.builtin_parents == []
    versions = {d.args[0]: d.keywords for d in package.directives if d.name == 'version'}
    assert set(versions) == {f'2.3.{n}' for n in range(1, 8)}
    builtin_sha256 = BUILTIN['packages']['mvapich2']['sha256']
    for version, keywords in versions.items():
        assert keywords == {'sha256': builtin_sha256[version]}, version  # not deprecated
    # the newest checked release is the preferred one, and the one the environment pins
    env = yaml.safe_load((ENVS_DIR / 'ib-mvapich' / 'spack.yaml').read_text())['spack']
    assert any(s.startswith('mvapich2-striping@=2.3.7 ') for s in env['specs'])
    assert not {'executables', 'libraries'} & set(package.attributes), 'no external detection'
    detection = yaml.safe_load((package.path.parent / 'detection_test.yaml').read_text())
    (case,) = detection['paths']
    assert case['results'] == [] and case['layout'][0]['executables'] == ['bin/mpiname']
    assert 'MVAPICH2 2.3.7' in case['layout'][0]['script']
    assert [d.args[0] for d in package.directives if d.name == 'provides'] == ['mpi@:3.1']
    assert depends(package)['rdma-core'] is None


def test_ibrepro_benchmarks_builds_the_checkout():
    package = PACKAGES['ibrepro-benchmarks']
    versions = {d.args[0]: d.keywords for d in package.directives if d.name == 'version'}
    assert versions == {'develop': {'branch': 'main'}}
    (license_,) = [d.args[0] for d in package.directives if d.name == 'license']
    assert f'license = {{ text = "{license_}" }}' in (ROOT / 'pyproject.toml').read_text()
    assert depends(package) == {'c': None, 'gmake': None, 'mpi': None, 'rdma-core': '+verbs'}


def env_schema():
    """The subset of Spack 1.1's environment schema (lib/spack/spack/schema/env.py) we use."""
    spec_list = {'type': 'array', 'items': {'type': 'string', 'minLength': 1}}
    packages = {'type': 'object', 'additionalProperties': {
        'type': 'object', 'additionalProperties': False, 'properties': {
            'require': {'anyOf': [{'type': 'string'}, spec_list]},
            'buildable': {'type': 'boolean'},
            'externals': {'type': 'array', 'items': {
                'type': 'object', 'required': ['spec', 'prefix'], 'additionalProperties': False,
                'properties': {'spec': {'type': 'string'}, 'prefix': {'type': 'string'}}}},
            'prefer': spec_list, 'variants': {'type': 'string'}, 'version': {'type': 'array'},
        }}}
    view_root = {'type': 'object', 'required': ['root'], 'additionalProperties': False,
                 'properties': {'root': {'type': 'string'}, 'link': {'enum': ['all', 'run', 'roots']},
                                'select': spec_list, 'exclude': spec_list}}
    spack = {
        'type': 'object', 'required': ['specs'], 'additionalProperties': False,
        'properties': {
            'specs': spec_list,
            'include': spec_list,
            'packages': packages,
            'config': {'type': 'object'},
            'concretizer': {'type': 'object', 'properties': {'unify': {'enum': [True, False, 'when_possible']}}},
            'repos': {'type': 'object', 'additionalProperties': {'type': 'string'}},
            'develop': {'type': 'object', 'additionalProperties': {
                'type': 'object', 'required': ['spec'], 'additionalProperties': False,
                'properties': {'spec': {'type': 'string'}, 'path': {'type': 'string'}}}},
            'view': {'anyOf': [{'type': 'boolean'}, {'type': 'string'},
                               {'type': 'object', 'additionalProperties': view_root}]},
        }}
    return {'type': 'object', 'required': ['spack'], 'additionalProperties': False,
            'properties': {'spack': spack}}


PACKAGES_SCHEMA = {'type': 'object', 'required': ['packages'], 'additionalProperties': False,
                   'properties': {'packages': env_schema()['properties']['spack']['properties']['packages']}}


def test_environments_exist():
    assert {p.parent.name for p in ENV_FILES} >= {'generic', 'ib-mvapich'}


@pytest.mark.parametrize('path', ENV_FILES, ids=lambda p: p.parent.name)
def test_environment_is_valid(path):
    manifest = yaml.safe_load(path.read_text())
    jsonschema.validate(manifest, env_schema())
    env = manifest['spack']
    for spec in env['specs']:
        for name in spec_names(spec):
            assert name in KNOWN_PACKAGES, f'{path}: {spec!r}: unknown package {name!r}'
        exact = re.match(r'([\w-]+)@=(\S+)', spec)
        assert exact, f'{path}: {spec!r}: pin the exact version (name@=version)'
        assert exact.group(2) in versions_of(exact.group(1)), f'{path}: {spec!r}: no such version'
        for name, variant in spec_variants(spec):
            assert variant in variants_of(name), f'{path}: {spec!r}: {name} has no variant {variant!r}'
    for name, settings in env.get('packages', {}).items():
        # `all`: every package of the environment that has the variant takes it (cuda_arch)
        users = [spec_names(s)[0] for s in env['specs']] if name == 'all' else [name]
        assert all(n in KNOWN_PACKAGES for n in users), f'{path}: packages: unknown package {name!r}'
        for variant in re.findall(r'[+~]?([\w-]+)=|[+~]([\w-]+)', settings.get('variants', '')):
            assert any((variant[0] or variant[1]) in variants_of(n) for n in users), \
                f'{path}: {name} has no variant {variant!r}'
        required = settings.get('require', [])
        for spec in [required] if isinstance(required, str) else required:
            assert all(n in KNOWN_PACKAGES for n in spec_names(spec)), f'{path}: require {spec!r}'
    for name, develop in env.get('develop', {}).items():
        assert name in PACKAGES and spec_names(develop['spec'])[0] == name
        assert (path.parent / develop['path']).resolve() == ROOT / 'benchmarks'
    assert env['repos'] == {'ibrepro': '../../../spack-repo/spack_repo/ibrepro'}
    assert (path.parent / env['repos']['ibrepro'] / 'repo.yaml').is_file()
    # the ReFrame configuration finds the view at <checkout>/.deps/spack-view/<environment>
    # (not resolve(): once built, Spack makes the view a symlink to a versioned directory)
    view_root = os.path.normpath(path.parent / env['view']['default']['root'])
    assert view_root == str(ROOT / '.deps' / 'spack-view' / path.parent.name)


def test_the_source_reading_agrees_with_spack_on_the_packages_both_read():
    """spack_builtin_source_facts.py reads versions and variants from package sources (and their build-system
    bases) without Spack: on the packages Spack's own dump also holds, the two agree."""
    assert SOURCE['provenance']['spack_packages'].startswith('v2026.06.0 (d4f7c711')
    assert BUILTIN['provenance']['spack_packages'].startswith('v2026.06.0-0-gd4f7c711')
    assert SOURCE['controls'] and set(SOURCE['controls']) <= set(BUILTIN['packages'])
    for name in SOURCE['controls']:
        assert set(SOURCE['packages'][name]['versions']) == set(BUILTIN['packages'][name]['versions']), name
        assert SOURCE['packages'][name]['variants'] == BUILTIN['packages'][name]['variants'], name


@pytest.mark.parametrize('name', ['gpu', 'gpu-mpi'])
def test_the_gpu_environments_build_every_gpu_tool_with_cuda(name):
    """Each CUDA-capable spec of configs/spack/gpu and gpu-mpi asks for +cuda (nvbandwidth requires it, nccl-tests
    conflicts without it, perftest without it has no --use_cuda_bus_id, an MPI without it copies GPU buffers through
    the host), and one compute capability for them all."""
    env = yaml.safe_load((ENVS_DIR / name / 'spack.yaml').read_text())['spack']
    specs = {spec_names(s)[0]: s for s in env['specs']}
    assert {'cuda'} | ({'nvbandwidth', 'perftest'} if name == 'gpu' else
                       {'openmpi', 'ucx', 'gdrcopy', 'osu-micro-benchmarks', 'nccl-tests'}) <= set(specs)
    for package, spec in specs.items():
        if 'cuda' in variants_of(package):
            assert '+cuda' in spec.split(), spec
    assert env['packages']['all']['variants'] == 'cuda_arch=90'
    if name == 'gpu':     # no MPI: the MPI families' tools would give them an environment without one
        assert not {'openmpi', 'osu-micro-benchmarks', 'intel-mpi-benchmarks', 'npb'} & set(specs)
    else:                 # GPUDirect RDMA through UCX on the HCAs
        assert {'+gdrcopy', '+verbs', '+rc', '+mlx5_dv'} <= set(specs['ucx'].split())


def test_ib_mvapich_uses_the_striping_mpi():
    env = yaml.safe_load((ENVS_DIR / 'ib-mvapich' / 'spack.yaml').read_text())['spack']
    assert env['packages']['mpi']['require'] == ['mvapich2-striping']
    # our own recipe: none of its versions is deprecated (the builtin mvapich2's all are)
    assert 'config' not in env
    (mpi_spec,) = [s for s in env['specs'] if s.startswith('mvapich2-striping')]
    assert 'ports=2' in mpi_spec and 'striping_threshold=8192' in mpi_spec


def test_generic_builds_open_mpi_for_infiniband_under_slurm():
    """An Open MPI the generic environment builds uses UCX (the HCAs) and Slurm, not TCP and its own launcher."""
    env = yaml.safe_load((ENVS_DIR / 'generic' / 'spack.yaml').read_text())['spack']
    assert set(env['packages']['openmpi']['variants'].split()) == {'fabrics=ucx', 'schedulers=slurm'}
    assert {'fabrics', 'schedulers'} <= variants_of('openmpi')


def test_npb_is_restricted_to_the_catalog():
    """IS class B, FT class A (paper 000) and class B of the eight kernels (papers 001, 002), in the environments
    of the MPI families (the GPU environment has none of them)."""
    for path in ENV_FILES:
        found = [s for s in yaml.safe_load(path.read_text())['spack']['specs'] if s.startswith('npb')]
        assert len(found) == (not path.parent.name.startswith('gpu')), path
        if not found:
            continue
        (npb,) = found
        names = set(re.search(r'names=([\w,]+)', npb).group(1).split(','))
        classes = set(re.search(r'classes=([\w,]+)', npb).group(1).split(','))
        assert names == {'is', 'ft', 'cg', 'mg', 'lu', 'sp', 'bt', 'ep'} and classes == {'A', 'B'}


@pytest.mark.parametrize('path', EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_site_configuration_is_valid(path):
    config = yaml.safe_load(path.read_text())
    jsonschema.validate(config, PACKAGES_SCHEMA)
    for name, settings in config['packages'].items():
        assert name in KNOWN_PACKAGES, f'{path}: unknown package {name!r}'
        for external in settings.get('externals', []):
            assert spec_names(external['spec'])[0] == name, f'{path}: {external}'


def test_spec_parsing_helpers():
    assert spec_names('npb@=3.4.3 implementation=mpi ^mpich %gcc') == ['npb', 'mpich', 'gcc']
    assert spec_variants('intel-mpi-benchmarks@=2021.7 +mpi1 ~io names=a,b ^x+y') == [
        ('intel-mpi-benchmarks', 'mpi1'), ('intel-mpi-benchmarks', 'io'),
        ('intel-mpi-benchmarks', 'names')]
    assert pkg_name_to_class_name('mvapich2-striping') == 'Mvapich2Striping'
    assert pkg_name_to_class_name('3proxy') == '_3proxy'
    assert pkg_dir_to_pkg_name('ibrepro_benchmarks') == 'ibrepro-benchmarks'
