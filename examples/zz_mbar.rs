fn main() {
    let (client, _ep, team) = gex::Client::init("ZZ", gex::Flags::NONE).expect("init");
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(100_000);
    let mode = std::env::args().nth(2).unwrap_or_default();
    for _ in 0..1000 {
        team.barrier_nb().wait();
    }
    let mut g = vec![];
    let mut m = vec![];
    for _ in 0..7 {
        if mode != "mpi" {
            let t = std::time::Instant::now();
            for _ in 0..n {
                team.barrier_nb().wait();
            }
            g.push(t.elapsed().as_nanos() as f64 / n as f64);
        }
        if mode != "gex" {
            let t = std::time::Instant::now();
            for _ in 0..n {
                unsafe { mpi::ffi::MPI_Barrier(mpi::ffi::RSMPI_COMM_WORLD) };
            }
            m.push(t.elapsed().as_nanos() as f64 / n as f64);
        }
    }
    g.sort_by(|a, b| a.partial_cmp(b).unwrap());
    m.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if team.rank() == 0 {
        let gm = g.get(g.len() / 2).copied().unwrap_or(0.0);
        let mm = m.get(m.len() / 2).copied().unwrap_or(1.0);
        println!("gex {gm:.1} ns mpi {mm:.1} ns ratio {:.3}", gm / mm);
    }
    client.finalize();
}
