//! The VIS figures of the gex bench (GASNet-EX "Vector/Indexed/Strided"), measured in
//! one interleaved group with their baselines:
//!
//! * `raw.strided_transpose_copy`: rank 0 transposes a 512×256 matrix of 8-byte
//!   elements (1 MiB) between two private buffers with a plain loop, writing the
//!   destination in order: the floor of a transposing copy on this machine.
//! * `vis.strided_transpose_put`: the same transpose as one `strided_put_blocking` into
//!   rank 1's segment (target ≥ 0.7× the raw copy's bandwidth).
//! * `vis.single_puts_64x64B`: 64 `put_blocking`s of 64 bytes to 64 places of rank 1's
//!   segment (128 bytes apart).
//! * `vis.indexed_put_64x64B`: the same 64 blocks as one `indexed_put_blocking`
//!   (target ≤ 0.8× the time of the 64 single puts).
//!
//! Each figure checks its data once, through rank 0's mapping of rank 1's segment.

use std::hint::black_box;

use super::common::figures::{page_aligned, Bench, Unit};
use super::common::time_iters;
use super::Ctx;
use gex::Flags;

/// Rows and columns of the transposed matrix (of u64): 1 MiB.
const ROWS: usize = 512;
const COLS: usize = 256;
const MATRIX: usize = ROWS * COLS * 8;
/// Where the transposed matrix lands in rank 1's segment.
const TRANSPOSE_OFF: usize = 13 << 20;
/// Where the 64 blocks land in rank 1's segment, `BLOCK_STRIDE` apart.
const BLOCKS_OFF: usize = 15 << 20;
const BLOCKS: usize = 64;
const BLOCK: usize = 64;
const BLOCK_STRIDE: usize = 128;

const _: () = assert!(
    TRANSPOSE_OFF + MATRIX <= BLOCKS_OFF && BLOCKS_OFF + BLOCKS * BLOCK_STRIDE <= super::SEGMENT
);

/// The figures, with their baselines.
pub(crate) fn figures(ctx: &Ctx) -> Vec<Bench<'static>> {
    vec![
        raw_transpose(ctx),
        transpose_put(ctx),
        single_puts(ctx),
        indexed_put(ctx),
    ]
}

/// A private matrix whose element `k` is `k` (as u64 bytes).
fn matrix() -> &'static [u8] {
    let m = page_aligned(MATRIX, 0);
    for (k, e) in m.chunks_exact_mut(8).enumerate() {
        e.copy_from_slice(&(k as u64).to_ne_bytes());
    }
    m
}

/// Whether `t` (as u64s) is the transpose of `matrix()`.
fn check_transposed(t: &[u8], what: &str) {
    for (k, e) in t.chunks_exact(8).enumerate() {
        let (j, i) = (k / ROWS, k % ROWS);
        let want = (i * COLS + j) as u64;
        assert_eq!(
            e,
            want.to_ne_bytes(),
            "{what}: element {k} is not the transpose"
        );
    }
}

fn raw_transpose(ctx: &Ctx) -> Bench<'static> {
    // SAFETY: page-aligned buffers of whole u64s, any bit pattern of which is a u64.
    let (_, src, _) = unsafe { matrix().align_to::<u64>() };
    // SAFETY: as above.
    let (_, dst, _) = unsafe { page_aligned(MATRIX, 0).align_to_mut::<u64>() };
    let mut checked = false;
    Bench::solo(
        ctx.name("raw.strided_transpose_copy"),
        Unit::Bandwidth(MATRIX),
        move |iters| {
            let t = time_iters(iters, || {
                let src = black_box(src);
                for (j, row) in dst.chunks_exact_mut(ROWS).enumerate() {
                    for (i, d) in row.iter_mut().enumerate() {
                        *d = src[i * COLS + j];
                    }
                }
                black_box(&mut *dst);
            });
            if !checked {
                // SAFETY: the u64s of `dst` as bytes.
                let bytes = unsafe { std::slice::from_raw_parts(dst.as_ptr().cast(), MATRIX) };
                check_transposed(bytes, "raw transpose");
                checked = true;
            }
            t
        },
    )
}

fn transpose_put(ctx: &Ctx) -> Bench<'static> {
    let team = ctx.team;
    let src = matrix();
    let dest = ctx.remote(1, TRANSPOSE_OFF);
    let there = ctx.peer_local(1) + TRANSPOSE_OFF;
    let mut checked = false;
    // Level 0 walks a row (source stride 8, destination stride ROWS * 8), level 1 the
    // rows (source stride COLS * 8, destination stride 8).
    let (src_strides, dst_strides) = ([8, (COLS * 8) as isize], [(ROWS * 8) as isize, 8]);
    Bench::solo(
        ctx.name("vis.strided_transpose_put"),
        Unit::Bandwidth(MATRIX),
        move |iters| {
            let t = time_iters(iters, || {
                team.strided_put_blocking(
                    1,
                    dest,
                    &dst_strides,
                    black_box(src),
                    0,
                    &src_strides,
                    8,
                    &[COLS, ROWS],
                    Flags::NONE,
                )
                .unwrap();
            });
            if !checked {
                // SAFETY: this figure's range of rank 1's segment, mapped here and
                // written only by it.
                let t = unsafe { std::slice::from_raw_parts(there as *const u8, MATRIX) };
                check_transposed(t, "strided transpose put");
                checked = true;
            }
            t
        },
    )
}

/// The 64 blocks of the block figures: private, contiguous, block `b` filled with `b`.
fn blocks() -> Vec<&'static [u8]> {
    let all = page_aligned(BLOCKS * BLOCK, 0);
    for (b, block) in all.chunks_exact_mut(BLOCK).enumerate() {
        block.fill(b as u8 + 1);
    }
    let all: &'static [u8] = all;
    all.chunks_exact(BLOCK).collect()
}

/// Whether rank 1's block area, mapped here at `there`, holds the blocks.
fn check_blocks(there: usize, what: &str) {
    // SAFETY: the block area of rank 1's segment, mapped here; written only by the block
    // figures, which run one at a time.
    let area = unsafe { std::slice::from_raw_parts(there as *const u8, BLOCKS * BLOCK_STRIDE) };
    for (b, slot) in area.chunks_exact(BLOCK_STRIDE).enumerate() {
        assert!(
            slot[..BLOCK].iter().all(|&x| x == b as u8 + 1),
            "{what}: block {b}"
        );
    }
}

/// Clears rank 1's block area, mapped here at `there`, so each block figure's check
/// sees its own writes.
fn clear_blocks(there: usize) {
    // SAFETY: as in `check_blocks`.
    unsafe { std::ptr::write_bytes(there as *mut u8, 0, BLOCKS * BLOCK_STRIDE) };
}

fn block_addrs(ctx: &Ctx) -> Vec<usize> {
    (0..BLOCKS)
        .map(|b| ctx.remote(1, BLOCKS_OFF + b * BLOCK_STRIDE))
        .collect()
}

fn single_puts(ctx: &Ctx) -> Bench<'static> {
    let team = ctx.team;
    let (blocks, addrs) = (blocks(), block_addrs(ctx));
    let check = ctx.peer_local(1) + BLOCKS_OFF;
    let mut checked = false;
    Bench::solo(
        ctx.name("vis.single_puts_64x64B"),
        Unit::Latency,
        move |iters| {
            if !checked {
                clear_blocks(check);
            }
            let t = time_iters(iters, || {
                for (b, &a) in black_box(&blocks).iter().zip(&addrs) {
                    team.put_blocking(1, a, b, Flags::NONE).unwrap();
                }
            });
            if !checked {
                check_blocks(check, "64 single puts");
                checked = true;
            }
            t
        },
    )
}

fn indexed_put(ctx: &Ctx) -> Bench<'static> {
    let team = ctx.team;
    let (blocks, addrs) = (blocks(), block_addrs(ctx));
    let check = ctx.peer_local(1) + BLOCKS_OFF;
    let mut checked = false;
    Bench::solo(
        ctx.name("vis.indexed_put_64x64B"),
        Unit::Latency,
        move |iters| {
            if !checked {
                clear_blocks(check);
            }
            let t = time_iters(iters, || {
                team.indexed_put_blocking(1, &addrs, BLOCK, black_box(&blocks), Flags::NONE)
                    .unwrap();
            });
            if !checked {
                check_blocks(check, "indexed put");
                checked = true;
            }
            t
        },
    )
}
