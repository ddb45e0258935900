"""Smoke checks of the soft-RoCE partitions (configs/softroce.py), used by tests/test_softroce.py.

`softroce_rdma_devices` runs through the partition's own launcher (one command in the guest).
`softroce_perftest_pair` shows the placement a perftest family needs, on the guests as on a real
cluster: the server runs in the background through `rdma_pair.server.launch` on its device, the
client through `rdma_pair.client.launch` against `rdma_pair.server.host`, retrying while the
server does not listen yet (at most `connect_timeout` s), each run bounded by `run_timeout` s.
One server/client pair per message size. It parses with a regex: a stand-in for ibrepro.parsers.
"""

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher

_NO_SERVER = 'perftest-pair: no server'
_TIMEOUT = 'perftest-pair: timeout'
# perftest's clock calibration failed (a busy or emulated CPU): its times print as inf
_NO_CLOCK = 'Correlation coefficient r^2'


@rfm.simple_test
class softroce_rdma_devices(rfm.RunOnlyRegressionTest):
    valid_systems = ['+rxe']
    valid_prog_environs = ['+verbs']
    executable = 'ibv_devices'
    tags = {'verbs', 'smoke'}

    @sanity_function
    def validate(self):
        return sn.all(sn.assert_found(rf'^\s+{dev}\s+[0-9a-f]{{16}}$', self.stdout,
                                      msg=f'RDMA device {dev} not listed')
                      for dev in self.current_partition.extras['rdma_devices'])


@rfm.simple_test
class softroce_perftest_pair(rfm.RunOnlyRegressionTest):
    valid_systems = ['+rdma_pair']
    valid_prog_environs = ['+perftest']
    benchmark = parameter(['ib_write_lat', 'ib_write_bw'])
    #: message sizes in bytes (perftest -s), one server/client pair each
    sizes = variable(typ.List[int], value=[2, 4096, 65536])
    #: iterations per size (perftest -n)
    iterations = variable(int, value=100)
    #: first TCP port of the out-of-band exchange (one per run)
    port = variable(int, value=18515)
    #: seconds the client keeps retrying while the server is not listening
    connect_timeout = variable(int, value=30)
    #: seconds one client run may take
    run_timeout = variable(int, value=120)
    #: False leaves the server out: the client must fail after connect_timeout
    start_server = variable(typ.Bool, value=True)   # typ.Bool: -S start_server=false works
    num_tasks = 2
    num_tasks_per_node = 1
    executable = 'perftest_pair'
    tags = {'perftest', 'verbs', 'smoke'}

    @run_before('run')
    def place(self):
        pair = self.current_partition.extras['rdma_pair']
        srv, cli = pair['server'], pair['client']
        self.job.launcher = getlauncher('local')()   # each side has its own launch prefix
        extra = ' '.join(self.current_partition.extras.get('perftest_options', []))
        common = f'-F -n {self.iterations} -s $size -p $port {extra}'.strip()
        server = f'{srv["launch"]} {self.benchmark} -d {srv["device"]} {common}'
        client = (f'timeout {self.run_timeout} {cli["launch"]} {self.benchmark} '
                  f'-d {cli["device"]} {common} {srv["host"]}')
        self.prerun_cmds = [
            '# one server/client pair: SIZE PORT -> client_SIZE.out/.err, server_SIZE.out',
            'pair_once() {',
            '  size=$1 port=$2 t0=$SECONDS',
            f'  {"" if self.start_server else ": "}{server} > server_$size.out 2>&1 &',
            '  server=$!',
            f'  until {client} > client_$size.out 2> client_$size.err; do',
            '    if [ $? = 124 ]; then',
            f'      echo "{_TIMEOUT}: the client ran longer than {self.run_timeout} s" >&2',
            '      break',
            '    fi',
            '    grep -q "Couldn\'t connect" client_$size.err || break   # failed otherwise',
            f'    if [ $((SECONDS - t0)) -ge {self.connect_timeout} ]; then',
            f'      echo "{_NO_SERVER} on {srv["host"]}:$port after {self.connect_timeout} s" >&2',
            '      break',
            '    fi',
            '    sleep 1',
            '  done',
            '  for i in $(seq 20); do kill -0 $server 2>/dev/null || break; sleep 1; done',
            '  kill $server 2>/dev/null; wait $server   # a server left waiting is stopped',
            '}',
            'perftest_pair() {',
            f'  port={self.port}',
            f'  for size in {" ".join(map(str, self.sizes))}; do',
            '    for attempt in 1 2 3; do   # perftest failed to calibrate its clock: once more',
            '      pair_once $size $port',
            '      port=$((port + 1))',
            f'      grep -qF "{_NO_CLOCK}" client_$size.err || break',
            '    done',
            '    cat client_$size.out; cat client_$size.err >&2',
            '  done',
            '}',
        ]

    @sanity_function
    def validate(self):
        return sn.all([
            sn.assert_eq(sn.extractall(r'^guest-exec: (.*)', self.stderr, 1), [],
                         msg='a guest failed: {0}'),
            sn.assert_not_found(_NO_SERVER, self.stderr, msg='the perftest server did not answer'),
            sn.assert_not_found(_TIMEOUT, self.stderr, msg=f'a perftest run took longer than '
                                f'{self.run_timeout} s'),
            sn.assert_not_found(rf'^\s*\d+\s+{self.iterations}\s.*\binf\b', self.stdout,
                                msg='perftest could not calibrate its clock (times are inf)'),
            *(sn.assert_found(rf'^\s*{size}\s+{self.iterations}\s', self.stdout,
                              msg=f'no result for {size} bytes') for size in self.sizes),
        ])

    @run_before('performance')
    def set_perf_variables(self):
        # after '#bytes #iterations': lat t_min t_max t_typical ... (us);
        # bw: BW peak, BW average, MsgRate, printed in 2^20 B/s and reported in 10^6 B/s
        metric, index, unit, factor = (('lat', 2, 'us', 1.0) if self.benchmark.endswith('_lat')
                                       else ('bw', 1, 'MB/s', 1.048576))
        self.perf_variables = {
            f'{metric}_{size}': sn.make_performance_function(
                sn.extractsingle(rf'^\s*{size}\s+{self.iterations}\s+(.*)$', self.stdout, 1,
                                 lambda rest: float(rest.split()[index]) * factor),
                unit)
            for size in self.sizes}
