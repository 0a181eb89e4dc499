//! Which warning codes change what a number means when configurations are compared: the
//! caveats a study's score table shows next to a configuration.

/// What a warning says about the number it qualifies, for a comparison of configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caveat {
    /// The configuration is faster because data may not reach stable storage when the
    /// application asks for it (flushes dropped or never sent): unsafe, not a clean win.
    Unsafe,
    /// The number may come from a cache or from compression rather than the device.
    Cache,
}

/// The caveat of a warning code, if it is one that changes what a number means.
pub fn caveat(code: &str) -> Option<Caveat> {
    match code {
        "NO_BARRIER" | "WRITE_THROUGH_DROPS_FLUSH" | "ZFS_SYNC_DISABLED" | "FLUSH_NO_EFFECT" => {
            Some(Caveat::Unsafe)
        }
        "PAGE_CACHE"
        | "PAGE_CACHE_POSSIBLE"
        | "DIRECT_IO_IGNORED"
        | "LOOP_WITHOUT_DIO"
        | "COMPRESSIBLE_DATA"
        | "SPARSE_READ" => Some(Caveat::Cache),
        _ => None,
    }
}
