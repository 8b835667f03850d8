//! GASP 1.4: the performance-tool interface of the PGAS stack.
