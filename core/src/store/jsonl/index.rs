//! A sparse seq → byte offset index, so that reading a log's suffix seeks instead of
//! re-reading the whole file.

/// Every `STRIDE`-th event line's offset is kept.
const STRIDE: u64 = 1024;

/// `offsets[k]` is the byte offset of the line holding seq `k * STRIDE`.
#[derive(Debug, Default)]
pub(crate) struct SeqIndex {
    offsets: Vec<u64>,
}

impl SeqIndex {
    /// Records that seq `seq`'s line starts at `offset` (seqs arrive in order).
    pub(crate) fn note(&mut self, seq: u64, offset: u64) {
        if seq.is_multiple_of(STRIDE) && seq / STRIDE == self.offsets.len() as u64 {
            self.offsets.push(offset);
        }
    }

    /// Whether `seq`'s offset is one the index keeps.
    pub(crate) fn wants(seq: u64) -> bool {
        seq.is_multiple_of(STRIDE)
    }

    /// The closest indexed seq at or before `since`, and its line's offset; `None` when
    /// no event is indexed (the log has no events).
    pub(crate) fn seek(&self, since: u64) -> Option<(u64, u64)> {
        let k = ((since / STRIDE) as usize).min(self.offsets.len().checked_sub(1)?);
        Some((k as u64 * STRIDE, self.offsets[k]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeks_to_the_closest_stride_before() {
        let mut index = SeqIndex::default();
        assert_eq!(index.seek(5), None);
        for seq in 0..2500 {
            index.note(seq, 1000 + seq * 10);
        }
        index.note(0, 7); // a repeat is ignored
        assert_eq!(index.seek(0), Some((0, 1000)));
        assert_eq!(index.seek(1023), Some((0, 1000)));
        assert_eq!(index.seek(1024), Some((1024, 1000 + 10240)));
        assert_eq!(index.seek(99_999), Some((2048, 1000 + 20480)));
        assert!(SeqIndex::wants(2048) && !SeqIndex::wants(2049));
    }
}
