//! A skip is counted and printed, and under IOLAB_REQUIRE_DEVICE_TESTS=1 it is a failure
//! naming the reason; an allowed skip never fails. One test, since it sets the variable for
//! the whole process.

use iolab_testkit::{skip_allowed, skips, REQUIRE_VAR};

fn needs_a_unicorn() -> Option<u32> {
    iolab_testkit::skip!(=> None, "no unicorn on this machine");
}

#[test]
fn skips_count_and_fail_when_device_tests_are_required() {
    std::env::remove_var(REQUIRE_VAR);
    assert_eq!(skips(), 0);
    assert_eq!(needs_a_unicorn(), None);
    skip_allowed("an optional package is missing");
    assert_eq!(skips(), 2);

    std::env::set_var(REQUIRE_VAR, "1");
    let err = std::panic::catch_unwind(needs_a_unicorn).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("no unicorn on this machine") && msg.contains(REQUIRE_VAR),
        "{msg}"
    );
    assert_eq!(skips(), 2, "a failed skip is not counted as a skip");
    skip_allowed("still allowed");
    assert_eq!(skips(), 3);
    std::env::remove_var(REQUIRE_VAR);
}
