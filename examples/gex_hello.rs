//! Every rank says hello through the GASNet-EX layer: `UPCXX_RANKS=4 cargo run --release --example gex_hello`.

fn main() {
    let (client, _endpoint, team) =
        gex::Client::init("HELLO", gex::Flags::NONE).expect("gex::Client::init");
    println!("Hello from rank {} of {}", team.rank(), team.size());
    client.finalize();
}
