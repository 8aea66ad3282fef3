//! The dump parser on made-up and malformed dumps.

use super::*;

#[test]
fn cumulative_counts_are_read_when_jemalloc_keeps_them() {
    let text = "heap_v2/524288\n  t*: 1: 65536 [9: 600000]\n@ 0x10\n  t*: 1: 65536 [9: 600000]\n\nMAPPED_LIBRARIES:\n";
    let profile = HeapProfile::parse(text).unwrap();
    assert_eq!(profile.total_allocated, Counts { objects: 9, bytes: 600000 });
    assert_eq!(profile.stacks[0].allocated, Counts { objects: 9, bytes: 600000 });
    let bad = HeapProfile::parse("heap_v2/524288\n  t*: 1: 65536 [9 600000]\n").unwrap_err();
    assert_eq!(bad, ParseError { line: 2, message: "expected `[<objects>: <bytes>]`, found \"9 600000\"".to_owned() });
}

const DUMP: &str = "heap_v2/524288
  t*: 49: 2737497 [0: 0]
  t4: 0: 0 [0: 0]
  t5: 49: 2737497 [0: 0] worker-1
@ 0x558829eb5b12 0x558829eb5bf0
  t*: 48: 2671886 [0: 0]
  t5: 48: 2671886 [0: 0]
@ 0x558829eb5b12
  t*: 1: 65611 [0: 0]

MAPPED_LIBRARIES:
5588297cb000-558829898000 r--p 00000000 fe:00 5309295                    /work/my service
558829898000-558829ffb000 r-xp 000cc000 fe:00 5309295                    /work/my service
55882a016000-55882a235000 rw-p 00000000 00:00 0 
";

#[test]
fn a_real_dump_parses() {
    let profile = HeapProfile::parse(DUMP).unwrap();
    assert_eq!(profile.sample_period, 524288);
    assert_eq!(profile.total, Counts { objects: 49, bytes: 2737497 });
    assert_eq!(
        profile.stacks,
        [
            Stack {
                addresses: vec![0x558829eb5b12, 0x558829eb5bf0],
                objects: 48,
                bytes: 2671886,
                allocated: Counts::default()
            },
            Stack { addresses: vec![0x558829eb5b12], objects: 1, bytes: 65611, allocated: Counts::default() },
        ]
    );
    assert_eq!(profile.mappings.len(), 3);
    assert_eq!(
        profile.mappings[1],
        Mapping {
            start: 0x558829898000,
            end: 0x558829ffb000,
            file_offset: 0xcc000,
            executable: true,
            path: Some("/work/my service".to_owned())
        }
    );
    assert_eq!(profile.mappings[2].path, None);
}

#[test]
fn malformed_dumps_name_the_line() {
    let cases = [
        ("", 1, "the profile is empty"),
        ("heap_v1/524288\n", 1, "expected a `heap_v2/<sample period>` header, found \"heap_v1/524288\""),
        ("heap_v2/lots\n", 1, "invalid sample period \"lots\""),
        ("heap_v2/8\n@ 0x1\n\nMAPPED_LIBRARIES:\n", 2, "this stack has no `t*:` line of counts"),
        ("heap_v2/8\n@ 0x1\n@ 0x2\n  t*: 1: 8 [0: 0]\n", 2, "this stack has no `t*:` line of counts"),
        ("heap_v2/8\n@ 1234\n", 2, "expected a 0x-prefixed address, found \"1234\""),
        ("heap_v2/8\n@ 0xzz\n", 2, "invalid address \"zz\""),
        ("heap_v2/8\n@\n", 2, "a stack line with no addresses"),
        ("heap_v2/8\n@ 0x1\n  t*: 1 8\n", 3, "expected `<objects>: <bytes> [..]`, found \" 1 8\""),
        ("heap_v2/8\n@ 0x1\n  t*: -1: 8\n", 3, "invalid object count \" -1\""),
        ("heap_v2/8\n@ 0x1\n  t*: 1: 8\n  t*: 1: 8\n", 4, "a second `t*:` line for the same stack"),
        ("heap_v2/8\n  t3: 1: x\n", 2, "invalid byte count \"x\""),
        ("heap_v2/8\ngarbage\n", 2, "unexpected line \"garbage\""),
        ("heap_v2/8\n  t*: 0: 0 [0: 0]\n", 2, "the profile ends before `MAPPED_LIBRARIES:`; it is truncated"),
        (
            "heap_v2/8\nMAPPED_LIBRARIES:\n00-10 r-xp\n",
            3,
            "expected `start-end perms offset dev inode [path]`, found \"00-10 r-xp\"",
        ),
    ];
    for (text, line, message) in cases {
        let parsed = HeapProfile::parse(text);
        assert_eq!(parsed, Err(ParseError { line, message: message.to_owned() }), "{text:?}");
    }
}

#[test]
fn unbiasing_matches_jeprof() {
    // jeprof: ratio = (bytes/objects)/period; scale = 1/(1-exp(-ratio)).
    let stack = Stack { addresses: vec![1], objects: 48, bytes: 2671886, allocated: Counts::default() };
    let (objects, bytes) = stack.unbiased(524288);
    let scale = 1.0 / (1.0 - (-(2671886.0 / 48.0) / 524288.0f64).exp());
    assert!((objects - 48.0 * scale).abs() < 1e-6 && (bytes - 2671886.0 * scale).abs() < 1e-3);
    let empty = Stack { addresses: vec![1], objects: 0, bytes: 0, allocated: Counts::default() };
    assert_eq!(empty.unbiased(524288), (0.0, 0.0));
}
