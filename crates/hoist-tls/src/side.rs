//! Which end of a TLS connection hoist is: the server (downstream connections) or the client
//! (upstream connections). rustls gives the two unbuffered connection types the same methods
//! without a common trait; [`Side`] is that trait, so the record layer, the user-space
//! transport and the kernel-TLS switch are written once for both directions.

use std::ops::DerefMut;

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{UnbufferedConnectionCommon, UnbufferedStatus};
use rustls::ExtractedSecrets;

/// A rustls unbuffered connection, server or client.
pub trait Side: DerefMut<Target = UnbufferedConnectionCommon<Self::Data>> + Sized {
    /// rustls' per-side state, also the parameter of the [`KernelConnection`] after the switch.
    type Data: Unpin + 'static;

    /// The peer is trusted not to pad TLS 1.3 records (an upstream hoist was configured to
    /// reach), so the kernel may be told TLS_RX_EXPECT_NO_PAD. Never true for clients of a
    /// listener: a padding peer would cost the kernel a second decryption per record.
    const TRUSTED_PEER: bool;

    /// `process_tls_records` of the concrete type.
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data>;

    /// `dangerous_into_kernel_connection` of the concrete type.
    fn into_kernel(self)
        -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error>;

    /// A TLS 1.3 NewSessionTicket that arrived after the switch (as a handshake record the
    /// kernel hands back): a client stores it in its config's session store, so the next
    /// connection of the cluster resumes; a server never receives one legitimately
    /// (`None`: an unexpected message).
    fn new_session_ticket(
        kernel: &mut KernelConnection<Self::Data>,
        payload: &[u8],
    ) -> Option<Result<(), rustls::Error>>;
}

impl Side for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    const TRUSTED_PEER: bool = false;

    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }

    fn into_kernel(
        self,
    ) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }

    fn new_session_ticket(
        _kernel: &mut KernelConnection<Self::Data>,
        _payload: &[u8],
    ) -> Option<Result<(), rustls::Error>> {
        None
    }
}

impl Side for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    const TRUSTED_PEER: bool = true;

    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }

    fn into_kernel(
        self,
    ) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }

    fn new_session_ticket(
        kernel: &mut KernelConnection<Self::Data>,
        payload: &[u8],
    ) -> Option<Result<(), rustls::Error>> {
        Some(kernel.handle_new_session_ticket(payload))
    }
}
