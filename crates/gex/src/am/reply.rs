//! A Request handler's one Reply (GASNet-EX `gex_AM_Reply*`) and the Reply-size
//! queries of a token.

use super::handler::{AmIndex, Token, AM_INDEX_BASE};
use super::send::{check_lc, payload_query, send, LcKind, Payload};
use crate::conduit::{Conduit, Network};
use crate::context;
use crate::event::Lc;
use crate::{Flags, NoOp};

impl Token<'_> {
    /// Checks that this handler may still send its Reply. The Reply counts as sent
    /// only once an injection succeeds (`mark_replied`), so a refused call can be
    /// corrected and retried.
    #[track_caller]
    pub(super) fn claim_reply(&self, call: &str) {
        if self.msg.network != Network::Request {
            panic!("gex::{call}: a Reply may only be sent from a Request handler (handler {} runs as a Reply)", self.entry.name);
        }
        if self.replied.get() {
            panic!(
                "gex::{call}: handler {} already sent its one Reply",
                self.entry.name
            );
        }
        if context::holding_hsl() {
            panic!("gex::{call}: a Reply may not be sent while holding a handler-safe lock (GASNet-EX spec, \"Calls from restricted context\")");
        }
        // Before any slot is claimed: a Prepare whose claim then failed would leave the
        // requester's Reply queue stopped at an unpublished slot.
        if context::in_prepare() {
            panic!("gex::{call}: a Reply may not be sent between an AM Prepare and its Commit (GASNet-EX spec, \"Calls from restricted context\")");
        }
    }

    /// The least handler index this handler's Reply may name: the library's own
    /// handlers answer to each other; a client's handler answers to a client's.
    pub(super) fn first_handler(&self) -> AmIndex {
        if self.entry.index < AM_INDEX_BASE {
            1
        } else {
            AM_INDEX_BASE
        }
    }

    pub(super) fn mark_replied<T>(&self, r: Result<T, NoOp>) -> Result<T, NoOp> {
        if r.is_ok() {
            self.replied.set(true);
        }
        r
    }

    /// GASNet-EX `gex_AM_ReplyShort`.
    #[track_caller]
    pub fn reply_short(&self, handler: AmIndex, args: &[u32], flags: Flags) -> Result<(), NoOp> {
        const CALL: &str = "Token::reply_short";
        self.claim_reply(CALL);
        let r = send(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            handler,
            args,
            Payload::None,
            flags,
            self.first_handler(),
        );
        self.mark_replied(r)
    }

    /// GASNet-EX `gex_AM_ReplyMedium`. `lc` may not be [`Lc::Group`].
    #[track_caller]
    pub fn reply_medium(
        &self,
        handler: AmIndex,
        payload: &[u8],
        lc: Lc<'_>,
        flags: Flags,
        args: &[u32],
    ) -> Result<(), NoOp> {
        const CALL: &str = "Token::reply_medium";
        self.claim_reply(CALL);
        check_lc(CALL, &lc, false);
        let r = send(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            handler,
            args,
            Payload::Medium(payload),
            flags,
            self.first_handler(),
        );
        lc.complete_now();
        self.mark_replied(r)
    }

    /// GASNet-EX `gex_AM_ReplyLong`. `lc` may not be [`Lc::Group`]. A payload of no
    /// bytes passes `dest_addr` as given, as for
    /// [`Team::request_long`](crate::Team::request_long).
    #[track_caller]
    pub fn reply_long(
        &self,
        handler: AmIndex,
        payload: &[u8],
        dest_addr: usize,
        lc: Lc<'_>,
        flags: Flags,
        args: &[u32],
    ) -> Result<(), NoOp> {
        const CALL: &str = "Token::reply_long";
        self.claim_reply(CALL);
        check_lc(CALL, &lc, false);
        let r = send(
            self.rt,
            CALL,
            self.msg.src,
            Network::Reply,
            handler,
            args,
            Payload::Long(payload, dest_addr),
            flags,
            self.first_handler(),
        );
        lc.complete_now();
        self.mark_replied(r)
    }

    /// GASNet-EX `gex_Token_MaxReplyMedium` (the `AM_PREPARE_LEAST_*` flags as for
    /// [`Team::max_reply_medium`](crate::Team::max_reply_medium)).
    #[track_caller]
    pub fn max_reply_medium(&self, _lc: LcKind, flags: Flags, nargs: usize) -> usize {
        payload_query(
            "Token::max_reply_medium",
            flags,
            nargs,
            self.rt.conduit.am_max_medium(),
        )
    }

    /// GASNet-EX `gex_Token_MaxReplyLong`.
    #[track_caller]
    pub fn max_reply_long(&self, _lc: LcKind, flags: Flags, nargs: usize) -> usize {
        payload_query(
            "Token::max_reply_long",
            flags,
            nargs,
            self.rt.conduit.am_max_long(),
        )
    }
}
