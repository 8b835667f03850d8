//! The design document's "i" calls on [`Team`]: broadcast, scatter, gather, gather-all
//! and exchange with one address per image (`gasnet_coll_broadcasti_nb` …
//! `gasnet_coll_exchangei_nb`), after [`Team::coll_init`]. Each runs the method of the
//! plain call with per-rank block counts; `images` has how.

use super::flags::Addr;
use super::images::{images_of, mapped_images, AddrList, Fanout};
use super::movement::{broadcast_messages, gather_all_staggered, layout, movement_words, opening};
use super::select::{method, Method, Operation};
use super::{gather_all, launch, mapped, pulls, rooted, shared_op, Build, CollFlags};
use crate::coll::engine::Collective;
use crate::conduit::{Conduit, Rank};
use crate::event::Event;
use crate::team::Team;

/// The bytes of this rank's images' `nbytes` at each of `srcs`, packed in image order.
///
/// # Safety
/// Each of `srcs` must be readable for `nbytes` bytes.
unsafe fn pack(srcs: &[*mut u8], nbytes: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(srcs.len() * nbytes);
    for &s in srcs {
        // SAFETY: the caller's contract.
        buf.extend_from_slice(unsafe { std::slice::from_raw_parts(s, nbytes) });
    }
    buf
}

/// Copies of `len` bytes from `from` to each of `to` (after the first, which holds them).
fn replicate(to: &[*mut u8], len: usize) -> Vec<(usize, usize, usize)> {
    to[1..]
        .iter()
        .map(|&t| (to[0] as usize, t as usize, len))
        .collect()
}

impl Team {
    /// The design document's `gasnet_coll_broadcasti_nb`: `nbytes` at the root's `src`
    /// to the `dst` of every image.
    ///
    /// # Safety
    /// As [`coll_broadcast_nb`](Team::coll_broadcast_nb), for each image's `dst`; the
    /// images' destinations must not overlap each other or the root's `src`.
    #[track_caller]
    pub unsafe fn broadcasti_nb(
        &self,
        root: Rank,
        dst: AddrList<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::broadcasti_nb";
        let (rt, modes) = opening(self, CALL, Some(root), flags);
        let images = images_of(self, CALL);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, &images, me);
        let s = src.mine(CALL, "src", modes, me, n);
        let srcs = mapped(rt, self, CALL, src.list(), |r| {
            if r == root {
                nbytes
            } else {
                0
            }
        });
        let m = method(Operation::Broadcast, n, nbytes, srcs.is_some());
        let automatic = super::select::forced(Operation::Broadcast).is_none();
        let w = movement_words(7, flags, m, Some(root), nbytes, [dst.list(), src.list()]);
        let d0 = d[0];
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let from = (srcs[root as usize], 0);
                    let all = pulls::scatter(&images, me, root, from, &d, nbytes);
                    shared_op(&team, modes, all)
                }
                _ => {
                    // SAFETY: the caller's contract, passed on (into the first image).
                    let op = unsafe {
                        broadcast_messages(rt, &team, m, automatic, root, d[0], s, nbytes)
                    };
                    Box::new(Fanout::new(Box::new(op), Vec::new(), replicate(&d, nbytes)))
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_BROADCAST,
            d0,
            s,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_scatteri_nb`: block `i` (`nbytes` at
    /// `src + i * nbytes`) of the root's `src` to the `dst` of image `i`.
    ///
    /// # Safety
    /// As [`scatter_nb`](Team::scatter_nb), with one block per image: the root's `src`
    /// readable for `images * nbytes` bytes, each image's `dst` writable for `nbytes`.
    #[track_caller]
    pub unsafe fn scatteri_nb(
        &self,
        root: Rank,
        dst: AddrList<'_>,
        src: Addr<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::scatteri_nb";
        let (rt, modes) = opening(self, CALL, Some(root), flags);
        let images = images_of(self, CALL);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, &images, me);
        let s = src.mine(CALL, "src", modes, me, n);
        let sizes = images.sizes(CALL, nbytes);
        let all = images.total() * nbytes;
        let srcs = mapped(
            rt,
            self,
            CALL,
            src.list(),
            |r| if r == root { all } else { 0 },
        );
        let m = method(Operation::Scatter, n, nbytes, srcs.is_some());
        let w = movement_words(8, flags, m, Some(root), nbytes, [dst.list(), src.list()]);
        let dl = d.as_ptr();
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let from = (srcs[root as usize], nbytes);
                    let all = pulls::scatter(&images, me, root, from, &d, nbytes);
                    shared_op(&team, modes, all)
                }
                _ => {
                    let mut buf = vec![0u8; sizes[me as usize]];
                    // SAFETY: the caller's contract, passed on; `buf` lives in the
                    // operation until it completes.
                    let op = unsafe {
                        rooted::Scatter::new(
                            layout(rt, &team, m, root, &sizes),
                            buf.as_mut_ptr(),
                            s,
                        )
                    };
                    let copies = d
                        .iter()
                        .enumerate()
                        .map(|(k, &to)| (buf.as_ptr() as usize + k * nbytes, to as usize, nbytes))
                        .collect();
                    Box::new(Fanout::new(Box::new(op), vec![buf], copies))
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_SCATTER,
            dl,
            s,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_gatheri_nb`: the `src` (`nbytes`) of image
    /// `i` to block `i` of the root's `dst`.
    ///
    /// # Safety
    /// As [`gather_nb`](Team::gather_nb), with one block per image: each image's `src`
    /// readable for `nbytes` bytes, the root's `dst` writable for `images * nbytes`.
    #[track_caller]
    pub unsafe fn gatheri_nb(
        &self,
        root: Rank,
        dst: Addr<'_>,
        src: AddrList<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::gatheri_nb";
        let (rt, modes) = opening(self, CALL, Some(root), flags);
        let images = images_of(self, CALL);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, me, n);
        let s = src.mine(CALL, "src", modes, &images, me);
        let sizes = images.sizes(CALL, nbytes);
        let srcs = mapped_images(rt, self, CALL, &images, src.list(), nbytes);
        let m = method(Operation::Gather, n, nbytes, srcs.is_some());
        let w = movement_words(9, flags, m, Some(root), nbytes, [dst.list(), src.list()]);
        let sl = s.as_ptr();
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let all = pulls::gather(&images, me, root, &srcs, d, nbytes);
                    shared_op(&team, modes, all)
                }
                _ => {
                    // SAFETY: the caller's contract: every image's `src` is readable now.
                    let packed = unsafe { pack(&s, nbytes) };
                    // SAFETY: the caller's contract, passed on; `packed` is read here only.
                    Box::new(unsafe {
                        rooted::Gather::new(layout(rt, &team, m, root, &sizes), d, packed.as_ptr())
                    })
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_GATHER,
            d,
            sl,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_gather_alli_nb`: the `src` (`nbytes`) of
    /// image `i` to block `i` of the `dst` of every image.
    ///
    /// # Safety
    /// As [`gather_all_nb`](Team::gather_all_nb), with one block per image: each
    /// image's `src` readable for `nbytes` bytes and its `dst` writable for
    /// `images * nbytes`; no two images' areas overlap.
    #[track_caller]
    pub unsafe fn gather_alli_nb(
        &self,
        dst: AddrList<'_>,
        src: AddrList<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::gather_alli_nb";
        let (rt, modes) = opening(self, CALL, None, flags);
        let images = images_of(self, CALL);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, &images, me);
        let s = src.mine(CALL, "src", modes, &images, me);
        let sizes = images.sizes(CALL, nbytes);
        let all = images.total() * nbytes;
        let srcs = mapped_images(rt, self, CALL, &images, src.list(), nbytes);
        let m = method(Operation::GatherAll, n, nbytes, srcs.is_some());
        let w = movement_words(10, flags, m, None, nbytes, [dst.list(), src.list()]);
        let chunk = rt.conduit.am_max_medium();
        let (dl, sl) = (d.as_ptr(), s.as_ptr());
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let all = pulls::all_to_all(&images, me, &srcs, 0, &d, nbytes);
                    shared_op(&team, modes, all)
                }
                (Method::Staggered, _) => {
                    // SAFETY: the caller's contract: every image's `src` is readable now.
                    let packed = unsafe { pack(&s, nbytes) };
                    // SAFETY: the caller's contract: the first image's `dst` holds every
                    // block; `packed` lives in the operation until it completes.
                    let op = unsafe {
                        gather_all_staggered(CALL, &team, &images, d[0], packed.as_ptr(), nbytes)
                    };
                    Box::new(Fanout::new(Box::new(op), vec![packed], replicate(&d, all)))
                }
                _ => {
                    // SAFETY: the caller's contract: every image's `src` is readable now.
                    let packed = unsafe { pack(&s, nbytes) };
                    // SAFETY: the caller's contract, passed on (the first image's `dst`
                    // receives every block); `packed` is read here only.
                    let op = unsafe {
                        gather_all::Dissemination::new(me, n, &sizes, d[0], packed.as_ptr(), chunk)
                    };
                    Box::new(Fanout::new(Box::new(op), Vec::new(), replicate(&d, all)))
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_GATHER_ALL,
            dl,
            sl,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }

    /// The design document's `gasnet_coll_exchangei_nb`: block `j` of image `i`'s `src`
    /// to block `i` of image `j`'s `dst`.
    ///
    /// # Safety
    /// As [`exchange_nb`](Team::exchange_nb), with one block per image: each image's
    /// `src` readable, and its `dst` writable, for `images * nbytes` bytes; no two
    /// images' areas overlap.
    #[track_caller]
    pub unsafe fn exchangei_nb(
        &self,
        dst: AddrList<'_>,
        src: AddrList<'_>,
        nbytes: usize,
        flags: CollFlags,
    ) -> Event {
        const CALL: &str = "Team::exchangei_nb";
        let (rt, modes) = opening(self, CALL, None, flags);
        let images = images_of(self, CALL);
        let (me, n) = (self.rank, self.size);
        let d = dst.mine(CALL, "dst", modes, &images, me);
        let s = src.mine(CALL, "src", modes, &images, me);
        images.sizes(CALL, nbytes);
        let all = images.total() * nbytes;
        let srcs = mapped_images(rt, self, CALL, &images, src.list(), all);
        let m = method(Operation::Exchange, n, nbytes, srcs.is_some());
        let w = movement_words(11, flags, m, None, nbytes, [dst.list(), src.list()]);
        let (mine, first) = (images.of(me), images.first(me));
        let (dl, sl) = (d.as_ptr(), s.as_ptr());
        let team = *self;
        let build = move || -> Box<dyn Collective> {
            match (m, srcs) {
                (Method::Shared, Some(srcs)) => {
                    let all = pulls::all_to_all(&images, me, &srcs, nbytes, &d, nbytes);
                    shared_op(&team, modes, all)
                }
                _ => {
                    // Blocks between this rank's own images.
                    for (k, &from) in s.iter().enumerate() {
                        for (j, &to) in d.iter().enumerate() {
                            // SAFETY: the caller's contract: every image's `src` and `dst`
                            // hold every block, and no two images' areas overlap.
                            unsafe {
                                std::ptr::copy(
                                    from.add((first + j) * nbytes),
                                    to.add((first + k) * nbytes),
                                    nbytes,
                                )
                            };
                        }
                    }
                    // To each rank `q`: for each of my images, the blocks of q's images.
                    let order = gather_all::Staggered::staggered(me, n);
                    let packed: Vec<Vec<u8>> = (0..n)
                        .map(|q| {
                            if q == me {
                                return Vec::new();
                            }
                            let (at, len) = (images.first(q) * nbytes, images.of(q) * nbytes);
                            let mut buf = Vec::with_capacity(mine * len);
                            for &from in &s {
                                // SAFETY: the caller's contract: every image's `src` holds
                                // every block.
                                buf.extend_from_slice(unsafe {
                                    std::slice::from_raw_parts(from.add(at), len)
                                });
                            }
                            buf
                        })
                        .collect();
                    // From each rank `r`: for each of r's images `i`, the blocks of mine,
                    // at `first(r) * mine * nbytes` of `received`.
                    let received_len = all.checked_mul(mine).unwrap_or_else(|| {
                        panic!("gex::{CALL}: {mine} images' blocks overflow the address space")
                    });
                    let mut received = vec![0u8; received_len];
                    let base = received.as_mut_ptr() as usize;
                    let mut copies = Vec::new();
                    for r in order.clone() {
                        for i in 0..images.of(r) {
                            for (j, &to) in d.iter().enumerate() {
                                let from = base + ((images.first(r) + i) * mine + j) * nbytes;
                                let to = to as usize + (images.first(r) + i) * nbytes;
                                copies.push((from, to, nbytes));
                            }
                        }
                    }
                    let op = gather_all::Staggered::new(
                        CALL,
                        received.as_mut_ptr(),
                        order
                            .clone()
                            .map(|q| (q, packed[q as usize].as_ptr(), packed[q as usize].len()))
                            .collect(),
                        order
                            .map(|r| {
                                let at = images.first(r) * mine * nbytes;
                                (r, at, images.of(r) * mine * nbytes)
                            })
                            .collect(),
                    );
                    let mut buffers = packed;
                    buffers.push(received);
                    Box::new(Fanout::new(Box::new(op), buffers, copies))
                }
            }
        };
        // SAFETY: `build` captures the call's buffers, which its contract keeps valid
        // until completion, and owned values.
        let inner = unsafe { Build::new(build) };
        reported!(
            GASP_UPC_ALL_EXCHANGE,
            dl,
            sl,
            nbytes,
            flags,
            launch(rt, self, CALL, modes, &w, inner)
        )
    }
}
