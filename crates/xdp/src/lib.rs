//! AF_XDP driver and the XDP programs tern attaches.
