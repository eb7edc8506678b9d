// Paste at the end of crates/fairway-core/src/engine/id_index.rs, then:
//   cargo test --release -p fairway-core --lib timing -- --ignored --nocapture
// Even rounds grow the index from empty (moves), odd rounds start it sized (no moves).
#[cfg(test)]
mod timing {
    use super::*;
    #[test]
    #[ignore]
    fn time_growth() {
        let n = 3_000_000;
        let mut names: Vec<String> = (0..n).map(|i| format!("0193{i:08x}-0000-7000-8000-{i:012x}")).collect();
        let mut order: Vec<u32> = (0..n as u32).collect();
        let mut x = 88172645463325252u64;
        for i in (1..order.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let shuffled: Vec<String> = order.iter().map(|&i| std::mem::take(&mut names[i as usize])).collect();
        for round in 0..6 {
            let mut index = if round % 2 == 0 { IdIndex::<u32>::default() } else { IdIndex::<u32>::with_capacity(n) };
            let t = std::time::Instant::now();
            for (i, s) in shuffled.iter().enumerate() {
                index.insert(s, i as u32, |p| &shuffled[p as usize]);
            }
            eprintln!("round {round}: {:.1} ns per insert", t.elapsed().as_nanos() as f64 / n as f64);
        }
    }
}
