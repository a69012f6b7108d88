#!/usr/bin/env python3
"""A test origin for hoist's upstream tests: HTTP/1.1 keep-alive, optionally TLS.

Prints its port on the first line of stdout, then serves until killed. Paths:
  /echo...             200, JSON: method, path, headers, this origin's name, connection number
  /upload              reads the body (any framing), answers its length and SHA-256
  /bytes?n=N           N bytes of a fixed pattern (content-length), or chunked with &chunked=1
  /delay?ms=N          answers after N ms
  /malformed           a response that is not HTTP
  /reset               closes the connection without answering
  /status?code=N       an empty response with that status
  /fail?origin=X&code=N  status N if this origin is named X, else as /echo
  /seen                the method, path and host of every request before this one (JSON)
  /page?n=N            an N-byte text/html page of ordinary sentences; &leak=1 puts an Oracle
                       error message at byte &at=K (default 0); &chunked=1 sends it chunked
"""
import hashlib, json, socket, ssl, sys, threading, time
from urllib.parse import urlparse, parse_qs

NAME = sys.argv[1]
TLS = sys.argv[2:4] if len(sys.argv) >= 4 else None
# A block whose length shares no factor with power-of-two buffer sizes, so a piece lost,
# doubled or reordered anywhere changes the stream's hash.
BLOCK = hashlib.sha256(b"seed").digest() * 31250 + b"x" * 3  # 1_000_003 bytes
connections = 0
lock = threading.Lock()
seen = []


def pattern(n):
    full, rest = divmod(n, len(BLOCK))
    for _ in range(full):
        yield BLOCK
    if rest:
        yield BLOCK[:rest]


def read_head(f):
    line = f.readline()
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers = {}
    while True:
        h = f.readline().decode("latin-1")
        if h in ("\r\n", "\n", ""):
            break
        k, v = h.split(":", 1)
        key = k.strip().lower()
        headers[key] = headers[key] + "," + v.strip() if key in headers else v.strip()
    return method, target, headers


def body_pieces(f, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return
            left = size
            while left:
                piece = f.read(min(left, 65536))
                left -= len(piece)
                yield piece
            f.readline()
    else:
        left = int(headers.get("content-length", "0"))
        while left:
            piece = f.read(min(left, 65536))
            if not piece:
                return
            left -= len(piece)
            yield piece


def send(conn, status, body=b"", extra=()):
    head = f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n"
    for k, v in extra:
        head += f"{k}: {v}\r\n"
    conn.sendall(head.encode() + b"\r\n" + body)


def serve(conn, number):
    f = conn.makefile("rb")
    while True:
        req = read_head(f)
        if req is None:
            return
        method, target, headers = req
        url = urlparse(target)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == "/seen":
            with lock:
                body = json.dumps(seen).encode()
            send(conn, 200, body, [("content-type", "application/json")])
            continue
        with lock:
            seen.append({"method": method, "path": target, "host": headers.get("host")})
        if url.path == "/upload":
            h = hashlib.sha256()
            n = 0
            for piece in body_pieces(f, headers):
                h.update(piece)
                n += len(piece)
            send(conn, 200, json.dumps({"length": n, "sha256": h.hexdigest()}).encode())
            continue
        for _ in body_pieces(f, headers):
            pass
        if url.path == "/bytes":
            n = int(q.get("n", "0"))
            if q.get("chunked"):
                conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                for piece in pattern(n):
                    conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                conn.sendall(b"0\r\n\r\n")
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % n)
                for piece in pattern(n):
                    conn.sendall(piece)
        elif url.path == "/page":
            n = int(q.get("n", "0"))
            body = (b"<p>Ordinary words on an ordinary page.</p>\n" * (n // 40 + 1))[:n]
            if q.get("leak"):
                at = int(q.get("at", "0"))
                leak = b" ORA-00933: SQL command not properly ended "
                body = (body[:at] + leak + body[at + len(leak):])[:n]
            if q.get("chunked"):
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                for i in range(0, len(body), 16384):
                    piece = body[i:i + 16384]
                    conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                conn.sendall(b"0\r\n\r\n")
            else:
                send(conn, 200, body, [("content-type", "text/html")])
        elif url.path == "/delay":
            time.sleep(int(q.get("ms", "0")) / 1000)
            send(conn, 200, b"late")
        elif url.path == "/malformed":
            conn.sendall(b"this is not http\r\n\r\n")
            return
        elif url.path == "/reset":
            return
        elif url.path == "/fail" and q.get("origin") == NAME:
            send(conn, int(q.get("code", "500")))
        elif url.path == "/status":
            send(conn, int(q.get("code", "200")))
        else:
            body = json.dumps({"method": method, "path": target, "headers": headers,
                               "origin": NAME, "connection": number}).encode()
            send(conn, 200, body, [("content-type", "application/json"),
                                   ("connection", "x-origin-private"),
                                   ("x-origin-private", "1"), ("keep-alive", "timeout=60")])


def handle(conn):
    global connections
    with lock:
        connections += 1
        number = connections
    try:
        serve(conn, number)
    except (OSError, ValueError, ssl.SSLError):
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    ctx = None
    if TLS:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(TLS[0], TLS[1])
    print(ls.getsockname()[1], flush=True)
    while True:
        conn, _ = ls.accept()
        if ctx:
            try:
                conn = ctx.wrap_socket(conn, server_side=True)
            except (OSError, ssl.SSLError):
                conn.close()
                continue
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


main()
