use fairway_server::wire::SubmitBody;
use serde_json::value::RawValue;
use std::time::Instant;

fn main() {
    let mut body = String::from("{\"jobs\":[");
    for i in 0..1000 {
        if i > 0 { body.push(','); }
        body.push_str(&format!("{{\"id\":\"0193a5f2-7c1e-7{:03x}-8abc-0123456789ab\",\"tenant\":\"tenant-{}\",\"payload\":{{\"t\":\"bulk\",\"i\":{},\"e\":1733550000123.45}}}}", i, i % 10, i));
    }
    body.push_str("]}");
    let bytes = body.as_bytes();
    println!("body {} bytes", bytes.len());
    #[derive(serde::Deserialize)]
    struct Texts<'a> { #[serde(borrow)] jobs: Vec<&'a RawValue> }
    #[derive(serde::Deserialize)]
    struct Whole { jobs: Vec<SubmitBody> }
    for _ in 0..3 {
        let n = 300;
        let t = Instant::now();
        for _ in 0..n { let v: Texts = serde_json::from_slice(bytes).unwrap(); std::hint::black_box(v.jobs.len()); }
        let split = t.elapsed().as_nanos() as f64 / n as f64 / 1000.0;
        let texts: Texts = serde_json::from_slice(bytes).unwrap();
        let t = Instant::now();
        for _ in 0..n { for r in &texts.jobs { let b: SubmitBody = serde_json::from_str(r.get()).unwrap(); std::hint::black_box(b); } }
        let items = t.elapsed().as_nanos() as f64 / n as f64 / 1000.0;
        let t = Instant::now();
        for _ in 0..n { let w: Whole = serde_json::from_slice(bytes).unwrap(); std::hint::black_box(w.jobs.len()); }
        let whole = t.elapsed().as_nanos() as f64 / n as f64 / 1000.0;
        println!("ns a job: split {split:.0}, items {items:.0}, one typed pass {whole:.0}");
    }
}
