//! UPC++ v1.0 over `gex` (see the UPC++ specification, draft 10).
