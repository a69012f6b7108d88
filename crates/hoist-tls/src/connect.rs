//! The client handshake toward an upstream, over the unbuffered rustls API, with the same
//! discipline as the server's ([`crate::handshake`]): records are read whole and one at a time,
//! and reading stops the moment rustls reports the handshake complete, so that whatever the
//! server sends next (a TLS 1.3 NewSessionTicket, the response) is still in the socket for
//! kernel TLS to decrypt. Everything the client has to say (its Finished) is written before
//! [`connect`] returns.

use std::sync::Arc;

use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::HandshakeKind;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::handshake::{read_record, Carry, Established, HandshakeError};
use crate::record::{Action, RecordLayer, Step};
use crate::transport::TlsInfo;
use crate::{names, x509};

/// Runs the client handshake on a connected `tcp`. rustls' session store in `config` (one per
/// cluster) offers a ticket from an earlier connection, so repeated connections resume.
/// Callers bound the time it may take (Envoy's connect_timeout covers it).
pub async fn connect(
    mut tcp: TcpStream,
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
) -> Result<Established<UnbufferedClientConnection>, HandshakeError> {
    let sni = config
        .enable_sni
        .then(|| match &server_name {
            ServerName::DnsName(n) => Some(n.as_ref().to_owned()),
            _ => None,
        })
        .flatten();
    let conn = UnbufferedClientConnection::new(config, server_name)
        .map_err(|e| HandshakeError::protocol(format!("cannot start a TLS session: {e}")))?;
    let mut rec = RecordLayer::new(conn, 4096, 4096);
    let mut carry = Carry::Boundary;
    loop {
        let step = rec.drive(Action::Nothing);
        if !rec.out.is_empty() {
            let sent = tcp.write_all(rec.out.filled()).await;
            rec.out.consume(usize::MAX);
            if let Err(e) = sent {
                return Err(match step {
                    Err(tls) => HandshakeError::from_rustls(tls),
                    Ok(_) => HandshakeError::io(e),
                });
            }
        }
        match step {
            Err(e) => return Err(HandshakeError::from_rustls(e)),
            Ok(Step::Writable) if !rec.conn.is_handshaking() => break,
            Ok(Step::Closed) => return Err(HandshakeError::eof()),
            Ok(_) if rec.peer_closed() => return Err(HandshakeError::eof()),
            Ok(_) => {}
        }
        read_record(&mut tcp, &mut rec, &mut carry, None).await?;
    }
    if !rec.incoming.is_empty() || !rec.plain.is_empty() {
        return Err(HandshakeError::protocol(
            "data left over after the handshake",
        ));
    }
    let conn = rec.conn;
    let info = TlsInfo {
        version: conn.protocol_version().map_or("unknown", names::version),
        cipher: conn
            .negotiated_cipher_suite()
            .map_or("unknown", |s| names::cipher(s.suite())),
        curve: conn
            .negotiated_key_exchange_group()
            .map(|g| names::group(g.name())),
        sigalg: None,
        sni,
        alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
        session_reused: conn.handshake_kind() == Some(HandshakeKind::Resumed),
        peer_subject: conn
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| x509::subject_rfc2253(leaf.as_ref())),
        offload: "none",
    };
    Ok(Established { tcp, conn, info })
}
