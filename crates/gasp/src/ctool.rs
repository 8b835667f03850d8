//! C tools: a shared library chosen at run time (`GASP_TOOL=/path/libtool.so`) that
//! exports the GASP functions of `include/gasp.h`.
//!
//! The library must export `gasp_init`, `gasp_control`, `gasp_create_event`, and
//! `gasp_event_notifyVA` or `gasp_event_notify` (the VA form is preferred; §3.2 says they
//! are interchangeable).
//!
//! # Passing the varargs
//!
//! An event's arguments vary in number and type, while a Rust call to a variadic function
//! has a fixed argument list. On the two ABIs we support (System V x86-64 and AAPCS64 on
//! Linux) `va_arg` takes integer-class arguments (`int`, `size_t`, pointers, `uint64_t`)
//! and floating-point arguments from two separate sequences, each slot 8 bytes wide, and
//! an `int` is read from the low half of its slot. So every call passes
//! [`MAX_INT_ARGS`] integer slots followed by [`MAX_FLOAT_ARGS`] `double`s: the tool's
//! `va_arg` calls, in the event's order, find each integer and each double where they
//! expect it, and the unused trailing arguments are ignored, which C allows. Events with
//! more arguments than that are reported with the excess dropped (only user events can
//! have that many: the system events with the most, the reductions' ENDs, have nine
//! integer-class ones; [`crate::event_start`] documents the limit).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

use libloading::Library;

use crate::tool::{Arg, Event, GPtr, InitInfo, Tool};

/// Integer-class argument slots passed with every event: more than any system event has
/// (a test checks every one of them).
pub const MAX_INT_ARGS: usize = 12;
/// `double` argument slots passed with every event.
pub const MAX_FLOAT_ARGS: usize = 4;

type InitFn = unsafe extern "C" fn(c_int, *mut c_int, *mut *mut *mut c_char) -> *mut c_void;
type ControlFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
type CreateFn = unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char) -> c_uint;
type NotifyVaFn = unsafe extern "C" fn();
type NotifyFn = unsafe extern "C" fn(*mut c_void, c_uint, c_int, *const c_char, c_int, c_int, ...);

extern "C" {
    /// `csrc/forward.c`: packs its varargs into a `va_list` and calls `notify`.
    fn pgas_gasp_forward_va(
        notify: NotifyVaFn,
        context: *mut c_void,
        evttag: c_uint,
        evttype: c_int,
        filename: *const c_char,
        linenum: c_int,
        colnum: c_int,
        ...
    );
}

enum Notify {
    Va(NotifyVaFn),
    Variadic(NotifyFn),
}

/// A loaded C tool.
pub struct CTool {
    /// Kept loaded for the life of the process: the tool may have registered `atexit`
    /// handlers or handed out pointers into itself.
    _library: Library,
    context: *mut c_void,
    notify: Notify,
    control: ControlFn,
    create: CreateFn,
    warned_truncation: AtomicBool,
}

// SAFETY: GASP §3.2 requires a tool's functions to be thread-safe; the context pointer is
// only ever passed back to them.
unsafe impl Send for CTool {}
// SAFETY: as above.
unsafe impl Sync for CTool {}

impl CTool {
    /// Loads the tool at `path` and calls its `gasp_init`, which may edit `args`.
    pub fn load(path: &str, info: &InitInfo, args: &mut Vec<String>) -> Result<CTool, String> {
        let err = |what: String| format!("GASP_TOOL={path}: {what}");
        // SAFETY: loading runs the library's initializers; choosing to load it is the
        // user's decision, as with any LD_PRELOAD-style tool.
        let library = unsafe { Library::new(path) }.map_err(|e| err(e.to_string()))?;
        // SAFETY: each symbol is looked up with the type gasp.h declares for it.
        let (init, control, create, notify) = unsafe {
            let sym = |name: &[u8]| -> Result<*const c_void, String> {
                library.get::<*const c_void>(name).map(|s| *s).map_err(|_| {
                    err(format!(
                        "does not export {}",
                        String::from_utf8_lossy(&name[..name.len() - 1])
                    ))
                })
            };
            let init: InitFn = std::mem::transmute(sym(b"gasp_init\0")?);
            let control: ControlFn = std::mem::transmute(sym(b"gasp_control\0")?);
            let create: CreateFn = std::mem::transmute(sym(b"gasp_create_event\0")?);
            let notify = match sym(b"gasp_event_notifyVA\0") {
                Ok(f) => Notify::Va(std::mem::transmute::<*const c_void, NotifyVaFn>(f)),
                Err(_) => Notify::Variadic(std::mem::transmute::<*const c_void, NotifyFn>(
                    sym(b"gasp_event_notify\0").map_err(|_| {
                        err("exports neither gasp_event_notifyVA nor gasp_event_notify".into())
                    })?,
                )),
            };
            (init, control, create, notify)
        };
        let context = call_init(init, info, args);
        Ok(CTool {
            _library: library,
            context,
            notify,
            control,
            create,
            warned_truncation: AtomicBool::new(false),
        })
    }
}

/// Calls `gasp_init(language, &argc, &argv)` and reads back the arguments it left.
fn call_init(init: InitFn, info: &InitInfo, args: &mut Vec<String>) -> *mut c_void {
    // The strings and the array are leaked: the tool may keep pointers to them.
    let strings: Vec<*mut c_char> = args
        .iter()
        .map(|a| {
            CString::new(a.replace('\0', ""))
                .expect("NULs removed")
                .into_raw()
        })
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect();
    let mut argc = (strings.len() - 1) as c_int;
    let mut argv = Box::leak(strings.into_boxed_slice()).as_mut_ptr();
    // SAFETY: argc/argv describe a NULL-terminated array of valid C strings, as
    // `main` would receive them; `init` has the type gasp.h declares.
    let context = unsafe { init(info.language as c_int, &mut argc, &mut argv) };
    if !argv.is_null() {
        *args = (0..argc.max(0) as usize)
            // SAFETY: the tool keeps argv an array of at least argc C strings (§3.2 lets
            // it edit them, not break them).
            .map(|i| unsafe { *argv.add(i) })
            .take_while(|p| !p.is_null())
            .map(|p| {
                // SAFETY: `take_while` passed only non-null entries, and the tool keeps
                // every entry a NUL-terminated C string (§3.2).
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
    }
    context
}

thread_local! {
    /// The C form of each call site's file name, made once per site and thread.
    static FILES: RefCell<HashMap<usize, CString>> = RefCell::new(HashMap::new());
}

fn with_file<R>(location: &'static Location<'static>, f: impl FnOnce(*const c_char) -> R) -> R {
    FILES.with(|files| {
        let mut files = files.borrow_mut();
        let name = files
            .entry(location as *const _ as usize)
            .or_insert_with(|| CString::new(location.file().replace('\0', "")).expect("no NULs"));
        f(name.as_ptr())
    })
}

impl Tool for CTool {
    fn event_notify(&self, event: &Event<'_>) {
        // Pointer-to-shared arguments are passed by address (§5.4): they live here for
        // the duration of the call.
        let mut gptrs = [GPtr { rank: 0, addr: 0 }; MAX_INT_ARGS];
        let mut ints = [0u64; MAX_INT_ARGS];
        let mut floats = [0f64; MAX_FLOAT_ARGS];
        let (mut ni, mut nf, mut dropped) = (0, 0, false);
        for arg in event.args {
            let slot = match *arg {
                Arg::F64(v) => {
                    if nf < MAX_FLOAT_ARGS {
                        floats[nf] = v;
                        nf += 1;
                    } else {
                        dropped = true;
                    }
                    continue;
                }
                Arg::Int(v) => v as i64 as u64,
                Arg::Size(v) | Arg::Bytes(v) | Arg::Ptr(v) => v as u64,
                Arg::Rank(v) => u64::from(v),
                Arg::Handle(v) | Arg::U64(v) => v,
                Arg::I64(v) => v as u64,
                Arg::Str(s) => s.as_ptr() as u64,
                Arg::GPtr(g) => {
                    if ni < MAX_INT_ARGS {
                        gptrs[ni] = g;
                    }
                    &gptrs[ni.min(MAX_INT_ARGS - 1)] as *const GPtr as u64
                }
            };
            if ni < MAX_INT_ARGS {
                ints[ni] = slot;
                ni += 1;
            } else {
                dropped = true;
            }
        }
        if dropped && !self.warned_truncation.swap(true, Ordering::Relaxed) {
            eprintln!(
                "gasp: event {} has more than {MAX_INT_ARGS} integer or {MAX_FLOAT_ARGS} \
                 floating-point arguments; the C tool receives the first ones only",
                event.tag
            );
        }
        let (line, column) = (
            event.location.line() as c_int,
            event.location.column() as c_int,
        );
        let (tag, ty) = (event.tag as c_uint, event.ty as c_int);
        let [i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11] = ints;
        let [f0, f1, f2, f3] = floats;
        with_file(event.location, |file| match self.notify {
            // SAFETY: see the module docs: on the supported ABIs the tool's va_arg reads
            // each argument where it expects it; extra arguments are ignored.
            Notify::Va(f) => unsafe {
                pgas_gasp_forward_va(
                    f,
                    self.context,
                    tag,
                    ty,
                    file,
                    line,
                    column,
                    i0,
                    i1,
                    i2,
                    i3,
                    i4,
                    i5,
                    i6,
                    i7,
                    i8,
                    i9,
                    i10,
                    i11,
                    f0,
                    f1,
                    f2,
                    f3,
                )
            },
            // SAFETY: as above.
            Notify::Variadic(f) => unsafe {
                f(
                    self.context,
                    tag,
                    ty,
                    file,
                    line,
                    column,
                    i0,
                    i1,
                    i2,
                    i3,
                    i4,
                    i5,
                    i6,
                    i7,
                    i8,
                    i9,
                    i10,
                    i11,
                    f0,
                    f1,
                    f2,
                    f3,
                )
            },
        });
    }

    fn control(&self, on: bool) -> bool {
        // SAFETY: gasp_control with the context gasp_init returned.
        unsafe { (self.control)(self.context, c_int::from(on)) != 0 }
    }

    fn create_event(&self, name: &str, desc: Option<&str>) -> u32 {
        let name = CString::new(name.replace('\0', "")).expect("no NULs");
        let desc = desc.map(|d| CString::new(d.replace('\0', "")).expect("no NULs"));
        let desc_ptr = desc.as_ref().map_or(std::ptr::null(), |d| d.as_ptr());
        // SAFETY: valid C strings that outlive the call; the context from gasp_init.
        unsafe { (self.create)(self.context, name.as_ptr(), desc_ptr) }
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("C GASP tools are supported on Linux x86-64 and aarch64 (see ctool.rs)");
