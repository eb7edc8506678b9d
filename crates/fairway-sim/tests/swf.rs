//! The SWF parser reads the four shared traces with their documented job counts and machine
//! sizes, reports malformed lines by line and field, and the replay importer check reproduces
//! the waits and slowdowns the real logs recorded.

use std::path::{Path, PathBuf};

use fairway_sim::swf::{SwfErrorKind, SwfTrace, parse_swf, parse_swf_file, recorded_metrics};

/// The shared traces directory: `$FAIRWAY_TRACES`, or `shared/traces` beside the repository.
fn traces_dir() -> PathBuf {
    let dir = match std::env::var_os("FAIRWAY_TRACES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    };
    assert!(
        dir.is_dir(),
        "the traces directory {} does not exist: set FAIRWAY_TRACES to the directory holding \
         the four SWF traces",
        dir.display()
    );
    dir
}

fn load(name: &str) -> SwfTrace {
    parse_swf_file(&traces_dir().join(name)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_four_traces_parse_with_their_documented_sizes() {
    for (name, jobs, machine) in [
        ("lublin_256.swf", 10_000, 256),
        ("lublin_256_new2.swf", 10_000, 256),
        ("KTH-SP2-1996-2.1-cln.swf", 28_476, 100),
        ("LANL-CM5-1994-4.1-cln.swf", 122_060, 1024),
    ] {
        let trace = load(name);
        assert_eq!(trace.jobs.len(), jobs, "{name}: jobs");
        assert_eq!(trace.machine_size(), machine, "{name}: machine size");
    }
}

#[test]
fn header_and_fields_are_typed() {
    let kth = load("KTH-SP2-1996-2.1-cln.swf");
    assert_eq!(kth.header.max_nodes, Some(100));
    assert_eq!(kth.header.max_procs, Some(100));
    assert_eq!(kth.header.unix_start_time, Some(843_480_031));
    assert_eq!(kth.header.value("Computer"), Some("IBM SP2"));
    // "   15   599850 192180   3477    4     -1    -1    4  53940    -1  1  12  12  -1 ..."
    let first = &kth.jobs[0];
    assert_eq!(
        (first.job_number, first.submit_s, first.wait_s, first.run_s),
        (15, 599_850, 192_180, 3477)
    );
    assert_eq!((first.allocated_procs, first.requested_procs), (4, 4));
    assert_eq!(
        (first.requested_time_s, first.status, first.user),
        (53_940, 1, 12)
    );
    assert_eq!((first.avg_cpu_s, first.preceding_job), (-1.0, -1));
    assert_eq!(first.line, 25);

    // Lublin: no MaxProcs, so the machine size is MaxNodes.
    let lublin = load("lublin_256.swf");
    assert_eq!(
        (lublin.header.max_procs, lublin.header.max_nodes),
        (None, Some(256))
    );

    // LANL writes average CPU time with decimals ("28.00").
    let lanl = load("LANL-CM5-1994-4.1-cln.swf");
    let job = lanl.jobs.iter().find(|j| j.job_number == 138_008).unwrap();
    assert_eq!(
        (job.avg_cpu_s, job.used_mem_kb, job.executable),
        (28.0, 3312.0, 2097)
    );
}

#[test]
fn blank_lines_are_ignored_and_decimals_accepted() {
    let text = "; MaxProcs: 64\n\n  \n1 0.4 2.6 10 4.0 1.5 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\r\n";
    let trace = parse_swf(text).unwrap();
    assert_eq!(trace.jobs.len(), 1);
    let job = &trace.jobs[0];
    // Times round to the nearest second; counts must be whole ("4.0" is).
    assert_eq!((job.submit_s, job.wait_s, job.allocated_procs), (0, 3, 4));
    assert_eq!(job.avg_cpu_s, 1.5);
    assert_eq!(job.line, 4);
    assert_eq!(trace.machine_size(), 64);
}

#[test]
fn a_line_with_the_wrong_number_of_fields_is_reported_with_its_line() {
    let text = "; MaxNodes: 4\n1 0 -1 10 1 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n2 5 -1 10 1\n";
    let err = parse_swf(text).unwrap_err();
    assert_eq!(err.line, Some(3));
    assert_eq!(err.kind, SwfErrorKind::FieldCount { found: 5 });
    assert!(err.to_string().starts_with("line 3: "), "{err}");
    assert!(err.to_string().contains("found 5"), "{err}");
}

#[test]
fn a_non_numeric_field_is_named() {
    let text = "1 0 -1 10 four -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n";
    let err = parse_swf(text).unwrap_err();
    assert_eq!(err.line, Some(1));
    assert!(matches!(
        err.kind,
        SwfErrorKind::NotANumber { field: 5, .. }
    ));
    let message = err.to_string();
    assert!(
        message.contains("field 5 (allocated processors)") && message.contains("\"four\""),
        "{message}"
    );

    let fractional =
        parse_swf("1 0 -1 10 2.5 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n").unwrap_err();
    assert!(matches!(
        fractional.kind,
        SwfErrorKind::NotAnInteger { field: 5, .. }
    ));
    let infinite = parse_swf("1 inf -1 10 2 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n").unwrap_err();
    assert!(
        infinite.to_string().contains("field 2 (submit time)"),
        "{infinite}"
    );
    let huge = parse_swf("1 1e300 -1 10 2 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n").unwrap_err();
    assert!(matches!(
        huge.kind,
        SwfErrorKind::OutOfRange { field: 2, .. }
    ));
}

#[test]
fn a_bad_header_value_is_reported() {
    let err = parse_swf("; Version: 2\n; MaxProcs: lots\n").unwrap_err();
    assert_eq!(err.line, Some(2));
    assert!(err.to_string().contains("MaxProcs"), "{err}");
    // Free-text comments are not keyed and never fail.
    assert!(parse_swf(";   user=50 and (job>=24439 and job<=64542): removed\n").is_ok());
}

#[test]
fn file_errors_name_the_file() {
    let missing = Path::new("/nonexistent/trace.swf");
    let err = parse_swf_file(missing).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/trace.swf"), "{err}");

    let dir = std::env::temp_dir().join(format!("fairway-swf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.swf");
    std::fs::write(
        &path,
        "; MaxNodes: 4\n1 0 -1 x 1 -1 -1 -1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n",
    )
    .unwrap();
    let err = parse_swf_file(&path).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}:2: field 4 (run time)", path.display())),
        "{message}"
    );
}

#[test]
fn replaying_recorded_waits_gives_the_published_kth_numbers() {
    let metrics = recorded_metrics(&load("KTH-SP2-1996-2.1-cln.swf"));
    assert_eq!(metrics.jobs, 28_476);
    assert_eq!(format!("{:.0}", metrics.avg_wait_s), "15296");
    assert_eq!(format!("{:.1}", metrics.avg_bounded_slowdown), "193.4");
}

#[test]
fn replaying_recorded_waits_gives_the_published_lanl_numbers() {
    let metrics = recorded_metrics(&load("LANL-CM5-1994-4.1-cln.swf"));
    // Three records have an unknown wait (-1) and cannot be replayed.
    assert_eq!((metrics.jobs, metrics.skipped_unknown), (122_057, 3));
    assert_eq!(format!("{:.0}", metrics.avg_wait_s), "1846");
    assert_eq!(format!("{:.2}", metrics.avg_bounded_slowdown), "9.35");
}
