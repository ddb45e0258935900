"""Read what tests/test_spack_static.py needs to know about builtin packages that tests/data/spack-builtin.json
(dumped by Spack itself) lacks, from the package sources of a spack-packages clone, without Spack.

Each package's versions are its ``version("...")`` directives with a literal name (cuda's, declared in a loop over a
table, are not read: spack-builtin.json has them); its variants are the ``variant("...")`` directives of
its class and of the build-system classes it derives from (``spack_repo.builtin.build_systems``: CudaPackage's
``cuda`` and ``cuda_arch``, CMakePackage's ``build_type``, ...), plus ``build_system`` where a base declares one. The
packages both files hold are read here too, so the test can check that this reading agrees with Spack's own.

    python tests/data/spack_builtin_source_facts.py GIT_DIR v2026.06.0 > tests/data/spack-builtin-source.json
"""

import ast
import json
import subprocess
import sys

#: Builtin packages of the GPU environments (configs/spack/gpu, gpu-mpi) that spack-builtin.json lacks.
PACKAGES = ['nvbandwidth', 'nccl-tests', 'nccl', 'gdrcopy', 'ucx']
#: Packages spack-builtin.json also holds (dumped by Spack): the reading here must agree with Spack's on them.
CONTROLS = ['osu-micro-benchmarks', 'openmpi', 'npb', 'rdma-core']

ROOT = 'repos/spack_repo/builtin'

#: Classes of Spack's core that build_systems modules re-export (generic.py: ``from spack.package import
#: Package``), which a clone of spack-packages does not hold: Spack's ``Package`` declares ``build_system("generic")``.
CORE = {'Package': {'build_system'}}


def show(git_dir, rev, path):
    done = subprocess.run(['git', '--git-dir', git_dir, 'show', f'{rev}:{path}'], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f'{path} at {rev}: {done.stderr.strip()}')
    return done.stdout


def _directives(node, name):
    """The first string argument of each ``name(...)`` call in a class body (in ``with when(...)`` blocks too, not in
    methods)."""
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == name:
            if child.args and isinstance(child.args[0], ast.Constant) and isinstance(child.args[0].value, str):
                found.append(child.args[0].value)
        found += _directives(child, name)
    return found


def read_class(git_dir, rev, path, class_name):
    """(versions, variants) of ``class_name`` in the module at ``path``, with the variants of its bases."""
    tree = ast.parse(show(git_dir, rev, path))
    imports = {alias.asname or alias.name: node.module for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module for alias in node.names}
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    if not classes and class_name in CORE:
        return [], set(CORE[class_name])
    (cls,) = classes
    versions = _directives(cls, 'version')
    variants = set(_directives(cls, 'variant'))
    # directive helpers of the module (cmake.py's generator(...) declares the variant "generator")
    for helper in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        if _directives(cls, helper.name) or any(isinstance(c, ast.Call) and getattr(c.func, 'id', None) == helper.name
                                                for c in ast.walk(cls)):
            variants |= {c.args[0].value for c in ast.walk(helper) if isinstance(c, ast.Call)
                         and getattr(c.func, 'id', None) == 'variant' and c.args
                         and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)}
    if _directives(cls, 'build_system'):
        variants.add('build_system')
    for base in cls.bases:
        module = imports.get(base.id) if isinstance(base, ast.Name) else None
        if module and module.startswith('spack_repo.builtin.build_systems.'):
            variants |= read_class(git_dir, rev, f'{ROOT}/build_systems/{module.rsplit(".", 1)[1]}.py', base.id)[1]
    return versions, variants


def class_name(package):
    return ''.join(part.capitalize() for part in package.replace('_', '-').split('-'))


def main(git_dir, rev):
    described = subprocess.run(['git', '--git-dir', git_dir, 'rev-parse', f'{rev}^{{commit}}'], capture_output=True,
                               text=True).stdout.strip()
    facts = {'provenance': {'spack_packages': f'{rev} ({described[:10]})',
                            'command': f'python tests/data/spack_builtin_source_facts.py GIT_DIR {rev}',
                            'method': 'AST of each package.py and of its build_systems bases; no Spack'},
             'controls': CONTROLS, 'packages': {}}
    for package in PACKAGES + CONTROLS:
        versions, variants = read_class(git_dir, rev, f'{ROOT}/packages/{package.replace("-", "_")}/package.py',
                                        class_name(package))
        facts['packages'][package] = {'versions': versions, 'variants': sorted(variants)}
    json.dump(facts, sys.stdout, indent=1)
    print()


if __name__ == '__main__':
    main(*sys.argv[1:3])
