//! Parse throughput over the real corpus (2,014 mails, 25 MB), split into what bounds it:
//! reading the mbox (gunzip + split), decoding mail (MIME, charsets), and the report parser.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lkplake_parse::decode::decode;
use lkplake_parse::parser::parse_document;
use lkplake_parse::source::InputFile;
use lkplake_parse::{Parsed, parse_message};
use lkplake_schemas::Source;
use std::hint::black_box;
use std::path::PathBuf;

fn corpus_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cgroups-lkp-cc.mbox.gz")
}

fn bench(c: &mut Criterion) {
    let file = InputFile::read(&corpus_path()).unwrap_or_else(|e| panic!("{e}"));
    let messages: Vec<Vec<u8>> = file.messages().map(|m| m.bytes.into_owned()).collect();
    let bytes: u64 = messages.iter().map(|m| m.len() as u64).sum();
    let source = Source::file("corpus", 0);
    let reports: u64 = messages
        .iter()
        .map(|m| match parse_message(m, &source) {
            Ok(Parsed::Reports(r)) => r.len() as u64,
            _ => 0,
        })
        .sum();
    eprintln!(
        "corpus: {} messages, {bytes} bytes, {reports} reports",
        messages.len()
    );
    let docs: Vec<_> = messages.iter().map(|m| decode(m)).collect();

    let mut group = c.benchmark_group("corpus");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("read_gunzip_split", |b| {
        b.iter(|| {
            let file = InputFile::read(&corpus_path()).unwrap_or_else(|e| panic!("{e}"));
            black_box(file.messages().map(|m| m.bytes.len()).sum::<usize>())
        })
    });
    group.bench_function("decode_only", |b| {
        b.iter(|| black_box(messages.iter().map(|m| decode(m).body.len()).sum::<usize>()))
    });
    group.bench_function("parse_decoded", |b| {
        b.iter(|| {
            black_box(
                docs.iter()
                    .filter(|d| parse_document(d, &source).is_ok())
                    .count(),
            )
        })
    });
    group.bench_function("decode_and_parse", |b| {
        b.iter(|| {
            black_box(
                messages
                    .iter()
                    .filter(|m| parse_message(m, &source).is_ok())
                    .count(),
            )
        })
    });
    group.finish();

    // Reports per second on report-bearing mails alone: the work the pipeline does per report.
    let report_mails: Vec<&Vec<u8>> = messages
        .iter()
        .filter(|m| matches!(parse_message(m, &source), Ok(Parsed::Reports(_))))
        .collect();
    let mut group = c.benchmark_group("report_mails");
    group.sample_size(10);
    group.throughput(Throughput::Elements(reports));
    group.bench_function("decode_and_parse", |b| {
        b.iter(|| {
            black_box(
                report_mails
                    .iter()
                    .filter(|m| parse_message(m, &source).is_ok())
                    .count(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
