"""A simple TCP bulk transfer to check link shaping: ``serve PORT BYTES`` / ``send HOST PORT BYTES``.

The server prints one JSON line: bytes received and the receive rate in bit/s, timed from
the first byte to the last so connection set-up does not count.
"""

import json
import socket
import sys
import time

CHUNK = 1 << 16


def serve(port: int, total: int) -> None:
    with socket.create_server(("0.0.0.0", port)) as listener:
        print("listening", file=sys.stderr, flush=True)  # the ready line of a service
        conn, _ = listener.accept()
        with conn:
            received = len(conn.recv(CHUNK))
            start = time.monotonic()
            first = received
            while received < total:
                data = conn.recv(CHUNK)
                if not data:
                    break
                received += len(data)
            elapsed = time.monotonic() - start
            conn.sendall(b"k")
    rate = (received - first) * 8 / elapsed if elapsed > 0 else None
    print(json.dumps({"bytes": received, "rate_bps": rate}), flush=True)


def send(host: str, port: int, total: int) -> None:
    with socket.create_connection((host, port), timeout=30) as conn:
        payload = b"\0" * CHUNK
        sent = 0
        while sent < total:
            n = min(CHUNK, total - sent)
            conn.sendall(payload[:n])
            sent += n
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
