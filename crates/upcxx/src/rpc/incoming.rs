//! A message being run: its header, its payload in a receive page, and the means to
//! keep that page alive past the run (§6.5 ¶6). Sits on `inbox` (pages and headers).

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use super::inbox::{Head, Page};

/// A message being run: its header and its payload, in a receive page.
pub(super) struct Incoming<'a> {
    pub head: &'a Head,
    pub payload: &'a [u8],
    pub(super) hold: &'a Hold,
}

/// The page of the messages being run, if one of them must keep it.
#[derive(Default)]
pub(super) struct Hold {
    pub(super) slot: RefCell<Option<Arc<OnceLock<Page>>>>,
}

/// Keeps the receive buffer of a message alive while it exists.
pub(super) struct PageHold {
    _page: Arc<OnceLock<Page>>,
}

impl Incoming<'_> {
    /// Keeps this message's receive buffer, and so the views into it, alive until the
    /// handle is dropped (§6.5 ¶6). The page is handed over when the run of its messages
    /// ends; it is not reused.
    pub(super) fn hold(&self) -> PageHold {
        let mut slot = self.hold.slot.borrow_mut();
        PageHold {
            _page: Arc::clone(slot.get_or_insert_with(Default::default)),
        }
    }
}

impl PageHold {
    /// The hold of a later run of a message of this page: the run keeps the page, and
    /// so the message's payload, alive as long as this handle did.
    pub(super) fn into_hold(self) -> Hold {
        Hold {
            slot: RefCell::new(Some(self._page)),
        }
    }
}
