"""configs/softroce-slurm.py with a device name the nodes do not have (rxe9 as rail 0, as a site's typo in
extras rdma_devices would give): a fault for tests/test_softroce_slurm.py; both ends must fail within seconds,
naming the device."""

import runpy
from pathlib import Path

site_configuration = runpy.run_path(str(Path(__file__).resolve().parents[2] / 'configs' / 'softroce-slurm.py'))[
    'site_configuration']
for partition in site_configuration['systems'][0]['partitions']:
    partition['extras']['rdma_devices'] = ['rxe9', 'rxe1']
