//! Hello world with remote procedure calls (UPC++ spec Figure 9.1):
//! `UPCXX_RANKS=4 cargo run --release --example rpc_hello`.
//!
//! Each rank asks its right neighbour (the last rank wraps around to 0) to say hello;
//! the neighbour answers with its own rank, which the caller checks.

use upcxx::Rank;

/// Runs on the neighbour: prints who called, returns who answered.
fn hello_world(caller: Rank) -> Rank {
    println!(
        "Hello from rank {}, called by rank {caller}",
        upcxx::rank_me()
    );
    upcxx::rank_me()
}

fn main() {
    upcxx::init();
    let neighbour = (upcxx::rank_me() + 1) % upcxx::rank_n();
    let answer = upcxx::rpc(neighbour, hello_world, (upcxx::rank_me(),));
    let who = answer.wait();
    assert_eq!(who, neighbour, "the answer came from the wrong rank");
    upcxx::finalize();
}
