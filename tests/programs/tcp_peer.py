"""A real TCP client/server pair for testing the pair runner's orchestration where no RDMA device exists.

    tcp_peer.py server PORT                 accept one client, count what it sends, print it
    tcp_peer.py client PORT HOST SECONDS    stream to HOST:PORT for SECONDS, print what was sent

The pair runner never reads what its sides print (the checks' parsers do); these tests are about starting,
pinning, waiting, failing and stopping real processes on the right nodes.
"""

import os
import socket
import sys
import time


def main(argv):
    role, port = argv[1], int(argv[2])
    print(f'{role} pid {os.getpid()} cpus {sorted(os.sched_getaffinity(0))}', flush=True)
    if role == 'server':
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(('0.0.0.0', port))
            listener.listen(1)
            conn, _ = listener.accept()
            received = 0
            with conn:
                while chunk := conn.recv(65536):
                    received += len(chunk)
        print(f'server received {received} bytes', flush=True)
        return 0

    host, seconds = argv[3], float(argv[4])
    sent, block = 0, b'x' * 4096
    with socket.create_connection((host, port), timeout=10) as conn:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            conn.sendall(block)
            sent += len(block)
    print(f'client sent {sent} bytes in {seconds} s', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
