/* libibrepro_inject.so: a controlled MPI slowdown, for measuring what the regression test detects.
 *
 * A PMPI interposition library (LD_PRELOAD, or linked before the MPI library): every intercepted call that
 * completes a message costs what the environment asks, on top of its own time:
 *
 *   IBREPRO_INJECT_US=x      x microseconds more per call (a latency regression)
 *   IBREPRO_INJECT_PCT=p     p % of the call's own duration more (a bandwidth regression)
 *   IBREPRO_INJECT_MIN_BYTES, IBREPRO_INJECT_MAX_BYTES
 *                            only messages of this size range (bytes of the call's own buffer; default: all)
 *   IBREPRO_INJECT_REPORT=f  append one line per rank at MPI_Finalize to file f: calls slowed, cost added
 *
 * The cost is spent busy-waiting on the process's own clock (MPI_Wtime), the way a slower link or a slower
 * software path would spend it: the rank is unavailable meanwhile. Calls: MPI_Send, MPI_Recv, MPI_Sendrecv,
 * MPI_Wait, MPI_Waitall (the completion of non-blocking transfers: Isend/Irecv cost nothing by themselves),
 * MPI_Bcast, MPI_Allreduce, MPI_Alltoall, MPI_Allgather, MPI_Barrier. Built against one MPI's mpi.h: MPICH and
 * Intel MPI share an ABI, Open MPI has its own (make inject MPICC=<that MPI's mpicc>).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double add_us, add_pct;
static long long min_bytes = 0, max_bytes = -1;
static long long calls, slowed;
static double added_s, asked_s;
static int configured;

static void configure(void)
{
    const char *v;
    if (configured)
        return;
    configured = 1;
    if ((v = getenv("IBREPRO_INJECT_US")))
        add_us = atof(v);
    if ((v = getenv("IBREPRO_INJECT_PCT")))
        add_pct = atof(v);
    if ((v = getenv("IBREPRO_INJECT_MIN_BYTES")))
        min_bytes = atoll(v);
    if ((v = getenv("IBREPRO_INJECT_MAX_BYTES")))
        max_bytes = atoll(v);
    if (add_us < 0 || add_pct < 0) {
        fprintf(stderr, "ibrepro-inject: IBREPRO_INJECT_US and IBREPRO_INJECT_PCT must be >= 0\n");
        add_us = add_pct = 0;
    }
}

static long long bytes_of(int count, MPI_Datatype type)
{
    int size = 0;
    if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;
    return (long long)count * size;
}

/* Spend the cost of one call that took `took` seconds and moved `bytes` (-1: unknown, always slowed). */
static void cost(double took, long long bytes)
{
    configure();
    calls++;
    if (bytes >= 0 && (bytes < min_bytes || (max_bytes >= 0 && bytes > max_bytes)))
        return;
    double extra = add_us * 1e-6 + took * add_pct / 100.0;
    if (extra <= 0)
        return;
    double until = PMPI_Wtime() + extra, now;
    while ((now = PMPI_Wtime()) < until)
        ;
    slowed++;
    asked_s += extra;
    added_s += extra + (now - until);   /* what the wait really took: a preempted spin overshoots */
}

/* The call's own time is read only when a share of it is asked: preloaded with nothing to add (the clean rounds
 * of a paired measurement) a call costs one more function call, not two clock reads (70 % of a 0.2 us latency). */
#define TIMED(bytes, call)                                \
    do {                                                  \
        configure();                                      \
        if (add_pct > 0) {                                \
            double t0_ = PMPI_Wtime();                    \
            int rc_ = (call);                             \
            cost(PMPI_Wtime() - t0_, (bytes));            \
            return rc_;                                   \
        }                                                 \
        int rc_ = (call);                                 \
        cost(0.0, (bytes));                               \
        return rc_;                                       \
    } while (0)

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(bytes_of(count, type), PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    TIMED(bytes_of(count, type), PMPI_Recv(buf, count, type, source, tag, comm, status));
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    TIMED(bytes_of(scount, stype), PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source,
                                                 rtag, comm, status));
}

/* The size of a non-blocking transfer is not known at its completion: size filters do not apply (-1). */
int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    TIMED(-1, PMPI_Wait(request, status));
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    TIMED(-1, PMPI_Waitall(count, requests, statuses));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    TIMED(bytes_of(count, type), PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    TIMED(bytes_of(count, type), PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm)
{
    TIMED(bytes_of(scount, stype), PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm)
{
    TIMED(bytes_of(scount, stype), PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Barrier(MPI_Comm comm)
{
    TIMED(0, PMPI_Barrier(comm));
}

int MPI_Finalize(void)
{
    const char *path = getenv("IBREPRO_INJECT_REPORT");
    int rank = -1;
    configure();
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (path && *path) {
        FILE *f = fopen(path, "a");
        if (f) {
            fprintf(f, "rank %d: %lld of %lld calls slowed, %.6f s added of %.6f s asked (asked: %g us + %g %% per "
                       "call, sizes %lld..%lld B)\n", rank, slowed, calls, added_s, asked_s, add_us, add_pct,
                    min_bytes, max_bytes);
            fclose(f);
        } else {
            perror("ibrepro-inject: IBREPRO_INJECT_REPORT");
        }
    }
    return PMPI_Finalize();
}
