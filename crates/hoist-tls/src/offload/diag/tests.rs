use super::*;

fn attr(ty: u16, value: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    a.extend_from_slice(&ty.to_ne_bytes());
    a.extend_from_slice(value);
    while a.len() % 4 != 0 {
        a.push(0);
    }
    a
}

/// A reply as a kernel with CAP_NET_ADMIN sends it for a kTLS socket: inet_diag_msg, then
/// INET_DIAG_INFO (tcp_info, shortened), INET_DIAG_SHUTDOWN, and the nested ULP info.
fn reply(seq: u32, tx: u16, rx: u16) -> Vec<u8> {
    let mut tls = Vec::new();
    tls.extend(attr(TLS_INFO_VERSION, &0x0303u16.to_ne_bytes()));
    tls.extend(attr(TLS_INFO_CIPHER, &51u16.to_ne_bytes()));
    tls.extend(attr(TLS_INFO_TXCONF, &tx.to_ne_bytes()));
    tls.extend(attr(TLS_INFO_RXCONF, &rx.to_ne_bytes()));
    let mut ulp = Vec::new();
    ulp.extend(attr(INET_ULP_INFO_NAME, b"tls\0"));
    ulp.extend(attr(0x8000 | INET_ULP_INFO_TLS, &tls));
    let mut body = vec![0u8; INET_DIAG_MSG];
    body[0] = libc::AF_INET as u8;
    body[1] = 1; // TCP_ESTABLISHED
    body.extend(attr(2, &[0u8; 32])); // INET_DIAG_INFO
    body.extend(attr(8, &[0])); // INET_DIAG_SHUTDOWN
    body.extend(attr(0x8000 | INET_DIAG_ULP_INFO, &ulp));
    let mut msg = Vec::new();
    msg.extend_from_slice(&((NLMSG_HDR + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    msg.extend_from_slice(&0u16.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend(body);
    msg
}

#[test]
fn request_layout() {
    let local: SocketAddr = "10.1.2.3:443".parse().expect("addr");
    let remote: SocketAddr = "192.168.0.9:50000".parse().expect("addr");
    let r = build_request(7, local, remote);
    assert_eq!(r.len(), 72);
    assert_eq!(u32_at(&r, 0), 72);
    assert_eq!(u16_at(&r, 4), 20);
    assert_eq!(u16_at(&r, 6), 1);
    assert_eq!(u32_at(&r, 8), 7);
    assert_eq!(&r[16..20], &[libc::AF_INET as u8, 6, 2, 0]);
    assert_eq!(&r[24..26], &443u16.to_be_bytes());
    assert_eq!(&r[26..28], &50000u16.to_be_bytes());
    assert_eq!(&r[28..32], &[10, 1, 2, 3]);
    assert_eq!(&r[44..48], &[192, 168, 0, 9]);
    assert_eq!(&r[64..72], &[0xff; 8]);
    let v6 = build_request(
        1,
        "[::1]:1".parse().expect("a"),
        "[::1]:2".parse().expect("a"),
    );
    assert_eq!(v6[16], libc::AF_INET6 as u8);
    assert_eq!(v6[28 + 15], 1);
}

#[test]
fn reads_txconf_and_rxconf() {
    let r = parse_reply(&reply(5, 3, 2), 5);
    assert_eq!(
        r,
        Reply::Diag(Diag::Tls(SocketTls {
            version: Some(0x0303),
            cipher: Some(51),
            tx: Conf::Hw,
            rx: Conf::Sw,
        }))
    );
    assert_eq!(parse_reply(&reply(5, 2, 2), 6), Reply::Stale);
    let Reply::Diag(Diag::Tls(s)) = parse_reply(&reply(1, 4, 9), 1) else {
        panic!("not tls");
    };
    assert!(s.tx.is_hw());
    assert_eq!(s.rx, Conf::Unknown(9));
}

#[test]
fn no_ulp_info_error_and_garbage() {
    // Without the ULP attribute (no CAP_NET_ADMIN).
    let full = reply(3, 2, 2);
    let mut cut = full[..NLMSG_HDR + INET_DIAG_MSG + 36 + 8].to_vec();
    let len = cut.len() as u32;
    cut[..4].copy_from_slice(&len.to_ne_bytes());
    assert_eq!(parse_reply(&cut, 3), Reply::Diag(Diag::NoUlpInfo));
    // NLMSG_ERROR -ENOENT.
    let mut err = Vec::new();
    err.extend_from_slice(&36u32.to_ne_bytes());
    err.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
    err.extend_from_slice(&0u16.to_ne_bytes());
    err.extend_from_slice(&9u32.to_ne_bytes());
    err.extend_from_slice(&0u32.to_ne_bytes());
    err.extend_from_slice(&(-libc::ENOENT).to_ne_bytes());
    err.extend_from_slice(&[0u8; 16]);
    assert_eq!(parse_reply(&err, 9), Reply::Error(libc::ENOENT));
    // Every prefix and every single-byte corruption parses without panicking.
    for n in 0..full.len() {
        let _ = parse_reply(&full[..n], 3);
    }
    for i in 0..full.len() {
        for v in [0u8, 1, 0x7f, 0xff] {
            let mut m = full.clone();
            m[i] = v;
            let _ = parse_reply(&m, 3);
        }
    }
}

/// The real kernel finds a plain loopback connection by its 4-tuple: it has no TLS ULP.
#[test]
fn real_kernel_plain_socket() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (s, _) = l.accept().expect("accept");
    let local = s.local_addr().expect("local");
    let remote = s.peer_addr().expect("peer");
    match query(local, remote) {
        Ok(d) => assert_eq!(d, Diag::NoUlpInfo),
        // Kernels without tcp_diag (a module not loaded, no right to load it).
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => panic!("sock_diag query failed: {e}"),
    }
    // A 4-tuple that does not exist (on a port nobody listens on: the kernel's lookup falls
    // back to listening sockets).
    let gone: SocketAddr = "127.0.0.1:1".parse().expect("addr");
    let r = query(c.local_addr().expect("client addr"), gone);
    assert!(r.is_err(), "{r:?}");
    drop(c);
}
