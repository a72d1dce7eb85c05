//! Property tests: whatever bytes arrive, the parser answers without panicking.

use crate::fixtures::{parse_bytes, read, seed_path};
use proptest::prelude::*;

fn seeds() -> Vec<Vec<u8>> {
    [
        "000_304c359333adb001.txt",
        "001_f80904916b16d277.txt",
        "002_5fa9b7d75deb5046.txt",
        "003_9c167c0450c9a958.txt",
        "004_185fc374d8b9a81a.txt",
    ]
    .iter()
    .map(|n| read(&seed_path(n)))
    .collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Truncate(usize),
    Insert(usize, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 0usize..400).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), 0usize..400).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            prop::sample::select(vec![
                b" %stddev %change %stddev ".to_vec(),
                b"\n> ".to_vec(),
                b" \xb1 ".to_vec(),
                b" ---------------- ".to_vec(),
                b" commit: ".to_vec(),
                b"a/b/testcase/tbox_group: ".to_vec(),
                b" +1e+999% ".to_vec(),
                b" fail:runs ".to_vec(),
                b"| testcase: change | x: y.z 5% regression |".to_vec(),
                b"<pre>&#x110000;&".to_vec(),
            ])
        )
            .prop_map(|(i, s)| Mutation::Insert(i, s)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match m {
        Mutation::Flip(i, b) => bytes[i % len] = *b,
        Mutation::Delete(i, n) => {
            let start = i % len;
            bytes.drain(start..(start + n).min(len));
        }
        Mutation::Duplicate(i, n) => {
            let start = i % len;
            let piece = bytes[start..(start + n).min(len)].to_vec();
            bytes.splice(start..start, piece);
        }
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Insert(i, s) => {
            let at = i % len;
            bytes.splice(at..at, s.iter().copied());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = parse_bytes(&bytes);
    }

    #[test]
    fn mutated_reports_never_panic(which in 0usize..5, mutations in prop::collection::vec(mutation(), 1..12)) {
        let mut bytes = seeds().swap_remove(which);
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let _ = parse_bytes(&bytes);
    }

    #[test]
    fn any_token_soup_of_report_words_never_panics(words in prop::collection::vec(prop::sample::select(vec![
        "%stddev", "%change", "±", "?", "19%", "+3.5%", "-0.1", "1.2e+05", "0.00", "commit:", "(\"x\")",
        "----------------", "c439d5e8a0", "a/tbox_group/testcase:", "x/y/z", "\\", "|", "fail:runs",
        ":6", "2:6", "%reproduction", "metric.name", ">", "\n", "testcase:", "test machine:", "with", "8G", "memory",
        "noticed", "a", "5%", "regression", "of", "Details are as below",
    ]), 0..300)) {
        let _ = parse_bytes(words.join(" ").as_bytes());
    }
}
