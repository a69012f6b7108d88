"""TLS client for hoist-tls' integration tests (driven by tests/python.rs).

Usage: tls_client.py MODE PORT [ARG]. Prints one result line; exits non-zero on failure.
The server speaks the line protocol of tests/common/mod.rs (GET <n>, ECHO <text>, QUIT).
"""
import hashlib
import os
import socket
import ssl
import sys


def context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def connect(port, ctx=None):
    raw = socket.create_connection(("127.0.0.1", port))
    return (ctx or context()).wrap_socket(raw, server_hostname="a.test")


def read_exact(s, n):
    chunks, got = [], 0
    while got < n:
        c = s.recv(min(1 << 20, n - got))
        if not c:
            raise SystemExit(f"EOF after {got} of {n} bytes")
        chunks.append(c)
        got += len(c)
    return b"".join(chunks)


def read_line(s):
    line = b""
    while not line.endswith(b"\n"):
        c = s.recv(1)
        if not c:
            raise SystemExit(f"EOF inside a line: {line!r}")
        line += c
    return line


def get(s, n):
    s.sendall(b"GET %d\n" % n)
    head = read_line(s)
    if head != b"OK %d\n" % n:
        raise SystemExit(f"bad head {head!r}")
    return read_exact(s, n)


def mode_sha256(port, n):
    s = connect(port)
    body = get(s, int(n))
    print(hashlib.sha256(body).hexdigest(), s.version())
    s.sendall(b"QUIT\n")
    # The server answers QUIT with close_notify: a clean EOF, not an error.
    if s.recv(1) != b"":
        raise SystemExit("data after QUIT")
    s.close()


def mode_close_notify(port, _):
    s = connect(port)
    s.sendall(b"ECHO hi\n")
    if read_line(s) != b"hi\n":
        raise SystemExit("bad echo")
    # Sends our close_notify and waits for the server's.
    raw = s.unwrap()
    raw.close()
    print("clean")


def mode_same_flight(port, version):
    ctx = context()
    ctx.maximum_version = ctx.minimum_version = getattr(ssl.TLSVersion, version)
    raw = socket.create_connection(("127.0.0.1", port))
    s = ctx.wrap_socket(raw, server_hostname="a.test", do_handshake_on_connect=False)
    s.do_handshake()
    # In TLS 1.3 do_handshake returns once our Finished is written: the request follows it
    # immediately, usually in the same segment, before the server has read the Finished.
    s.sendall(b"GET 1000\n")
    body = read_exact(s, len(b"OK 1000\n") + 1000)[len(b"OK 1000\n"):]
    print(hashlib.sha256(body).hexdigest(), s.version())


def mode_garbage(port, kind):
    s = connect(port)
    s.sendall(b"ECHO before\n")
    if read_line(s) != b"before\n":
        raise SystemExit("bad echo")
    raw = socket.socket(fileno=os.dup(s.fileno()))
    if kind == "record":
        # A well-framed application data record that does not decrypt.
        raw.sendall(b"\x17\x03\x03\x00\x40" + os.urandom(0x40))
    else:
        raw.sendall(b"this is not TLS at all\r\n" * 4)
    # The server answers with an alert (or just closes); either way the connection ends.
    try:
        while raw.recv(4096):
            pass
    except ConnectionResetError:
        pass
    print("closed")


MODES = {
    "sha256": mode_sha256,
    "close_notify": mode_close_notify,
    "same_flight": mode_same_flight,
    "garbage": mode_garbage,
}

if __name__ == "__main__":
    MODES[sys.argv[1]](int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
