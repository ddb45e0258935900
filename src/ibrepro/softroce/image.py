"""The guest image: Debian's kernel (with rdma_rxe) and an initramfs built from Debian packages.

Nothing is installed on the host but QEMU, kmod and cpio: the .debs are downloaded into the cache
and unpacked into a directory that becomes the initramfs (busybox, rdma-core, perftest, iproute2,
python3-minimal for the agent, the guest files of ``ci/softroce/``). An optional host directory
adds binaries (our verbs benchmarks): its tree lands under ``/usr/local`` and the host libraries
they need and the image lacks are copied too.

Images are cached under ``<cache>/images/<key>``: the key hashes the exact .deb file names
(package, version, architecture), the guest files, this module and the extra directory. A build whose key
exists returns at once: one offline `apt-cache show` resolves the versions.
"""

import hashlib
import lzma
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..paths import REPO_ROOT

#: the guest's files: PID 1, its inittab, the boot-time set-up, the agent, the Slurm node's start
GUEST_DIR = REPO_ROOT / 'ci' / 'softroce'
GUEST_FILES = {'init': 'init', 'inittab': 'etc/inittab', 'setup.sh': 'etc/softroce/setup.sh',
               'agent.py': 'etc/softroce/agent.py', 'slurm-node.sh': 'etc/softroce/slurm-node.sh'}

#: the meta-package naming the current kernel ABI package (pin with $IBREPRO_SOFTROCE_KERNEL)
KERNEL_META = 'linux-image-amd64'

#: the guest's user space. Libraries are listed by hand; the build checks that every ELF file
#: finds all its libraries inside the image and names the one that is missing.
PACKAGES = [
    'busybox-static',                                   # sh, init, mount, modprobe, ...
    'bash',                                             # ReFrame's job scripts (#!/bin/bash)
    'perftest', 'ibverbs-utils', 'ibverbs-providers',   # ib_*, ibv_devinfo, librxe
    'libibverbs1', 'librdmacm1', 'libibumad3', 'libpci3',
    'iproute2',                                         # ip (veth, policy routing), rdma, tc
    'python3.11-minimal', 'libpython3.11-minimal',      # the agent and the pair runner ...
    'libpython3.11-stdlib',                             # ... with json, shlex, shutil, hmac (see PRUNE)
    'slurmd', 'slurm-client', 'slurm-wlm-basic-plugins',   # a Slurm compute node (configless)
    'munge', 'libmunge2',
    'coreutils',                                        # libstdbuf.so only (see PARTIAL)
    'libc6', 'libudev1', 'zlib1g', 'libexpat1', 'libnl-3-200', 'libnl-route-3-200', 'libbpf1',
    'libbsd0', 'libcap2', 'libdb5.3', 'libelf1', 'libmnl0', 'libselinux1',
    'libxtables12', 'libmd0', 'libpcre2-8-0', 'libtinfo6',
    # Slurm's and munge's libraries
    'libhwloc15', 'liblz4-1', 'libnuma1', 'libpam0g', 'libaudit1', 'libcap-ng0', 'libdbus-1-3',
    'libsystemd0', 'libzstd1', 'liblzma5', 'libgcrypt20', 'libgpg-error0', 'libjson-c5', 'libyaml-0-2',
    'libreadline8', 'libbz2-1.0',
]

#: packages of which only these members are unpacked
PARTIAL = {'coreutils': ['./usr/libexec/coreutils/libstdbuf.so']}

#: kernel modules (with their dependencies): the RDMA stack, the virtual NICs and cables, 9p
MODULES = ['rdma_rxe', 'rdma_ucm', 'ib_umad', 'veth', 'virtio_pci', 'virtio_net', '9p',
           '9pnet_virtio', 'crc32_generic', 'crc32-pclmul',
           'qemu_fw_cfg',              # files from the host: agent and munge keys, /etc/hosts
           'sch_tbf', 'sch_netem']     # tc: shaping a node's links from inside

#: files and directories (glob patterns) removed from the image: unused, or needing more libraries
PRUNE = ['usr/share/doc', 'usr/share/man', 'usr/share/locale', 'usr/share/lintian',
         'usr/share/info', 'usr/lib/x86_64-linux-gnu/gconv', 'usr/share/bug',
         # the stdlib (python3.11-minimal has no json, shlex, shutil, hmac, ...) without its tests and
         # tools, and without the C modules whose libraries the image lacks (libssl, sqlite, libffi, ...)
         *[f'usr/lib/python3.11/{m}' for m in (
             'test', 'pydoc_data', 'distutils', 'venv', 'idlelib', 'tkinter', 'turtledemo', 'lib2to3',
             'ensurepip', 'sqlite3', 'ctypes', 'curses', 'dbm', 'turtle.py', 'pydoc.py')],
         *[f'usr/lib/python3.11/lib-dynload/{m}*' for m in (
             '_ssl', '_hashlib', '_sqlite3', '_ctypes', '_uuid', '_dbm', '_gdbm', '_curses', 'nis', '_crypt',
             '_decimal', '_tkinter', 'readline')],
         'bin/ss', 'usr/lib/x86_64-linux-gnu/tc',   # iproute2's ss (libtirpc) and tc plugins
         # Slurm plugins a compute node of ours never loads, and the libraries they would need
         'usr/lib/x86_64-linux-gnu/slurm-wlm/*_lua.so', 'usr/lib/x86_64-linux-gnu/slurm-wlm/*cray*',
         'usr/lib/x86_64-linux-gnu/slurm-wlm/openapi_*', 'usr/lib/x86_64-linux-gnu/slurm-wlm/rest_auth_*',
         'usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix*',   # libpmix: no Open MPI in the guests
         'usr/sbin/slurmstepd.lua*', 'usr/bin/sview', 'usr/bin/smap']

#: images kept in the cache (other branches or extra directories give other keys)
KEEP_IMAGES = 3

#: the guest loader's configuration (libc-bin, not in the image, owns /etc/ld.so.conf); Slurm's own library
#: directory too: its programs find libslurmfull.so by an absolute RUNPATH, which the check below would
#: resolve on the host
LD_SO_CONF = 'include /etc/ld.so.conf.d/*.conf\n/usr/local/lib\n/usr/lib/x86_64-linux-gnu/slurm-wlm\n'
#: links the packages' maintainer scripts would make (update-alternatives), and python3
SYMLINKS = {'usr/bin/python3': 'python3.11', 'usr/sbin/slurmd': 'slurmd-wlm', 'usr/sbin/slurmstepd': 'slurmstepd-wlm'}

#: the accounts and name service of the guest (no base-files, passwd or libc-bin in the image): slurmd
#: looks up the job's user, munged its own
ETC_FILES = {
    'passwd': 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n',
    'group': 'root:x:0:\nnogroup:x:65534:\n',
    'nsswitch.conf': 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n',
}

#: directories the loader searches without configuration
TRUSTED_LIB_DIRS = ['/lib', '/usr/lib']


class ImageError(RuntimeError):
    """The image cannot be built; the message says which package, file or tool and why."""


def _run(cmd, **kwargs):
    try:
        return subprocess.run(cmd, check=True, text=True, capture_output=True, **kwargs).stdout
    except FileNotFoundError:
        raise ImageError(f'{cmd[0]} is not installed (`ibrepro softroce build` installs it '
                         'when run as root)') from None
    except subprocess.CalledProcessError as err:
        raise ImageError(f'`{" ".join(map(str, cmd))}` failed (exit {err.returncode}): '
                         f'{(err.stderr or err.stdout).strip()[-2000:]}') from None


HOST_TOOLS = ('qemu-system-x86_64', 'depmod', 'modinfo', 'cpio')


def missing_host_tools():
    """The programs the guests need that are not on PATH (kmod's are in /usr/sbin, not on a user's PATH)."""
    return [t for t in HOST_TOOLS if not shutil.which(t)]


def ensure_host_tools(log=print):
    """Install QEMU, kmod and cpio from Debian if one of them is missing (root only)."""
    missing = missing_host_tools()
    if not missing:
        return

    if os.geteuid() != 0:
        raise ImageError(f'{", ".join(missing)} not installed; as root run `apt-get install '
                         'qemu-system-x86 kmod cpio`')

    log(f'softroce: installing qemu-system-x86 kmod cpio (missing: {", ".join(missing)})')
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    _run(['apt-get', 'update', '-q'], env=env)
    _run(['apt-get', 'install', '-y', '-q', '--no-install-recommends', 'qemu-system-x86', 'kmod',
          'cpio'], env=env)


def _candidates(packages):
    """{package: {field: value}} of the candidate versions, read offline from the package lists."""
    out = subprocess.run(['apt-cache', 'show', '--no-all-versions', *packages], text=True,
                         capture_output=True)
    records = {}
    for block in out.stdout.split('\n\n'):
        fields = dict(re.findall(r'^([\w-]+): (.*)$', block, re.M))
        if 'Package' in fields:
            records.setdefault(fields['Package'], fields)

    return records


def _deb_name(package, version, arch='amd64'):
    """The file name `apt-get download` gives a package (the epoch's colon URL-encoded)."""
    return f'{package}_{version.replace(":", "%3a")}_{arch}.deb'


def resolve(packages=PACKAGES, log=print):
    """{package: exact .deb file name} of the kernel and of ``packages``, and the kernel package.

    One `apt-cache show` (apt-get update once first if a package is unknown). The kernel ABI
    package is the one the meta-package depends on, unless $IBREPRO_SOFTROCE_KERNEL pins it.
    """
    pinned = os.environ.get('IBREPRO_SOFTROCE_KERNEL')
    names = [pinned or KERNEL_META, *packages]
    for attempt in (1, 2):
        records = _candidates(names)
        missing = [p for p in names if p not in records]
        if not missing:
            break

        if attempt == 1 and os.geteuid() == 0:
            log(f'softroce: {", ".join(missing)} not in the package lists; running apt-get update')
            _run(['apt-get', 'update', '-q'])
    else:
        raise ImageError(f'Debian packages not found in the package lists: {", ".join(missing)}')

    debs = {p: _deb_name(p, records[p]['Version'], records[p]['Architecture']) for p in packages}
    if pinned:
        kernel = pinned
        debs[kernel] = _deb_name(kernel, records[kernel]['Version'])
    else:
        m = re.search(r'(linux-image-\d\S*) \(= (\S+)\)', records[KERNEL_META].get('Depends', ''))
        if not m:
            raise ImageError(f'{KERNEL_META} does not name a kernel package: '
                             f'{records[KERNEL_META].get("Depends")!r}')
        kernel = m.group(1)
        debs[kernel] = _deb_name(kernel, m.group(2))

    return kernel, debs


def cache_key(debs, extra=None):
    """A short hash of the exact .deb versions, the guest files, this builder and the extras."""
    h = hashlib.sha256()
    for name in sorted(debs):
        h.update(name.encode() + b'\n')
    for name in sorted(GUEST_FILES):
        h.update(name.encode() + (GUEST_DIR / name).read_bytes())
    h.update(Path(__file__).read_bytes())   # how the image is put together
    if extra:
        for path in sorted(Path(extra).rglob('*')):
            if path.is_file():
                h.update(str(path.relative_to(extra)).encode() + path.read_bytes())

    return h.hexdigest()[:16]


def _download(debs, deb_dir, log):
    deb_dir.mkdir(parents=True, exist_ok=True)
    need = [name for name in debs if not (deb_dir / name).exists()]
    if need:
        log(f'softroce: downloading {len(need)} .deb files into {deb_dir}')
        # exact versions (pkg=version); the sandbox user _apt cannot write root's cache
        _run(['apt-get', '-o', 'APT::Sandbox::User=root', 'download',
              *[n.split('_')[0] + '=' + n.split('_')[1].replace('%3a', ':') for n in need]],
             cwd=deb_dir)
        absent = [n for n in need if not (deb_dir / n).exists()]
        if absent:
            raise ImageError(f'apt-get download did not produce {", ".join(absent)} in {deb_dir}')


def _unpack(deb, dest, members=None):
    if members is None:
        _run(['dpkg-deb', '-x', str(deb), str(dest)])
        return

    tar = subprocess.Popen(['dpkg-deb', '--fsys-tarfile', str(deb)], stdout=subprocess.PIPE)
    _run(['tar', '-x', '-C', str(dest), *members], stdin=tar.stdout)
    tar.wait()


def _install_modules(kern, root):
    """Copy MODULES and their dependencies from the unpacked kernel package into ``root``."""
    version = next((kern / 'lib' / 'modules').iterdir()).name
    mod_dir = kern / 'lib' / 'modules' / version
    _run(['depmod', '-b', str(kern), version])
    deps = {}
    for line in (mod_dir / 'modules.dep').read_text().splitlines():
        name, _, rest = line.partition(':')
        deps[name] = rest.split()

    wanted = set()
    for module in MODULES:
        path = _run(['modinfo', '-b', str(kern), '-k', version, '-n', module]).strip()
        rel = os.path.relpath(path, mod_dir)
        wanted.update([rel, *deps.get(rel, [])])

    for rel in wanted:
        (root / 'lib/modules' / version / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(mod_dir / rel, root / 'lib/modules' / version / rel)
    for name in ('modules.order', 'modules.builtin', 'modules.builtin.modinfo'):
        shutil.copy2(mod_dir / name, root / 'lib/modules' / version / name)
    _run(['depmod', '-b', str(root), version])
    return version, sorted(wanted)


def _elf_files(root):
    for path in sorted(root.rglob('*')):
        if path.is_file() and not path.is_symlink() and path.suffix != '.ko':
            with open(path, 'rb') as f:
                if f.read(4) == b'\x7fELF':
                    yield path


def _lib_dirs(root):
    """The directories the guest's loader searches: its ld.so.conf (with includes), then the trusted ones."""
    dirs = []
    for line in (root / 'etc/ld.so.conf').read_text().splitlines():
        if line.startswith('include '):
            for conf in sorted(root.glob(line.split(None, 1)[1].lstrip('/'))):
                dirs += [d for d in conf.read_text().split() if d.startswith('/')]
        elif line.startswith('/'):
            dirs.append(line.strip())
    return dirs + TRUSTED_LIB_DIRS


def _missing_libs(root):
    """{elf path: [library names]} that ``root``'s own loader cannot find inside ``root``,
    searching the directories the guest's ld.so.cache is built from."""
    loader = root / 'lib64' / 'ld-linux-x86-64.so.2'
    libpath = ':'.join(str(root / d.lstrip('/')) for d in _lib_dirs(root))
    missing = {}
    for elf in _elf_files(root):
        out = subprocess.run([str(loader), '--inhibit-cache', '--library-path', libpath, '--list',
                              str(elf)], text=True, capture_output=True).stdout
        for m in re.finditer(r'^\s*(\S+) => (not found|(/\S+))', out, re.M):
            if m.group(2) == 'not found' or not m.group(3).startswith(str(root) + '/'):
                missing.setdefault(elf, []).append(m.group(1))

    return missing


def _host_lib(name):
    """The host's path of shared library ``name`` (from ldconfig's cache), or None."""
    for line in _run(['ldconfig', '-p']).splitlines():
        m = re.match(rf'\s*{re.escape(name)} \(libc6,x86-64[^)]*\) => (\S+)', line)
        if m:
            return m.group(1)

    return None


def _add_extra(extra, root, log):
    """Copy the tree ``extra`` into /usr/local and the host libraries it needs that ``root`` lacks."""
    extra = Path(extra)
    if not extra.is_dir():
        raise ImageError(f'extra directory {extra} does not exist')

    shutil.copytree(extra, root / 'usr/local', symlinks=True, dirs_exist_ok=True)
    added = []
    for _ in range(8):   # libraries of the added libraries, a few levels deep
        need = {lib for elf, libs in _missing_libs(root).items()
                if elf.is_relative_to(root / 'usr/local') for lib in libs}
        if not need:
            return added

        for lib in sorted(need):
            host = _host_lib(lib)
            if not host:
                raise ImageError(f'{extra}: a binary needs {lib}, which neither the image nor '
                                 'the host has')
            (root / 'usr/local/lib').mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.realpath(host), root / 'usr/local/lib' / lib)
            added.append(host)
        log(f'softroce: copied host libraries for {extra}: {", ".join(sorted(need))}')

    return added


def _write_kernel(kern, dest):
    """The kernel as QEMU boots it fastest; returns its file name.

    An XZ bzImage decompresses itself slowly under TCG: when the kernel has CONFIG_PVH, the
    uncompressed ELF (``vmlinux``) boots directly through its PVH entry (boot 2x faster here).
    """
    vmlinuz = next((kern / 'boot').glob('vmlinuz-*'))
    config = next((kern / 'boot').glob('config-*')).read_text()
    data = vmlinuz.read_bytes()
    start = data.find(b'\xfd7zXZ\x00')
    if re.search(r'^CONFIG_PVH=y$', config, re.M) and start >= 0:
        elf = lzma.LZMADecompressor().decompress(data[start:])
        if elf[:4] == b'\x7fELF':
            (dest / 'vmlinux').write_bytes(elf)
            return 'vmlinux'

    shutil.copy2(vmlinuz, dest / 'vmlinuz')
    return 'vmlinuz'


def _write_cpio(root, dest):
    """An uncompressed newc archive of ``root`` (the kernel unpacks it faster than a gzip one)."""
    files = subprocess.run(['find', '.'], cwd=root, capture_output=True, check=True).stdout
    with open(dest, 'wb') as out:
        cpio = subprocess.run(['cpio', '-o', '-H', 'newc', '-R', '0:0', '--quiet'], cwd=root,
                              input=files, stdout=out, stderr=subprocess.PIPE)
    if cpio.returncode:
        raise ImageError(f'cpio of {root} failed: {cpio.stderr.decode(errors="replace")}')


def _assemble(root, kern, debs, extra, log):
    """Unpack the packages, modules, guest files and extras into ``root``; check its libraries."""
    for pkg in PACKAGES:
        _unpack(debs[pkg], root, PARTIAL.get(pkg))
    for path in (p for pattern in PRUNE for p in root.glob(pattern)):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    version, modules = _install_modules(kern, root)
    for name, dest in GUEST_FILES.items():
        (root / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(GUEST_DIR / name, root / dest)
    (root / 'init').chmod(0o755)
    for link, target in SYMLINKS.items():
        (root / link).symlink_to(target)
    (root / 'sbin/modprobe').symlink_to('/bin/busybox')   # the kernel's request_module()
    (root / 'etc/ld.so.conf').write_text(LD_SO_CONF)
    for name, text in ETC_FILES.items():
        (root / 'etc' / name).write_text(text)
    for d in ('proc', 'sys', 'dev', 'tmp', 'run', 'root', 'bb', 'mnt'):
        (root / d).mkdir(exist_ok=True)
    added = _add_extra(extra, root, log) if extra else []
    missing = _missing_libs(root)
    if missing:
        raise ImageError('libraries missing from the image (add their Debian packages to '
                         'ibrepro.softroce.image.PACKAGES): ' + '; '.join(
                             f'{elf.relative_to(root)} needs {", ".join(libs)}'
                             for elf, libs in missing.items()))
    _run(['ldconfig', '-r', str(root)])
    return version, modules, added


def build(cache, extra=None, log=print):
    """Build (or find in ``cache``) the image; return its directory.

    The directory holds ``vmlinux`` (or ``vmlinuz``), ``initramfs.cpio`` and ``manifest.txt``
    (written last: an image without it is incomplete).
    """
    t0 = time.monotonic()
    ensure_host_tools(log)
    kernel, debs = resolve(log=log)
    key = cache_key(debs.values(), extra)
    image = Path(cache) / 'images' / key
    if (image / 'manifest.txt').exists():
        os.utime(image)   # recently used: kept by _prune
        log(f'softroce: image {key} is cached ({time.monotonic() - t0:.1f} s)')
        return image

    deb_dir = Path(cache) / 'debs'
    _download(debs.values(), deb_dir, log)
    t1 = time.monotonic()
    image.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=image.parent, prefix='.build-') as tmp:
        tmp = Path(tmp)
        kern, root = tmp / 'kernel', tmp / 'root'
        root.mkdir()
        _unpack(deb_dir / debs[kernel], kern)
        version, modules, added = _assemble(
            root, kern, {p: deb_dir / debs[p] for p in PACKAGES}, extra, log)
        shutil.rmtree(image, ignore_errors=True)   # an incomplete earlier build
        image.mkdir()
        kernel_file = _write_kernel(kern, image)
        _write_cpio(root, image / 'initramfs.cpio')
        (image / 'manifest.txt').write_text(
            f'key {key}\nkernel {version} ({debs[kernel]}) as {kernel_file}\n'
            + ''.join(f'deb {debs[p]}\n' for p in PACKAGES)
            + ''.join(f'module {m}\n' for m in modules)
            + (f'extra {Path(extra).resolve()}\n' if extra else '')
            # what the guests can run, by name: the extra directory may be gone when the image is reused
            + ''.join(f'extra-bin {p.name}\n' for p in (sorted((Path(extra) / 'bin').glob('*')) if extra else []))
            + ''.join(f'host-lib {lib}\n' for lib in added))

    _prune(image.parent)
    log(f'softroce: built image {key} in {time.monotonic() - t0:.1f} s '
        f'(download {t1 - t0:.1f} s) -> {image}')
    return image


def _prune(images, keep=KEEP_IMAGES):
    """Remove all but the ``keep`` most recently used images."""
    built = sorted((p for p in images.iterdir() if not p.name.startswith('.')),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    for old in built[keep:]:
        shutil.rmtree(old)
