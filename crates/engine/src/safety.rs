//! Block-device safety checks (being written).
