//! What a memory-kind call could not do: [`KindError`], each naming the call. A leaf
//! of `kinds`.

use std::fmt;

use super::DeviceAddr;

/// What a memory-kind call could not do. Each names the call that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KindError {
    /// The driver of the kind's class is not installed (no CUDA driver library), or
    /// cannot be initialized (its `cuInit` fails).
    NoDriver {
        /// The call that failed.
        call: &'static str,
        /// The class (`cuda_device`).
        class: &'static str,
        /// What was looked for, and where.
        detail: String,
    },
    /// No device of the class has this id.
    NoSuchDevice {
        /// The call that failed.
        call: &'static str,
        /// The class (`cuda_device`).
        class: &'static str,
        /// The id asked for.
        id: i32,
        /// How many devices of the class there are (ids `0..count`).
        count: i32,
    },
    /// The device has less memory than asked for.
    OutOfMemory {
        /// The call that failed.
        call: &'static str,
        /// Bytes asked for.
        size: usize,
        /// Bytes of memory the device has in all.
        total: usize,
    },
    /// A size that is not allowed (zero).
    BadSize {
        /// The call that failed.
        call: &'static str,
        /// The size given.
        size: usize,
    },
    /// A range that leaves the device segment.
    OutOfSegment {
        /// The call that failed.
        call: &'static str,
        /// The range's offset into the segment.
        offset: usize,
        /// The range's length.
        len: usize,
        /// The segment's size.
        size: usize,
    },
    /// Two ranges of one copy with different lengths.
    LengthMismatch {
        /// The call that failed.
        call: &'static str,
        /// The destination's length.
        dst: usize,
        /// The source's length.
        src: usize,
    },
    /// Two ranges of one segment that overlap.
    Overlap {
        /// The call that failed.
        call: &'static str,
        /// The destination's offset: in the segment (of this rank's), or from the lower
        /// of the two addresses (of another rank's, whose segment this rank may not
        /// know).
        dst: usize,
        /// The source's offset, as `dst`'s.
        src: usize,
        /// The ranges' length.
        len: usize,
    },
    /// An address that is not memory of the device it was given as.
    NotDeviceMemory {
        /// The call that failed.
        call: &'static str,
        /// The address.
        addr: DeviceAddr,
        /// The kind it was claimed to be.
        kind: String,
    },
    /// Memory that a device segment of this process already holds (a segment is the
    /// only manager of its memory).
    InUse {
        /// The call that failed.
        call: &'static str,
        /// The start of the memory given.
        addr: DeviceAddr,
        /// Its size.
        size: usize,
    },
    /// The driver failed a call for another reason.
    Driver {
        /// The call that failed.
        call: &'static str,
        /// The driver function.
        function: &'static str,
        /// The driver's name of its error.
        error: String,
    },
}

impl fmt::Display for KindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KindError::NoDriver {
                call,
                class,
                detail,
            } => write!(f, "{call}: no {class} driver: {detail}"),
            KindError::NoSuchDevice {
                call,
                class,
                id,
                count,
            } => write!(
                f,
                "{call}: no {class} with id {id}: this process sees {count} (ids 0..{count})"
            ),
            KindError::OutOfMemory { call, size, total } => write!(
                f,
                "{call}: {size} bytes asked for, more than the device's {total} bytes"
            ),
            KindError::BadSize { call, size } => {
                write!(
                    f,
                    "{call}: a device segment of {size} bytes: must be at least 1"
                )
            }
            KindError::OutOfSegment {
                call,
                offset,
                len,
                size,
            } => write!(
                f,
                "{call}: {len} bytes at offset {offset} leave the device segment of {size} bytes"
            ),
            KindError::LengthMismatch { call, dst, src } => write!(
                f,
                "{call}: the destination has {dst} bytes and the source {src}: they must match"
            ),
            KindError::Overlap {
                call,
                dst,
                src,
                len,
            } => write!(
                f,
                "{call}: {len} bytes from offset {src} to offset {dst} of one segment overlap"
            ),
            KindError::NotDeviceMemory { call, addr, kind } => {
                write!(f, "{call}: address {addr:#x} is not memory of {kind}")
            }
            KindError::InUse { call, addr, size } => write!(
                f,
                "{call}: the {size} bytes at {addr:#x} overlap a device segment of this process"
            ),
            KindError::Driver {
                call,
                function,
                error,
            } => write!(f, "{call}: {function} failed: {error}"),
        }
    }
}

impl std::error::Error for KindError {}
