//! The client side (upstream connections): hoist's client handshake against hoist's server
//! (user-space TLS on the server end), the switch over the emulated kernel on the client end,
//! data both ways, and TLS 1.3 NewSessionTickets that arrive after the switch as control
//! records: stored in the config's session cache, so the next connection resumes.

use std::sync::Arc;

use rustls::client::UnbufferedClientConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::userspace::UserTlsTransport;

/// One connection: an echo server (hoist's handshake, user-space TLS) on its own thread, the
/// client switched to the emulated kernel. Returns (resumed, events).
fn one_connection(config: &Arc<ClientConfig>, data: &[u8]) -> (bool, Vec<OffloadEvent>) {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let len = data.len();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            std_listener.set_nonblocking(true).unwrap();
            let listener = TcpListener::from_std(std_listener).unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            let mut hello = Vec::new();
            read_client_hello(&tcp, &mut hello).await.unwrap();
            let established = accept(tcp, hello, &pki().ctx).await.unwrap();
            let mut t = UserTlsTransport::new(established);
            let mut got = vec![0u8; len];
            t.read_exact(&mut got).await.unwrap();
            t.write_all(&got).await.unwrap();
            t.flush().await.unwrap();
            let mut rest = [0u8; 8];
            assert_eq!(t.read(&mut rest).await.unwrap(), 0, "client close_notify");
            t.shutdown().await.unwrap();
        });
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = config.clone();
    let data = data.to_vec();
    let out = rt.block_on(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("a.test").unwrap();
        let established = crate::connect(tcp, config, name).await.unwrap();
        let resumed = established.info.session_reused;
        let emu = Emulator::new(Config::default());
        let events: Events = Rc::default();
        let ev = events.clone();
        let mut t: KtlsTransport<Emulator, UnbufferedClientConnection> =
            match switch_with(established, emu, true) {
                Ok(t) => t,
                Err(e) => panic!("client switch failed: {e}"),
            };
        t.set_event_sink(Box::new(move |e| ev.borrow_mut().push(e)));
        tokio::time::timeout(GUARD, async {
            t.write_all(&data).await.unwrap();
            t.flush().await.unwrap();
            // A small buffer: the tickets (larger than the smallest direct read) must still be
            // gathered whole.
            let mut back = Vec::new();
            let mut buf = [0u8; 100];
            while back.len() < data.len() {
                let n = t.read(&mut buf).await.unwrap();
                assert!(n > 0, "server closed early");
                back.extend_from_slice(&buf[..n]);
            }
            assert!(back == data, "echo differs");
            t.shutdown().await.unwrap();
            let mut rest = [0u8; 8];
            assert_eq!(t.read(&mut rest).await.unwrap(), 0, "server close_notify");
        })
        .await
        .expect("client side timed out");
        let events = events.borrow().clone();
        (resumed, events)
    });
    server.join().expect("server side panicked");
    out
}

#[test]
fn tls13_tickets_after_the_switch_resume_the_next_connection() {
    let config = client_config(TLS13);
    let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let (resumed, events) = one_connection(&config, &data);
    assert!(!resumed, "first connection cannot resume");
    let tickets = events
        .iter()
        .filter(|e| **e == OffloadEvent::SessionTicket)
        .count();
    assert!(tickets >= 1, "no ticket stored: {events:?}");
    assert!(
        events.iter().all(|e| *e == OffloadEvent::SessionTicket),
        "{events:?}"
    );
    let (resumed, _) = one_connection(&config, b"second");
    assert!(
        resumed,
        "the ticket from the kTLS control record was not used"
    );
}

#[test]
fn tls12_client_switch_carries_data_and_resumes() {
    let config = client_config(TLS12);
    let (resumed, events) = one_connection(&config, b"GET / HTTP/1.1\r\n\r\n");
    assert!(!resumed);
    assert!(events.is_empty(), "{events:?}");
    let (resumed, _) = one_connection(&config, b"again");
    assert!(resumed, "TLS 1.2 resumption (in the handshake) failed");
}
