//! Remote procedure calls (UPC++ spec ch. 9).

/// Registers the AM handlers RPC uses (called by `init`).
pub(crate) fn register_handlers(_endpoint: &gex::Endpoint) {}
