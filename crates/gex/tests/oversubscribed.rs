//! `Client::init` finds whether this host runs more ranks than the process may use
//! processors, which makes the waits' naps grow (`backoff.rs`) and upcxx's idle
//! `progress` calls yield: true exactly when the neighbourhood outnumbers them.

use gex::{Client, Flags};

fn check() {
    assert!(
        !gex::layered::oversubscribed(),
        "false before init (no placement known)"
    );
    let (client, _ep, _team) = Client::init("OVERSUB", Flags::NONE).unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ranks = gex::nbrhd_info().members.len();
    assert_eq!(
        gex::layered::oversubscribed(),
        ranks > cpus,
        "{ranks} ranks share memory here, {cpus} processors"
    );
    client.finalize();
}

#[test]
fn init_finds_a_host_with_more_ranks_than_processors() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // One job that fits the processors (unless there is only one), one that does not.
    for n in [cpus.clamp(1, 4), cpus + 1] {
        gex::testing::spmd(n, check);
    }
}
