//! The native half of the `inboxlog` Python package (`inboxlog._native`).
//!
//! A thin PyO3 layer over the `inboxlog` core crate: values cross as plain dicts and
//! lists (converted in Rust, key order and big integers kept), errors as the ARCHITECTURE.md#errors
//! exception classes, and every core call that may wait runs with the GIL released
//! (a quick `append` keeps it: see `session.rs`). The public package `inboxlog`
//! re-exports these names and adds the pre-step composer.

mod compaction;
mod convert;
mod errors;
mod fleet;
mod import;
mod inbox;
mod projection;
mod queue_view;
mod session;
mod store;
mod values;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", inboxlog::FORMAT_VERSION)?;
    m.add("MAX_DEPTH", inboxlog::MAX_DEPTH)?;
    m.add_class::<store::PyStore>()?;
    m.add_class::<store::PyStoreOpen>()?;
    m.add_class::<store::PySessionOpen>()?;
    m.add_class::<session::PySession>()?;
    m.add_class::<compaction::PyCompaction>()?;
    m.add_class::<inbox::PyInbox>()?;
    m.add_class::<queue_view::PyQueueView>()?;
    queue_view::register(m)?;
    m.add_class::<projection::PyQueueProjection>()?;
    m.add_class::<fleet::PyFollower>()?;
    m.add_function(wrap_pyfunction!(projection::fold_consumed_work, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_reference, m)?)?;
    m.add_function(wrap_pyfunction!(convert::json_text, m)?)?;
    errors::register(m)?;
    Ok(())
}
