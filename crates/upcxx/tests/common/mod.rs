//! Helpers shared by the multi-rank tests of `upcxx`.
#![allow(dead_code)]

#[cfg(feature = "gasp")]
pub(crate) mod recorder;

use std::any::Any;
use std::panic::AssertUnwindSafe;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The text of a panic's payload, if it is a string.
fn payload_text(payload: &(dyn Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
}

/// The message of the panic that `f` must raise.
pub(crate) fn panic_text(f: impl FnOnce()) -> String {
    let err = std::panic::catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    payload_text(&*err).expect("a string panic payload")
}

/// The message of a caught panic (a thread's, a `catch_unwind`'s); empty if its payload
/// is not a string.
pub(crate) fn panic_message(payload: Box<dyn Any + Send>) -> String {
    payload_text(&*payload).unwrap_or_default()
}

/// Makes user-level progress until `done`.
pub(crate) fn progress_until(mut done: impl FnMut() -> bool) {
    while !done() {
        upcxx::progress(upcxx::ProgressLevel::User);
    }
}

/// An RPC argument that refuses to serialize (and deserializes from nothing).
pub(crate) struct Unserializable;

impl Serialize for Unserializable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("refusing on purpose"))
    }
}

impl<'de> serde::Deserialize<'de> for Unserializable {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Ok(Unserializable)
    }
}

/// Every rank's `value`, in rank order. Collective. The values travel through files in
/// the spmd job's own temporary directory, so tests of the communication calls do not
/// depend on the calls they test.
pub(crate) fn all_gather<V: Serialize + DeserializeOwned>(value: &V) -> Vec<V> {
    let dir = std::env::var(gex::testing::GEX_SPMD_DONE_DIR).expect("inside an spmd job");
    let me = upcxx::rank_me();
    let tmp = format!("{dir}/gather-{me}.tmp");
    std::fs::write(&tmp, serde_json::to_vec(value).unwrap()).unwrap();
    std::fs::rename(&tmp, format!("{dir}/gather-{me}.json")).unwrap();
    upcxx::barrier();
    let all = (0..upcxx::rank_n())
        .map(|r| {
            let bytes = std::fs::read(format!("{dir}/gather-{r}.json")).unwrap();
            serde_json::from_slice(&bytes).unwrap()
        })
        .collect();
    upcxx::barrier();
    all
}
