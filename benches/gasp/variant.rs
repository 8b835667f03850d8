//! What the bench compares: the five build and tool variants and the two operations.

/// A build and tool combination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Off,
    NoTool,
    Profile,
    Trace,
    /// `GASP_TOOL=tracing`: the `tracing` forwarder, with no subscriber set (`tracing`'s
    /// no-op default).
    Tracing,
}

impl Variant {
    pub(crate) const ALL: [Variant; 5] = [
        Variant::Off,
        Variant::NoTool,
        Variant::Profile,
        Variant::Trace,
        Variant::Tracing,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::NoTool => "notool",
            Variant::Profile => "profile",
            Variant::Trace => "trace",
            Variant::Tracing => "tracing",
        }
    }

    pub(crate) fn instrumented(self) -> bool {
        self != Variant::Off
    }

    pub(crate) fn has_tool(self) -> bool {
        matches!(self, Variant::Profile | Variant::Trace | Variant::Tracing)
    }

    /// The `GASP_TOOL` value.
    pub(crate) fn tool(self) -> &'static str {
        match self {
            Variant::Off | Variant::NoTool => "",
            Variant::Profile => "profile",
            Variant::Trace => "trace",
            Variant::Tracing => "tracing",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The two measured operations: the kernel's keys and the result names' stems.
pub(crate) const OPS: [&str; 2] = ["rput_8B", "rpc_roundtrip"];
