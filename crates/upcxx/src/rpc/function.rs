//! Function addresses: how a message names the code that runs it on arrival.
//!
//! Every rank runs the same binary, so a function travels as the offset of its code from
//! an anchor function of that binary (§6.3); in a position-independent executable the
//! offset is the same in every process (see the `rpc` module docs). A leaf of `rpc`: it
//! knows only the message being run (`incoming`).

use super::incoming::Incoming;

/// What a message names: the code that runs it on arrival (a trampoline for an RPC, a
/// completion for a reply).
pub(super) type Entry = unsafe fn(&Incoming<'_>);

/// The fixed point function addresses are measured from.
#[inline(never)]
extern "C" fn anchor() {}

fn anchor_addr() -> usize {
    anchor as *const () as usize
}

pub(super) fn function_offset(f: Entry) -> [u32; 2] {
    let off = (f as usize).wrapping_sub(anchor_addr()) as u64;
    [off as u32, (off >> 32) as u32]
}

/// # Safety
/// `off` must come from [`function_offset`] in a process running this same binary.
pub(super) unsafe fn function_at(off: [u32; 2]) -> Entry {
    let off = u64::from(off[0]) | u64::from(off[1]) << 32;
    let addr = anchor_addr().wrapping_add(off as usize);
    // SAFETY: the caller guarantees `addr` is the address of an `Entry` of this binary
    // (same code, same offset from the anchor in every process of a PIE binary).
    unsafe { std::mem::transmute::<usize, Entry>(addr) }
}
