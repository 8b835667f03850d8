//! The values of GASP §5.4.8's `gasp_upc_reduction_t` (the `reduction_type` argument
//! of the reductions), numbered in the spec's order, and ours for a user data type.

macro_rules! reductions {
    ($($(#[doc = $doc:literal])+ $name:ident = $c:literal = $v:literal;)*) => {
        $($(#[doc = $doc])+ pub const $name: i32 = $v;)*

        /// Every value with its C name, in order.
        pub const ALL: &[(&str, i32)] = &[$(($c, $v)),*];
    };
}

reductions! {
    /// `signed char`.
    C = "GASP_UPC_REDUCTION_C" = 0;
    /// `unsigned char`.
    UC = "GASP_UPC_REDUCTION_UC" = 1;
    /// `short`.
    S = "GASP_UPC_REDUCTION_S" = 2;
    /// `unsigned short`.
    US = "GASP_UPC_REDUCTION_US" = 3;
    /// `int` (`GEX_DT_I32`).
    I = "GASP_UPC_REDUCTION_I" = 4;
    /// `unsigned int` (`GEX_DT_U32`).
    UI = "GASP_UPC_REDUCTION_UI" = 5;
    /// `long` (`GEX_DT_I64`).
    L = "GASP_UPC_REDUCTION_L" = 6;
    /// `unsigned long` (`GEX_DT_U64`).
    UL = "GASP_UPC_REDUCTION_UL" = 7;
    /// `float` (`GEX_DT_FLT`).
    F = "GASP_UPC_REDUCTION_F" = 8;
    /// `double` (`GEX_DT_DBL`).
    D = "GASP_UPC_REDUCTION_D" = 9;
    /// `long double`.
    LD = "GASP_UPC_REDUCTION_LD" = 10;
    /// Ours: a user data type (`GEX_DT_USER`), which UPC does not have.
    USER = "GASP_GEX_REDUCTION_USER" = 11;
}
