//! Integration tests live in `tests/`, one scenario per file.
