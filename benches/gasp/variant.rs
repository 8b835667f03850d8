//! What the bench compares: the four build and tool variants and the two operations.

/// A build and tool combination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Off,
    NoTool,
    Profile,
    Trace,
}

impl Variant {
    pub(crate) const ALL: [Variant; 4] = [
        Variant::Off,
        Variant::NoTool,
        Variant::Profile,
        Variant::Trace,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Off => "off",
            Variant::NoTool => "notool",
            Variant::Profile => "profile",
            Variant::Trace => "trace",
        }
    }

    pub(crate) fn instrumented(self) -> bool {
        self != Variant::Off
    }

    pub(crate) fn has_tool(self) -> bool {
        matches!(self, Variant::Profile | Variant::Trace)
    }

    /// The `GASP_TOOL` value.
    pub(crate) fn tool(self) -> &'static str {
        match self {
            Variant::Off | Variant::NoTool => "",
            Variant::Profile => "profile",
            Variant::Trace => "trace",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The two measured operations: the kernel's keys and the result names' stems.
pub(crate) const OPS: [&str; 2] = ["rput_8B", "rpc_roundtrip"];
