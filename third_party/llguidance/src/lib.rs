//! Links llguidance's C API (its `#[no_mangle]` functions, declared in the crate's llguidance.h)
//! into this static library; ditto has no Rust code of its own.
pub use llguidance;
