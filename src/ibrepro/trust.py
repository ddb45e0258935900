"""Whether a directory or file is ours to trust, and writing files others may read without trusting anyone else.

ibrepro runs as root on many sites (CI runners, a nightly service), and ReFrame runs job scripts it wrote under the
data directory (``$IBREPRO_HOME``), stores sessions in a SQLite database a trigger could run SQL from, and takes a
lock beside it. Anything another user can change there is code or data they control: a renamed stage directory
runs their job script as root. So every path ibrepro writes or executes under goes through :func:`problem`, one
decision, before it is used:

* each directory from ``/`` down, and the entry itself, is owned by the running user or root;
* none is writable by others, nor by a group, except the user's private group (``alice:alice`` with no other
  member) and the group of ``$IBREPRO_GROUP`` (below); above the directory the user chose (``root``: the data
  directory, a verdict file's directory), a root-owned sticky directory such as ``/tmp`` is fine: no one else can
  rename or remove what is ours in it;
* a symbolic link is followed only where it sits in such a directory: no one else can have made it or swap it;
* the entry is the kind expected (a directory, a regular file).

``IBREPRO_GROUP=<group>`` (docs/site-setup.md) is a site asking for a shared group directory: entries of that group
may be group-writable and owned by any of its members; everyone outside the group is still held to the rules above.

A refusal (:class:`Refused`) is one line naming the path, its owner, group and mode, and what to do. Under ReFrame
(a configuration being loaded) it is also a ReFrame ``ConfigError``, which ReFrame prints as that one line
instead of a traceback.
"""

import errno
import grp
import os
import pwd
import secrets
import stat
import sys
from pathlib import Path

#: The environment variable naming a group whose members share the data directory (docs/site-setup.md).
GROUP_VARIABLE = 'IBREPRO_GROUP'

#: Symbolic links followed in one path at most (the kernel's limit).
_MAX_LINKS = 40


class Refused(ValueError):
    """A setting or path refused, in one line. Raised while ReFrame is loaded it is a ReFrame ``ConfigError`` too."""

    def __new__(cls, *args):
        rfm = sys.modules.get('reframe.core.exceptions')
        if rfm is not None and not issubclass(cls, rfm.ConfigError):
            cls = _as_config_error(cls, rfm.ConfigError)
        return super().__new__(cls, *args)

    def __init__(self, message):
        super().__init__(message)
        self._message = message     # what ReFrame's exceptions print

    def __str__(self):
        return str(self.args[0]) if self.args else ''


class Untrusted(Refused):
    """A path that is not ours to trust (:func:`problem`)."""


_CONFIG_ERRORS = {}


def _as_config_error(cls, config_error):
    if cls not in _CONFIG_ERRORS:
        _CONFIG_ERRORS[cls] = type(cls.__name__, (cls, config_error), {'__module__': cls.__module__})
    return _CONFIG_ERRORS[cls]


def shared_group(environ=os.environ):
    """The gid of ``$IBREPRO_GROUP``, or None; Refused when it names no group or one the running user is not in."""
    name = environ.get(GROUP_VARIABLE, '').strip()
    if not name:
        return None
    try:
        group = grp.getgrgid(int(name)) if name.isdigit() else grp.getgrnam(name)
    except (KeyError, ValueError, OverflowError):
        raise Refused(f'{GROUP_VARIABLE}={name!r}: no such group (name the group that shares the ibrepro data '
                      'directory, or unset it)') from None
    if os.geteuid() != 0 and group.gr_gid not in (os.getegid(), *os.getgroups()):
        raise Refused(f'{GROUP_VARIABLE}={name!r}: you are not a member of group {group.gr_name} (newgrp '
                      f'{group.gr_name}, or unset {GROUP_VARIABLE})')
    return group.gr_gid


def _name(table, ident):
    try:
        return (table.getpwuid if table is pwd else table.getgrgid)(ident)[0]
    except (KeyError, OverflowError):
        return str(ident)


def describe(info):
    """``owner alice, group users, mode 1777`` of an lstat result."""
    return (f'owner {_name(pwd, info.st_uid)}, group {_name(grp, info.st_gid)}, '
            f'mode {stat.S_IMODE(info.st_mode):04o}')


def _private_group(gid, uid):
    """True when ``gid`` is the user-private group of ``uid`` (same name, its primary group, no other member)."""
    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except (KeyError, OverflowError):
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _member(uid, gid):
    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except (KeyError, OverflowError):
        return False
    return user.pw_gid == gid or user.pw_name in group.gr_mem


def _judge(path, info, strict, group):
    """Why one entry is not ours (``'owned by ...'``), or None."""
    me = os.geteuid()
    in_group = group is not None and info.st_gid == group
    if info.st_uid not in (me, 0) and not (in_group and _member(info.st_uid, group)):
        return f'is owned by {_name(pwd, info.st_uid)}, not by you'
    mode = info.st_mode
    # a root-owned sticky directory above ours (/tmp): others cannot rename or remove our entries in it
    sticky_root = not strict and stat.S_ISDIR(mode) and mode & stat.S_ISVTX and info.st_uid == 0
    if mode & stat.S_IWOTH and not sticky_root:
        return 'is writable by others'
    if mode & stat.S_IWGRP and not (sticky_root or in_group or _private_group(info.st_gid, me)):
        return f'is writable by group {_name(grp, info.st_gid)}'
    return None


def _todo(why, entry, name):
    if why.startswith('is owned by'):
        return (f'remove it (as its owner or root) and let ibrepro create it, or set {name} to a directory of yours'
                if name else 'remove it (as its owner or root), or use a path of yours')
    if why.startswith('is writable by group'):
        return (f'chmod g-w {entry}, or for a directory shared by that group set {GROUP_VARIABLE}=<group> '
                '(docs/site-setup.md)')
    if why.startswith('is writable'):
        return f'chmod go-w {entry}' + (f', or set {name} to a directory of yours' if name else '')
    return f'remove it, or set {name} elsewhere' if name else 'remove it'


def problem(path, *, kind='dir', root=None, name=None, follow=True, environ=os.environ):
    """Why ``path`` is not ours to trust, as the one line a refusal prints; None when it is (or does not exist
    yet, in a directory that is ours: :func:`make_dir` and :func:`write_file` create it there).

    ``kind``: ``'dir'``, ``'file'`` or None (either). ``root``: the directory the user chose (the data directory,
    the directory of a file named on the command line); it and everything below it is held to the strict rules,
    the directories above it may be root-owned sticky ones (``/tmp``). Default: ``path`` itself. ``name``: the
    setting the path comes from, for the advice (``IBREPRO_HOME``). ``follow=False``: ``path`` itself may not be a
    symbolic link (a file opened by a library that follows links).
    """
    group = shared_group(environ)
    path = Path(os.path.abspath(path))
    root = Path(os.path.abspath(root)) if root is not None else path
    named = path.parts
    # (name, index of the component of ``path`` it resolves, whether it ends that component's resolution)
    todo = [(part, i, True) for i, part in enumerate(named) if i]
    current, links = Path('/'), 0
    info = os.lstat(current)
    why = _judge(current, info, root == current, group)
    if why:
        return f'/ ({describe(info)}) {why}: {_todo(why, current, name)}'
    while todo:
        part, i, final = todo.pop(0)
        entry = current.parent if part == '..' else current if part == '.' else current / part
        try:
            info = os.lstat(entry)
        except FileNotFoundError:
            return None
        except OSError as err:
            return f'{entry}: cannot be examined ({err.strerror})'
        if stat.S_ISLNK(info.st_mode) and not follow and final and i == len(named) - 1:
            return f'{entry} ({describe(info)}) is a symbolic link: remove it'
        if stat.S_ISLNK(info.st_mode):
            # the directory holding it is ours (judged already): no one else made this link or can swap it
            links += 1
            if links > _MAX_LINKS:
                return f'{path}: too many symbolic links'
            target = os.readlink(entry)
            if target.startswith('/'):
                current = Path('/')
            parts = [p for p in Path(target).parts if p not in ('/', '.')] or ['.']
            todo = [(p, i, final and j == len(parts) - 1) for j, p in enumerate(parts)] + todo
            continue
        # strict from the directory the user chose down; a link's way there only needs to be unswappable
        strict = final and _is_below(Path(*named[:i + 1]), root)
        why = _judge(entry, info, strict, group)
        last = not todo
        if not why and last and kind == 'file' and not stat.S_ISREG(info.st_mode):
            why = 'is not a regular file'
        elif not why and (not last or kind == 'dir') and not stat.S_ISDIR(info.st_mode):
            why = 'is not a directory'
        if why:
            return f'{entry} ({describe(info)}) {why}: {_todo(why, entry, name)}'
        current = entry
    return None


def _is_below(entry, root):
    """True when ``entry`` (as named, before links) is ``root`` or inside it."""
    return entry == root or root in entry.parents


def check(path, *, kind='dir', root=None, name=None, follow=True, environ=os.environ):
    """``path`` when it is ours to trust (or absent in a directory that is), else :class:`Untrusted`."""
    why = problem(path, kind=kind, root=root, name=name, follow=follow, environ=environ)
    if why:
        raise Untrusted(why)
    return Path(path)


def make_dir(path, *, root=None, name=None, mode=0o700, environ=os.environ):
    """``path``, a directory that is ours: each missing level created (``mode``; with ``$IBREPRO_GROUP`` group
    ``rwx`` and setgid in that group), then every level checked (:func:`check`: a directory someone else made first
    is refused, never used). Untrusted otherwise; NotADirectoryError where a file of ours is in the way."""
    path = Path(os.path.abspath(path))
    group = shared_group(environ)
    check(path, kind=None, root=root, name=name, environ=environ)
    missing = []
    for level in [path, *path.parents]:
        if os.path.lexists(level):
            break
        missing.append(level)
    for level in reversed(missing):
        try:
            os.mkdir(level, mode)
        except FileExistsError:
            pass            # someone made it meanwhile: the check below judges whose it is
        else:
            if group is not None:
                os.chown(level, -1, group)
                os.chmod(level, mode | stat.S_ISGID | (mode & 0o700) >> 3)
        check(level, kind=None, root=root, name=name, environ=environ)
    check(path, kind=None, root=root, name=name, environ=environ)
    if not path.is_dir():    # a file of ours where the directory should be: not a matter of trust
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    return path


def write_file(path, data, *, mode=0o600, root=None, name=None, environ=os.environ):
    """Write ``data`` (str or bytes) to ``path`` whole: through a private temporary file beside it (a random name,
    created with O_EXCL|O_NOFOLLOW: never another user's file nor a link), given ``mode`` once written, then
    renamed over ``path``, so a reader sees the old file or the new one. The directory must be ours
    (:func:`check`; ``root`` defaults to it); Untrusted otherwise, with nothing written."""
    path = Path(os.path.abspath(path))
    # what is at ``path`` now is only renamed over, never opened: whoever's it is, nothing of it is followed
    directory = check(path.parent, root=root if root is not None else path.parent, name=name, environ=environ)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, 'O_CLOEXEC', 0)
    tmp = directory / f'.{path.name}.{secrets.token_hex(6)}.partial'
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, 'wb') as fp:
            fp.write(data.encode() if isinstance(data, str) else data)
            fp.flush()
            os.fchmod(fp.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path

