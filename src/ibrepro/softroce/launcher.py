"""The ``softroce`` ReFrame launcher and the partition pieces that name the guests.

The launcher prefixes every command with ``guestexec`` of the guest named in the partition's
``access`` (``['--node=n0']``), as ReFrame's ssh launcher takes its host from ``access``; the
``local`` scheduler ignores ``access`` otherwise. Launcher ``env_vars`` reach the guest as
``--env NAME=VALUE`` (the job script's own exports stay on the host).

Importing this module registers the launcher (the ReFrame configuration imports it).
"""

import shlex
import sys

from reframe.core.backends import register_launcher
from reframe.core.launchers import JobLauncher

from . import guests, run_dir


def guest_exec(node):
    """The shell command prefix that runs a command in guest ``node`` ('n0', 'n1')."""
    return ' '.join(shlex.quote(t) for t in
                    [sys.executable, '-m', 'ibrepro.softroce.guestexec', f'--run-dir={run_dir()}',
                     f'--node={node}'])


def side(node, device):
    """One side of a partition's ``rdma_pair``: where it runs, its device and its address."""
    return {'launch': guest_exec(node), 'device': device, 'host': guests.address(node, device)}


@register_launcher('softroce')
class SoftRoCELauncher(JobLauncher):
    def command(self, job):
        env = [shlex.quote(f'--env={k}={v}') for k, v in self.env_vars.items()]
        node = next((a.split('=', 1)[1] for a in job.sched_access if a.startswith('--node=')), 'n0')
        return [guest_exec(node), *env]
