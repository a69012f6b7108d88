#!/usr/bin/env python3
"""Opens N TLS keep-alive connections to a server, makes one request on each, keeps them all
open and idle, and prints the server's resident memory (VmRSS of --pid) before and after.

    bench/idle-connections.py --port 10443 --pid $(pgrep -n hoist) -n 1000
"""
import argparse
import socket
import ssl
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=10443)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("-n", type=int, default=1000)
    p.add_argument("--path", default="/1k")
    a = p.parse_args()
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    before = rss_kib(a.pid)
    conns = []
    request = f"GET {a.path} HTTP/1.1\r\nHost: {a.host}\r\n\r\n".encode()
    for _ in range(a.n):
        s = ctx.wrap_socket(socket.create_connection((a.host, a.port)), server_hostname="localhost")
        s.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(65536)
        length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
        body = head.split(b"\r\n\r\n", 1)[1]
        while len(body) < length:
            body += s.recv(65536)
        conns.append(s)
    time.sleep(1)
    after = rss_kib(a.pid)
    print(f"connections={a.n} rss_before={before / 1024:.1f}MiB rss_after={after / 1024:.1f}MiB "
          f"per_connection={(after - before) / a.n:.1f}KiB")
    for s in conns:
        s.close()


if __name__ == "__main__":
    main()
