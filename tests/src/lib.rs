//! Shared helpers for the end-to-end tests.
