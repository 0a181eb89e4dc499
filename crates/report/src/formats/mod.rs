//! The output formats, one file each.

pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
