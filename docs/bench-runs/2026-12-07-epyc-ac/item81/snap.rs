// Throwaway (item 81): an engine holding N queued jobs with UUID-like ids over 100 tenants,
// snapshotted R times; prints ns per live job for each snapshot.
use fairway_core::{Engine, EngineConfig, JobSpec, Policy, Time};
fn main() {
    let n: usize = std::env::args().nth(1).map(|a| a.parse().unwrap()).unwrap_or(300_000);
    let r: usize = std::env::args().nth(2).map(|a| a.parse().unwrap()).unwrap_or(15);
    let mut e = Engine::new(Time::ZERO, Policy::built_in(), EngineConfig::default());
    for i in 0..n {
        let id = format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", i * 2654435761usize % (1 << 32), i % 65536, i % 4096, (i / 7) % 4096, i * 97);
        e.submit(Time(i as u64), JobSpec::new(id, format!("tenant-{}", i % 100)));
    }
    let mut total = 0usize;
    for _ in 0..r {
        let t = std::time::Instant::now();
        let p = e.snapshot_pieces();
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        total += p.len();
        println!("ns/job {ns:.0}");
    }
    eprintln!("{total}");
}
