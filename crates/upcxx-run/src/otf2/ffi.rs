//! The few functions of the OTF2 C library (3.x, `otf2/otf2.h`) that the export uses,
//! declared by hand (no maintained Rust binding of OTF2 exists), and the writer over
//! them.
//!
//! The archive is written serially by this one process for all locations
//! (`OTF2_Archive_SetSerialCollectiveCallbacks`), in the order the OTF2 documentation
//! gives: open, event files, one event writer per location, close them, then the global
//! definitions (strings, clock, system tree, location groups, locations, regions, the
//! group, communicator and RMA window of the job), the local definition files, close.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;

use super::{Plan, Record};

#[repr(C)]
struct OTF2_Archive {
    _opaque: [u8; 0],
}
#[repr(C)]
struct OTF2_EvtWriter {
    _opaque: [u8; 0],
}
#[repr(C)]
struct OTF2_DefWriter {
    _opaque: [u8; 0],
}
#[repr(C)]
struct OTF2_GlobalDefWriter {
    _opaque: [u8; 0],
}

type OTF2_ErrorCode = i32;
type OTF2_TimeStamp = u64;
type OTF2_LocationRef = u64;
type Ref32 = u32;

#[repr(C)]
struct OTF2_FlushCallbacks {
    otf2_pre_flush: extern "C" fn(*mut c_void, u8, OTF2_LocationRef, *mut c_void, bool) -> u8,
    otf2_post_flush: extern "C" fn(*mut c_void, u8, OTF2_LocationRef) -> OTF2_TimeStamp,
}

const OTF2_SUCCESS: OTF2_ErrorCode = 0;
const OTF2_FILEMODE_WRITE: u8 = 0;
const OTF2_SUBSTRATE_POSIX: u8 = 1;
const OTF2_COMPRESSION_NONE: u8 = 1;
const OTF2_FLUSH: u8 = 1;
const OTF2_CHUNK_SIZE_EVENTS_DEFAULT: u64 = 1024 * 1024;
const OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT: u64 = 4 * 1024 * 1024;
const OTF2_UNDEFINED_REF: u32 = u32::MAX;
const OTF2_UNDEFINED_TIMESTAMP: u64 = u64::MAX;
const OTF2_REGION_ROLE_FUNCTION: u8 = 1;
const OTF2_PARADIGM_UPC: u8 = 12;
const OTF2_REGION_FLAG_NONE: u32 = 0;
const OTF2_LOCATION_GROUP_TYPE_PROCESS: u8 = 1;
const OTF2_LOCATION_TYPE_CPU_THREAD: u8 = 1;
const OTF2_GROUP_TYPE_COMM_LOCATIONS: u8 = 4;
const OTF2_GROUP_TYPE_COMM_GROUP: u8 = 5;
const OTF2_GROUP_FLAG_NONE: u32 = 0;
const OTF2_COMM_FLAG_NONE: u32 = 0;
const OTF2_RMA_WIN_FLAG_NONE: u32 = 0;

// Linked by the build script (`cargo::rustc-link-lib`), which found the library.
extern "C" {
    fn OTF2_Archive_Open(
        path: *const c_char,
        name: *const c_char,
        mode: u8,
        chunk_events: u64,
        chunk_defs: u64,
        substrate: u8,
        compression: u8,
    ) -> *mut OTF2_Archive;
    fn OTF2_Archive_Close(a: *mut OTF2_Archive) -> OTF2_ErrorCode;
    fn OTF2_Archive_SetCreator(a: *mut OTF2_Archive, creator: *const c_char) -> OTF2_ErrorCode;
    fn OTF2_Archive_SetFlushCallbacks(
        a: *mut OTF2_Archive,
        cb: *const OTF2_FlushCallbacks,
        data: *mut c_void,
    ) -> OTF2_ErrorCode;
    fn OTF2_Archive_SetSerialCollectiveCallbacks(a: *mut OTF2_Archive) -> OTF2_ErrorCode;
    fn OTF2_Archive_OpenEvtFiles(a: *mut OTF2_Archive) -> OTF2_ErrorCode;
    fn OTF2_Archive_CloseEvtFiles(a: *mut OTF2_Archive) -> OTF2_ErrorCode;
    fn OTF2_Archive_OpenDefFiles(a: *mut OTF2_Archive) -> OTF2_ErrorCode;
    fn OTF2_Archive_CloseDefFiles(a: *mut OTF2_Archive) -> OTF2_ErrorCode;
    fn OTF2_Archive_GetEvtWriter(
        a: *mut OTF2_Archive,
        location: OTF2_LocationRef,
    ) -> *mut OTF2_EvtWriter;
    fn OTF2_Archive_CloseEvtWriter(a: *mut OTF2_Archive, w: *mut OTF2_EvtWriter) -> OTF2_ErrorCode;
    fn OTF2_Archive_GetDefWriter(
        a: *mut OTF2_Archive,
        location: OTF2_LocationRef,
    ) -> *mut OTF2_DefWriter;
    fn OTF2_Archive_CloseDefWriter(a: *mut OTF2_Archive, w: *mut OTF2_DefWriter) -> OTF2_ErrorCode;
    fn OTF2_Archive_GetGlobalDefWriter(a: *mut OTF2_Archive) -> *mut OTF2_GlobalDefWriter;
    fn OTF2_Error_GetDescription(code: OTF2_ErrorCode) -> *const c_char;

    fn OTF2_EvtWriter_Enter(
        w: *mut OTF2_EvtWriter,
        attrs: *mut c_void,
        time: OTF2_TimeStamp,
        region: Ref32,
    ) -> OTF2_ErrorCode;
    fn OTF2_EvtWriter_Leave(
        w: *mut OTF2_EvtWriter,
        attrs: *mut c_void,
        time: OTF2_TimeStamp,
        region: Ref32,
    ) -> OTF2_ErrorCode;
    fn OTF2_EvtWriter_MpiSend(
        w: *mut OTF2_EvtWriter,
        attrs: *mut c_void,
        time: OTF2_TimeStamp,
        receiver: u32,
        comm: Ref32,
        tag: u32,
        length: u64,
    ) -> OTF2_ErrorCode;
    fn OTF2_EvtWriter_MpiRecv(
        w: *mut OTF2_EvtWriter,
        attrs: *mut c_void,
        time: OTF2_TimeStamp,
        sender: u32,
        comm: Ref32,
        tag: u32,
        length: u64,
    ) -> OTF2_ErrorCode;
    fn OTF2_EvtWriter_RmaPut(
        w: *mut OTF2_EvtWriter,
        attrs: *mut c_void,
        time: OTF2_TimeStamp,
        win: Ref32,
        remote: u32,
        bytes: u64,
        matching_id: u64,
    ) -> OTF2_ErrorCode;
    fn OTF2_EvtWriter_RmaGet(
        w: *mut OTF2_EvtWriter,
        attrs: *mut c_void,
        time: OTF2_TimeStamp,
        win: Ref32,
        remote: u32,
        bytes: u64,
        matching_id: u64,
    ) -> OTF2_ErrorCode;
    fn OTF2_EvtWriter_RmaOpCompleteBlocking(
        w: *mut OTF2_EvtWriter,
        attrs: *mut c_void,
        time: OTF2_TimeStamp,
        win: Ref32,
        matching_id: u64,
    ) -> OTF2_ErrorCode;

    fn OTF2_GlobalDefWriter_WriteClockProperties(
        w: *mut OTF2_GlobalDefWriter,
        resolution: u64,
        offset: u64,
        length: u64,
        realtime: u64,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteString(
        w: *mut OTF2_GlobalDefWriter,
        id: Ref32,
        s: *const c_char,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteSystemTreeNode(
        w: *mut OTF2_GlobalDefWriter,
        id: Ref32,
        name: Ref32,
        class: Ref32,
        parent: Ref32,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteLocationGroup(
        w: *mut OTF2_GlobalDefWriter,
        id: Ref32,
        name: Ref32,
        ty: u8,
        parent: Ref32,
        creating: Ref32,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteLocation(
        w: *mut OTF2_GlobalDefWriter,
        id: OTF2_LocationRef,
        name: Ref32,
        ty: u8,
        events: u64,
        group: Ref32,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteRegion(
        w: *mut OTF2_GlobalDefWriter,
        id: Ref32,
        name: Ref32,
        canonical: Ref32,
        description: Ref32,
        role: u8,
        paradigm: u8,
        flags: u32,
        file: Ref32,
        begin: u32,
        end: u32,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteGroup(
        w: *mut OTF2_GlobalDefWriter,
        id: Ref32,
        name: Ref32,
        ty: u8,
        paradigm: u8,
        flags: u32,
        n: u32,
        members: *const u64,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteComm(
        w: *mut OTF2_GlobalDefWriter,
        id: Ref32,
        name: Ref32,
        group: Ref32,
        parent: Ref32,
        flags: u32,
    ) -> OTF2_ErrorCode;
    fn OTF2_GlobalDefWriter_WriteRmaWin(
        w: *mut OTF2_GlobalDefWriter,
        id: Ref32,
        name: Ref32,
        comm: Ref32,
        flags: u32,
    ) -> OTF2_ErrorCode;
}

extern "C" fn pre_flush(_: *mut c_void, _: u8, _: OTF2_LocationRef, _: *mut c_void, _: bool) -> u8 {
    OTF2_FLUSH
}

extern "C" fn post_flush(_: *mut c_void, _: u8, _: OTF2_LocationRef) -> OTF2_TimeStamp {
    0
}

static FLUSH: OTF2_FlushCallbacks = OTF2_FlushCallbacks {
    otf2_pre_flush: pre_flush,
    otf2_post_flush: post_flush,
};

/// `code` as an error naming the call, or `Ok`.
fn check(call: &str, code: OTF2_ErrorCode) -> Result<(), String> {
    if code == OTF2_SUCCESS {
        return Ok(());
    }
    // SAFETY: OTF2_Error_GetDescription returns a static NUL-terminated string (or null).
    let text = unsafe {
        let d = OTF2_Error_GetDescription(code);
        if d.is_null() {
            String::new()
        } else {
            CStr::from_ptr(d).to_string_lossy().into_owned()
        }
    };
    Err(format!("otf2: {call} failed: {text} (error {code})"))
}

fn nonnull<T>(call: &str, p: *mut T) -> Result<*mut T, String> {
    if p.is_null() {
        Err(format!("otf2: {call} failed"))
    } else {
        Ok(p)
    }
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).expect("NULs replaced")
}

/// An open archive, closed when dropped.
struct Archive(*mut OTF2_Archive);

impl Drop for Archive {
    fn drop(&mut self) {
        // SAFETY: the pointer came from OTF2_Archive_Open and is closed only here.
        unsafe {
            OTF2_Archive_Close(self.0);
        }
    }
}

/// Strings of the global definitions, numbered in order of first use.
#[derive(Default)]
struct Strings(Vec<String>, std::collections::HashMap<String, u32>);

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.1.get(s) {
            return id;
        }
        let id = self.0.len() as u32;
        self.0.push(s.to_owned());
        self.1.insert(s.to_owned(), id);
        id
    }
}

/// The job's communicator, group and RMA window ids.
const COMM: u32 = 0;
const WIN: u32 = 0;
const GROUP_LOCATIONS: u32 = 0;
const GROUP_COMM: u32 = 1;

/// Writes `plan` as the archive `dir/name.otf2`.
pub(super) fn write(plan: &Plan, dir: &Path, name: &str) -> Result<(), String> {
    let path = cstring(&dir.to_string_lossy());
    let cname = cstring(name);
    // The SAFETY comments below rely on this: the archive and writer pointers come
    // from the OTF2 calls that made them, were checked non-null, and are used before the
    // archive is closed (`Archive`'s drop, after the writers are closed); strings are
    // NUL-terminated and outlive the calls; `members` has `n` elements.
    // SAFETY: the strings are NUL-terminated and outlive the call.
    let opened = unsafe {
        OTF2_Archive_Open(
            path.as_ptr(),
            cname.as_ptr(),
            OTF2_FILEMODE_WRITE,
            OTF2_CHUNK_SIZE_EVENTS_DEFAULT,
            OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT,
            OTF2_SUBSTRATE_POSIX,
            OTF2_COMPRESSION_NONE,
        )
    };
    let archive = Archive(nonnull("OTF2_Archive_Open", opened)?);
    let a = archive.0;
    let creator = cstring("upcxx-run");
    // SAFETY: see above.
    unsafe {
        check(
            "OTF2_Archive_SetFlushCallbacks",
            OTF2_Archive_SetFlushCallbacks(a, &FLUSH, std::ptr::null_mut()),
        )?;
        check(
            "OTF2_Archive_SetSerialCollectiveCallbacks",
            OTF2_Archive_SetSerialCollectiveCallbacks(a),
        )?;
        check(
            "OTF2_Archive_SetCreator",
            OTF2_Archive_SetCreator(a, creator.as_ptr()),
        )?;
        check("OTF2_Archive_OpenEvtFiles", OTF2_Archive_OpenEvtFiles(a))?;
    }
    let null = std::ptr::null_mut();
    for loc in &plan.locations {
        // SAFETY: see above.
        let w = unsafe { OTF2_Archive_GetEvtWriter(a, loc.id) };
        let w = nonnull("OTF2_Archive_GetEvtWriter", w)?;
        for &(t, r) in &loc.records {
            // SAFETY: see above.
            let code = unsafe {
                match r {
                    Record::Enter(region) => OTF2_EvtWriter_Enter(w, null, t, region),
                    Record::Leave(region) => OTF2_EvtWriter_Leave(w, null, t, region),
                    Record::MpiSend { to, bytes } => {
                        OTF2_EvtWriter_MpiSend(w, null, t, to, COMM, 0, bytes)
                    }
                    Record::MpiRecv { from, bytes } => {
                        OTF2_EvtWriter_MpiRecv(w, null, t, from, COMM, 0, bytes)
                    }
                    Record::RmaPut { remote, bytes, id } => {
                        OTF2_EvtWriter_RmaPut(w, null, t, WIN, remote, bytes, id)
                    }
                    Record::RmaGet { remote, bytes, id } => {
                        OTF2_EvtWriter_RmaGet(w, null, t, WIN, remote, bytes, id)
                    }
                    Record::RmaComplete { id } => {
                        OTF2_EvtWriter_RmaOpCompleteBlocking(w, null, t, WIN, id)
                    }
                }
            };
            check("OTF2_EvtWriter record", code)?;
        }
        // SAFETY: see above.
        let code = unsafe { OTF2_Archive_CloseEvtWriter(a, w) };
        check("OTF2_Archive_CloseEvtWriter", code)?;
    }
    // SAFETY: see above.
    unsafe {
        check("OTF2_Archive_CloseEvtFiles", OTF2_Archive_CloseEvtFiles(a))?;
    }

    // SAFETY: see above.
    let g = unsafe { OTF2_Archive_GetGlobalDefWriter(a) };
    let g = nonnull("OTF2_Archive_GetGlobalDefWriter", g)?;
    let mut strings = Strings::default();
    let empty = strings.id("");
    let job = strings.id("job");
    let node = strings.id("node");
    let groups: Vec<u32> = (0..plan.ranks)
        .map(|r| strings.id(&format!("rank {r}")))
        .collect();
    let locs: Vec<u32> = plan.locations.iter().map(|l| strings.id(&l.name)).collect();
    let regions: Vec<u32> = plan.regions.iter().map(|r| strings.id(r)).collect();
    let world = strings.id("world");
    let segments = strings.id("shared segments");
    let members: Vec<u64> = (0..u64::from(plan.ranks)).collect();
    // SAFETY: see above.
    unsafe {
        for (id, s) in strings.0.iter().enumerate() {
            let c = cstring(s);
            check(
                "OTF2_GlobalDefWriter_WriteString",
                OTF2_GlobalDefWriter_WriteString(g, id as u32, c.as_ptr()),
            )?;
        }
        check(
            "OTF2_GlobalDefWriter_WriteClockProperties",
            OTF2_GlobalDefWriter_WriteClockProperties(
                g,
                1_000_000_000,
                0,
                plan.end_ns,
                OTF2_UNDEFINED_TIMESTAMP,
            ),
        )?;
        check(
            "OTF2_GlobalDefWriter_WriteSystemTreeNode",
            OTF2_GlobalDefWriter_WriteSystemTreeNode(g, 0, job, node, OTF2_UNDEFINED_REF),
        )?;
        for (rank, &name) in groups.iter().enumerate() {
            check(
                "OTF2_GlobalDefWriter_WriteLocationGroup",
                OTF2_GlobalDefWriter_WriteLocationGroup(
                    g,
                    rank as u32,
                    name,
                    OTF2_LOCATION_GROUP_TYPE_PROCESS,
                    0,
                    OTF2_UNDEFINED_REF,
                ),
            )?;
        }
        for (loc, &name) in plan.locations.iter().zip(&locs) {
            check(
                "OTF2_GlobalDefWriter_WriteLocation",
                OTF2_GlobalDefWriter_WriteLocation(
                    g,
                    loc.id,
                    name,
                    OTF2_LOCATION_TYPE_CPU_THREAD,
                    loc.records.len() as u64,
                    loc.rank,
                ),
            )?;
        }
        for (id, &name) in regions.iter().enumerate() {
            check(
                "OTF2_GlobalDefWriter_WriteRegion",
                OTF2_GlobalDefWriter_WriteRegion(
                    g,
                    id as u32,
                    name,
                    name,
                    empty,
                    OTF2_REGION_ROLE_FUNCTION,
                    OTF2_PARADIGM_UPC,
                    OTF2_REGION_FLAG_NONE,
                    empty,
                    0,
                    0,
                ),
            )?;
        }
        // The job's communicator: rank r is location r.
        check(
            "OTF2_GlobalDefWriter_WriteGroup",
            OTF2_GlobalDefWriter_WriteGroup(
                g,
                GROUP_LOCATIONS,
                empty,
                OTF2_GROUP_TYPE_COMM_LOCATIONS,
                OTF2_PARADIGM_UPC,
                OTF2_GROUP_FLAG_NONE,
                members.len() as u32,
                members.as_ptr(),
            ),
        )?;
        check(
            "OTF2_GlobalDefWriter_WriteGroup",
            OTF2_GlobalDefWriter_WriteGroup(
                g,
                GROUP_COMM,
                empty,
                OTF2_GROUP_TYPE_COMM_GROUP,
                OTF2_PARADIGM_UPC,
                OTF2_GROUP_FLAG_NONE,
                members.len() as u32,
                members.as_ptr(),
            ),
        )?;
        check(
            "OTF2_GlobalDefWriter_WriteComm",
            OTF2_GlobalDefWriter_WriteComm(
                g,
                COMM,
                world,
                GROUP_COMM,
                OTF2_UNDEFINED_REF,
                OTF2_COMM_FLAG_NONE,
            ),
        )?;
        check(
            "OTF2_GlobalDefWriter_WriteRmaWin",
            OTF2_GlobalDefWriter_WriteRmaWin(g, WIN, segments, COMM, OTF2_RMA_WIN_FLAG_NONE),
        )?;
        check("OTF2_Archive_OpenDefFiles", OTF2_Archive_OpenDefFiles(a))?;
    }
    for loc in &plan.locations {
        // SAFETY: see above.
        unsafe {
            let d = nonnull(
                "OTF2_Archive_GetDefWriter",
                OTF2_Archive_GetDefWriter(a, loc.id),
            )?;
            check(
                "OTF2_Archive_CloseDefWriter",
                OTF2_Archive_CloseDefWriter(a, d),
            )?;
        }
    }
    // SAFETY: see above.
    unsafe {
        check("OTF2_Archive_CloseDefFiles", OTF2_Archive_CloseDefFiles(a))?;
    }
    drop(archive);
    Ok(())
}
