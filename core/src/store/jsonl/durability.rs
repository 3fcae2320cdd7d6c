//! When appended records are fdatasynced (ARCHITECTURE.md#durability).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result, invalid};
use crate::json;

/// When an append is made durable. Creation and [`flush`](crate::store::LogWriter::flush)
/// are durable in every mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// fdatasync before every append returns: a returned append survives power loss.
    #[default]
    Sync,
    /// Group commit: dirty logs are fdatasynced within a bounded window (5 ms by
    /// default); `flush()` is the barrier that acknowledges.
    Batched,
    /// Left to the OS page cache; only `flush()` fsyncs.
    None,
}

impl Durability {
    /// Parses `"sync"`, `"batched"` or `"none"`.
    pub fn parse(name: &str) -> Result<Durability> {
        match name {
            "sync" => Ok(Durability::Sync),
            "batched" => Ok(Durability::Batched),
            "none" => Ok(Durability::None),
            other => Err(invalid(format!(
                "durability must be \"sync\", \"batched\" or \"none\", got {}",
                json::quote(other)
            ))),
        }
    }

    /// The name [`Durability::parse`] accepts.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Sync => "sync",
            Durability::Batched => "batched",
            Durability::None => "none",
        }
    }
}

impl FromStr for Durability {
    type Err = Error;

    fn from_str(name: &str) -> Result<Durability> {
        Durability::parse(name)
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn parses_the_three_names_only() {
        for d in [Durability::Sync, Durability::Batched, Durability::None] {
            assert_eq!(Durability::parse(d.as_str()).unwrap(), d);
            assert_eq!(d.to_string().parse::<Durability>().unwrap(), d);
        }
        assert_eq!(Durability::default(), Durability::Sync);
        let err = Durability::parse("fsync").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "durability must be \"sync\", \"batched\" or \"none\", got \"fsync\""
        );
    }
}
