/* A stand-in for our verbs benchmarks in the guest image (tests/test_softroce.py builds it with
 * `ibrepro softroce up --extra`): lists the RDMA devices, and links OpenMP so that the image
 * build has to copy a host library the Debian packages do not bring (libgomp). */
#include <infiniband/verbs.h>
#include <omp.h>
#include <stdio.h>

int main(void)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);

    if (!list) {
        perror("ibv_get_device_list");
        return 1;
    }
    for (int i = 0; i < n; i++)
        printf("%s\n", ibv_get_device_name(list[i]));
    printf("omp threads %d\n", omp_get_max_threads());
    ibv_free_device_list(list);
    return n > 0 ? 0 : 2;
}
