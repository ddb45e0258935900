"""ReFrame configuration of the soft-RoCE nodes: QEMU guests whose RDMA ports are rdma_rxe.

Start the guests first (`ibrepro softroce up [--nodes 2]`, or wrap the run in `ibrepro softroce run
-- reframe ...`), then

    reframe -C configs/softroce.py --system softroce -c reframe-checks/verbs -r

Partitions (jobs run on the host with the `local` scheduler; the `softroce` launcher runs each
command in a guest through its agent; the stage directories are under the directory shared into
the guests, at the same path):
  dualport  one guest, rxe0 <-> rxe1 cabled back to back (a dual-port HCA)
  nodes2    two guests, n0:rxe2 <-> n1:rxe2 over a link (needs `up --nodes 2`)
The guests are emulated by TCG: `emulated` tells checks that the numbers are not performance data;
`perftest_options` are options every perftest run on the partition needs (here a longer QP timeout).

`rdma_pair` is what client/server checks (perftest) need, and what a real site writes the same way:
  server/client: {'launch': command prefix that runs a program on that side ('' = here),
                  'device': RDMA device, optional 'port' (perftest -i) and 'gid_index' (-x)};
  server also has 'host': the address the client connects to (a shell word: on Slurm e.g.
  '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)', with 'launch':
  'srun --nodes=1 --ntasks=1 --relative=0' and 'srun ... --relative=1' for the client).
"""

from ibrepro import paths, softroce
from ibrepro.softroce.launcher import side   # importing it registers the `softroce` launcher

_PREFIX = softroce.share_dir() / 'reframe'

# perftest's default QP timeout (-u 14: 67 ms) is shorter than an emulated round trip under load:
# rxe retransmits, and a QP that exhausts its retries leaves a latency test waiting forever
_EMULATED = {'emulated': True, 'perftest_options': ['-u', '20']}   # 4.3 s

_COMMON = {
    'scheduler': 'local',
    'launcher': 'softroce',
    'environs': ['rxe-guest'],
    'max_jobs': 1,            # TCG is CPU-hungry, and perftest ports are per guest
    'time_limit': '10m',
}

site_configuration = {
    'systems': [{
        'name': 'softroce',
        'descr': 'soft-RoCE (rdma_rxe) in QEMU TCG guests: functional tests, not performance data',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'prefix': str(_PREFIX),
        'partitions': [
            {
                **_COMMON,
                'name': 'dualport',
                'descr': 'one guest, rxe0 <-> rxe1 cabled back to back (veth)',
                'access': ['--node=n0'],
                'features': ['ib', 'roce', 'rxe', 'dual-port'],
                'extras': {
                    **_EMULATED,
                    'rdma_devices': ['rxe0', 'rxe1'],
                    'rdma_pair': {'server': side('n0', 'rxe0'), 'client': side('n0', 'rxe1')},
                },
            },
            {
                **_COMMON,
                'name': 'nodes2',
                'descr': 'two guests, n0:rxe2 <-> n1:rxe2 (QEMU socket link on 127.0.0.1)',
                'access': ['--node=n0'],
                'features': ['ib', 'roce', 'rxe', 'nodes2'],
                'extras': {
                    **_EMULATED,
                    'rdma_devices': ['rxe2'],
                    'rdma_pair': {'server': side('n0', 'rxe2'), 'client': side('n1', 'rxe2')},
                },
            },
        ],
    }],
    'environments': [{   # the guest image: perftest 4.5, rdma-core 44 (ibv_*), iproute2's rdma
        'name': 'rxe-guest',
        'features': ['perftest', 'verbs'],
        'target_systems': ['softroce'],
    }],
    'storage': [{'enable': True, 'sqlite_db_file': str(paths.results_db())}],
    'general': [{
        'report_file': str(paths.run_reports_dir() / 'run-report-{sessionid}.json'),
        'target_systems': ['softroce'],
    }],
    'logging': [{
        'handlers$': [{'type': 'stream', 'name': 'stdout', 'level': 'info',
                       'format': '%(message)s'}],
        'handlers_perflog': [{
            'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
            'basedir': str(_PREFIX / 'perflogs'), 'level': 'info', 'append': True,
            'format': '%(check_job_completion_time)s|%(check_info)s|%(check_result)s|'
                      '%(check_perfvalues)s',
            'format_perfvars': '%(check_perf_value)s|%(check_perf_unit)s|',
        }],
        'target_systems': ['softroce'],
    }],
}
