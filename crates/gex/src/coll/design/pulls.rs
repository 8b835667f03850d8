//! The shared method's pulls for the data-movement calls, per image: a plain call is
//! the case of one image per rank ([`Images::one_each`]), its addresses the one-entry
//! lists. Each builder returns the pulls of the whole operation as `(reader, pull)` in
//! node-major image order, for [`shared_op`](super::shared_op); `d` holds this rank's
//! images' destinations and `srcs` the sources mapped in this process, one per image.

use super::images::Images;
use super::shared::Pull;
use crate::conduit::Rank;

/// Every image of the team as `(rank, index among the rank's images, team index)`,
/// node-major.
fn every_image(images: &Images) -> impl Iterator<Item = (Rank, usize, usize)> + '_ {
    (0..images.ranks())
        .flat_map(move |r| (0..images.of(r)).map(move |k| (r, k, images.first(r) + k)))
}

/// Scatter: image `i` reads `nbytes` at the root's `src + i * stride` into its
/// destination; broadcast is the case `stride == 0`.
pub(super) fn scatter(
    images: &Images,
    me: Rank,
    root: Rank,
    (src, stride): (usize, usize),
    d: &[*mut u8],
    nbytes: usize,
) -> Vec<(Rank, Pull)> {
    every_image(images)
        .map(|(r, k, i)| {
            let dst = if r == me { d[k] as usize } else { 0 };
            let pull = Pull {
                owner: root,
                src: src + i * stride,
                dst,
                len: nbytes,
            };
            (r, pull)
        })
        .collect()
}

/// Gather: the root reads each image's `nbytes` into block `i` of its `d`.
pub(super) fn gather(
    images: &Images,
    me: Rank,
    root: Rank,
    srcs: &[usize],
    d: *mut u8,
    nbytes: usize,
) -> Vec<(Rank, Pull)> {
    every_image(images)
        .map(|(r, _, i)| {
            let dst = if me == root {
                d as usize + i * nbytes
            } else {
                0
            };
            let pull = Pull {
                owner: r,
                src: srcs[i],
                dst,
                len: nbytes,
            };
            (root, pull)
        })
        .collect()
}

/// Gather-all and exchange: image `j` reads `nbytes` at `srcs[i] + j * stride` of
/// every image `i` into block `i` of its destination; gather-all is the case
/// `stride == 0`, exchange `stride == nbytes`.
pub(super) fn all_to_all(
    images: &Images,
    me: Rank,
    srcs: &[usize],
    stride: usize,
    d: &[*mut u8],
    nbytes: usize,
) -> Vec<(Rank, Pull)> {
    every_image(images)
        .flat_map(|(r, k, j)| every_image(images).map(move |i| (r, k, j, i)))
        .map(|(r, k, j, (owner, _, i))| {
            let dst = if r == me {
                d[k] as usize + i * nbytes
            } else {
                0
            };
            let pull = Pull {
                owner,
                src: srcs[i] + j * stride,
                dst,
                len: nbytes,
            };
            (r, pull)
        })
        .collect()
}
