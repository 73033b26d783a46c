//! Format codec.
