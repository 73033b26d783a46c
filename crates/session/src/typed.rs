//! Typed views.
