//! TLS for the clients the server makes (the model, single sign-on's keys, webhooks): reqwest is
//! built without a bundled crypto provider, and ring — which sqlx already builds — serves it.

/// Installs ring as rustls' process-wide provider; call before building a client (a second call
/// changes nothing).
pub fn use_ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
