//! Test support for sessionlog.
