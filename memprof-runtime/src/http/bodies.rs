//! The memory a server's request bodies take at once. Each body is counted from its announced length (or,
//! chunked, as its chunks come) before a byte of it is read, against a budget of [`MAX_HELD`] bytes for
//! every connection together; a body that does not fit is refused with 503 and `Retry-After` without
//! being read, so many clients posting large bodies at once cost the host two bodies, not one per
//! client. What is counted is given back when the request is dropped, after its answer.
//!
//! ```ignore
//! let bodies = Bodies::default();
//! let mut held = bodies.reserve(MAX_BODY)?; // a 1 MiB body may be read now
//! held.grow(4096)?; // and a chunk more, if it fits
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::head::MAX_BODY;
use super::reply::HttpError;

/// The most bytes of request bodies held at once: two of the largest (as many as expensive jobs run).
pub(crate) const MAX_HELD: usize = 2 * MAX_BODY;

/// What a server's request bodies hold now.
#[derive(Default)]
pub(crate) struct Bodies {
    held: AtomicUsize,
}

/// Bytes of one request's body, counted against its server's [`Bodies`] until dropped.
pub(crate) struct Held {
    bodies: Arc<Bodies>,
    bytes: usize,
}

impl Bodies {
    /// Counts `bytes` of a body about to be read, or says 503 when they do not fit.
    pub(crate) fn reserve(self: &Arc<Self>, bytes: usize) -> Result<Held, HttpError> {
        let mut held = Held { bodies: Arc::clone(self), bytes: 0 };
        held.grow(bytes)?;
        Ok(held)
    }

    /// How many bytes are counted now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }
}

impl Held {
    /// Counts `bytes` more of the same body (its next chunk), or says 503 when they do not fit.
    pub(crate) fn grow(&mut self, bytes: usize) -> Result<(), HttpError> {
        let counted = self.bodies.held.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
            held.checked_add(bytes).filter(|&total| total <= MAX_HELD)
        });
        if counted.is_err() {
            return Err(HttpError::busy(
                format!(
                    "Other requests' bodies take the {MAX_HELD} bytes set aside for request bodies; try again in a second"
                ),
                1,
            ));
        }
        self.bytes += bytes;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.bodies.held.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_beyond_the_budget_are_refused_until_one_is_dropped() {
        let bodies = Arc::new(Bodies::default());
        let first = bodies.reserve(MAX_BODY).unwrap();
        let mut second = bodies.reserve(MAX_BODY - 10).unwrap();
        second.grow(10).unwrap();
        assert_eq!(bodies.held(), MAX_HELD);
        let refused = bodies.reserve(1).err().unwrap();
        assert_eq!(refused.status, 503);
        assert!(second.grow(1).is_err(), "a chunk beyond the budget is refused too");
        assert_eq!(bodies.held(), MAX_HELD, "a refusal counts nothing");
        drop(first);
        assert_eq!(bodies.held(), MAX_BODY);
        let third = bodies.reserve(MAX_BODY).unwrap();
        drop((second, third));
        assert_eq!(bodies.held(), 0);
    }
}
