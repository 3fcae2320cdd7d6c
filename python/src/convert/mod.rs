//! Python values ⇄ JSON text, converted in Rust rather than by `json.dumps` and
//! `json.loads`.
//!
//! `dump` walks Python objects into compact text (and, for `Session.append`, into the
//! plain copy that reading that text back gives); `load` builds Python objects from the
//! text the core hands back, in one pass over the tokens of the core's JSON reader.

mod dump;
mod load;

pub(crate) use dump::{dict_to_json, to_json, to_json_and_copy};
pub(crate) use load::{Loader, to_py};

use pyo3::prelude::*;

/// The compact JSON text of `value` as the core writes it (`json::Builder`: keys in
/// order, non-ASCII characters as they are, NaN and the infinities refused as
/// `InvalidInputError`): how the CLI spells a value it shows.
#[pyfunction]
#[pyo3(name = "_json_text")]
pub(crate) fn json_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    to_json(value, "value")
}
