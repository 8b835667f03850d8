//! Hello world in UPC++ (spec Figure 2.1):
//! `UPCXX_RANKS=4 cargo run --release --example hello`.

fn main() {
    upcxx::init();
    println!(
        "Hello from rank {} of {}",
        upcxx::rank_me(),
        upcxx::rank_n()
    );
    upcxx::finalize();
}
