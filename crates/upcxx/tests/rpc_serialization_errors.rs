//! RPC arguments that fail to serialize, or that break serialization's rules (UPC++
//! spec §6.1 ¶5), after the message's slot was claimed: an RPC's arguments are
//! serialized straight into the slot of a negotiated-payload Active Message, so each
//! failure must give the slot back and leave RPC usable.
mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::{panic_text, Unserializable};
use gex::testing::spmd;
use upcxx::{progress, rank_me, rank_n, rpc, rpc_ff, ProgressLevel};

/// A serialization that fails after outgrowing one Active Message (its bytes already
/// moved from the slot to the overflow vector) sends nothing, and the slot it claimed
/// is given back: the RPCs sent next to the same rank run, once each, in order.
#[test]
fn failure_past_one_message_sends_nothing() {
    static RAN: AtomicU64 = AtomicU64::new(0);
    spmd(3, || {
        upcxx::init();
        let to = (rank_me() + 1) % rank_n();
        let big = vec![7u8; 3 * gex::am::lub_request_medium()];
        let msg = panic_text(|| {
            rpc_ff(
                to,
                |_: Vec<u8>, _: Unserializable| {
                    RAN.fetch_add(1000, Ordering::Relaxed);
                },
                (big, Unserializable),
            );
        });
        assert!(
            msg.contains("upcxx::rpc_ff: the arguments could not be serialized"),
            "{msg}"
        );
        for i in 1..=3u64 {
            rpc_ff(
                to,
                |i: u64| {
                    assert_eq!(RAN.load(Ordering::Relaxed), i - 1, "in order, once each");
                    RAN.store(i, Ordering::Relaxed);
                },
                (i,),
            );
        }
        while RAN.load(Ordering::Relaxed) != 3 {
            progress(ProgressLevel::User);
        }
        upcxx::barrier();
        upcxx::finalize();
    });
}

/// Serializes as a `u32`, sending an `rpc_ff` while it does, which §6.1 ¶5 forbids
/// (serialization may not call a UPC++ routine with a progress level other than none).
struct Chatty;

impl serde::Serialize for Chatty {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        rpc_ff(rank_me(), || {}, ());
        s.serialize_u32(5)
    }
}

impl<'de> serde::Deserialize<'de> for Chatty {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Ok(Chatty)
    }
}

/// A serialization that communicates fails saying so, whether it writes into a batch
/// or into a claimed network slot (between the AM's Prepare and Commit, where gex
/// refuses the send): nothing is sent, and RPC stays usable.
#[test]
fn serialization_that_communicates_panics_and_rpc_still_works() {
    spmd(2, || {
        upcxx::init();
        let msg = panic_text(|| {
            rpc_ff(1 - rank_me(), |_: Chatty| {}, (Chatty,));
        });
        assert!(
            msg.contains("serialization may not communicate")
                || msg.contains("between an AM Prepare and its Commit"),
            "{msg}"
        );
        assert_eq!(rpc(1 - rank_me(), |x: u32| x + 1, (1u32,)).wait(), 2);
        upcxx::barrier();
        upcxx::finalize();
    });
}
