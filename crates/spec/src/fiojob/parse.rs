//! The text of a job file: `[section]` headers, `key=value` and bare `key` lines, `;` and
//! `#` comments (a whole line, or the rest of a line as fio strips them), `${VAR}` replaced
//! from the environment, and `include FILE` (relative to the including file's directory,
//! loops and depth refused). Nothing here knows what an option means.

use std::path::{Path, PathBuf};

use iolab_sys::input::{read_input, InputError};

use super::FioError;

/// Most bytes of a job file and all its includes together (each file read counts, an
/// included file as often as it is included).
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Deepest `include` nesting.
pub const MAX_INCLUDE_DEPTH: usize = 16;
/// Most job sections in one job file.
pub const MAX_JOBS: usize = 256;
/// Longest line after `${VAR}` substitution.
pub const MAX_LINE: usize = 64 << 10;

/// One `key[=value]` line, where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOption {
    pub key: String,
    pub value: Option<String>,
    pub file: String,
    pub line: usize,
}

/// A `[name]` section and its options in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub options: Vec<RawOption>,
}

impl Section {
    pub fn is_global(&self) -> bool {
        self.name == "global"
    }
}

/// A parsed job file: its sections in order, and the text of every file read (the job file
/// first, then each include as met), which is kept with the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFile {
    pub sections: Vec<Section>,
    pub sources: Vec<(String, String)>,
    /// The first `${VAR}` that is not set (read as empty so that the rest of the file is
    /// still read): the mapping refuses the file with it, after an engine iolab cannot run,
    /// which is the more telling reason.
    pub unset: Option<FioError>,
}

/// Reads an included file, at most the given number of bytes (more is an error).
pub type ReadInclude<'a> = dyn Fn(&Path, u64) -> Result<Vec<u8>, InputError> + 'a;

/// Where `include` and `${VAR}` look: the real filesystem and environment, or a test's.
pub struct Sources<'a> {
    /// Reads an included file.
    pub read: &'a ReadInclude<'a>,
    /// Looks up an environment variable.
    pub var: &'a dyn Fn(&str) -> Option<String>,
}

/// Reads and parses the job file at `path` (includes from disk, variables from the
/// environment).
pub fn parse_file(path: &Path) -> Result<JobFile, FioError> {
    let name = path.display().to_string();
    let bytes = read_input(path, MAX_FILE_BYTES as u64)
        .map_err(|e| FioError::new(&name, 0, "JOBFILE", e.to_string()))?;
    let read = |p: &Path, limit: u64| read_input(p, limit);
    let var = |v: &str| std::env::var(v).ok();
    parse(
        &name,
        &bytes,
        &Sources {
            read: &read,
            var: &var,
        },
    )
}

/// Parses job-file bytes named `name` (paths of includes are relative to its directory).
pub fn parse(name: &str, bytes: &[u8], src: &Sources) -> Result<JobFile, FioError> {
    let mut out = JobFile {
        sections: Vec::new(),
        sources: Vec::new(),
        unset: None,
    };
    let mut stack = vec![canonical(Path::new(name))];
    // Any other error after an unset variable may come from its empty value: the variable
    // is named then.
    if let Err(e) = read_into(name, bytes, src, &mut out, &mut stack) {
        return Err(out.unset.unwrap_or(e));
    }
    if let Some(e) = &out.unset {
        if out.sections.iter().all(|s| s.is_global()) {
            return Err(e.clone());
        }
    }
    if out.sections.iter().all(|s| s.is_global()) {
        let line = out.sections.last().map_or(1, |s| s.line);
        return Err(FioError::new(
            name,
            line,
            "[section]",
            "the job file has no job section (only [global] or nothing): nothing to run",
        ));
    }
    Ok(out)
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn read_into(
    name: &str,
    bytes: &[u8],
    src: &Sources,
    out: &mut JobFile,
    stack: &mut Vec<PathBuf>,
) -> Result<(), FioError> {
    let read_so_far: usize = out.sources.iter().map(|(_, t)| t.len()).sum();
    if read_so_far + bytes.len() > MAX_FILE_BYTES {
        return Err(FioError::new(
            name,
            0,
            "JOBFILE",
            format!(
                "{} bytes: more than the {MAX_FILE_BYTES} bytes a job file and its includes \
                 may have together",
                read_so_far + bytes.len()
            ),
        ));
    }
    let mut text = String::with_capacity(bytes.len());
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = std::str::from_utf8(raw)
            .map_err(|_| FioError::new(name, i + 1, "JOBFILE", "not text (invalid UTF-8)"))?;
        if line.contains('\0') {
            return Err(FioError::new(
                name,
                i + 1,
                "JOBFILE",
                "not text (a NUL byte)",
            ));
        }
        if i > 0 {
            text.push('\n');
        }
        text.push_str(line);
    }
    out.sources.push((name.to_string(), text.clone()));
    let dir = Path::new(name)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    for (i, raw) in text.split('\n').enumerate() {
        let n = i + 1;
        // fio cuts a line at its first ';' or '#'.
        let cut = raw.find([';', '#']).unwrap_or(raw.len());
        let line = substitute(name, n, &raw[..cut], src, &mut out.unset)?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(sec) = rest.strip_suffix(']') else {
                return Err(FioError::new(
                    name,
                    n,
                    "[section]",
                    "not a section header: a header is [name], closed on its line",
                ));
            };
            let sec = sec.trim();
            if sec.is_empty() || sec.chars().any(|c| c.is_control() || c == '[' || c == ']') {
                return Err(FioError::new(
                    name,
                    n,
                    "[section]",
                    "not a section name (no control characters or brackets)",
                ));
            }
            if sec != "global" {
                if let Some(prev) = out.sections.iter().find(|s| s.name == sec) {
                    return Err(FioError::new(
                        name,
                        n,
                        "[section]",
                        format!(
                            "[{sec}] is already a job at {}:{}; fio would merge or rename them, \
                             iolab names each job once",
                            prev.file, prev.line
                        ),
                    ));
                }
                let jobs = out.sections.iter().filter(|s| !s.is_global()).count();
                if jobs >= MAX_JOBS {
                    return Err(FioError::new(
                        name,
                        n,
                        "[section]",
                        format!("more than {MAX_JOBS} jobs in one job file"),
                    ));
                }
            }
            out.sections.push(Section {
                name: sec.to_string(),
                file: name.to_string(),
                line: n,
                options: Vec::new(),
            });
            continue;
        }
        if let Some(path) = include_path(line) {
            include(name, n, &dir, path, src, out, stack)?;
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (line, None),
        };
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            // Not the format: the line is not shown (an include of a file that is not a job
            // file must not print it).
            return Err(FioError::new(
                name,
                n,
                "JOBFILE",
                "not an option: expected key=value, key, [section] or include FILE (a key is \
                 letters, digits, _ and -)",
            ));
        }
        let Some(section) = out.sections.last_mut() else {
            return Err(FioError::new(
                name,
                n,
                key,
                "an option before the first [section]",
            ));
        };
        section.options.push(RawOption {
            key: key.to_ascii_lowercase(),
            value,
            file: name.to_string(),
            line: n,
        });
    }
    Ok(())
}

/// `include FILE` (fio takes the word and a blank, then the path).
fn include_path(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("include")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some(rest.trim())
}

fn include(
    name: &str,
    n: usize,
    dir: &Path,
    path: &str,
    src: &Sources,
    out: &mut JobFile,
    stack: &mut Vec<PathBuf>,
) -> Result<(), FioError> {
    if path.is_empty() {
        return Err(FioError::new(name, n, "include", "include names no file"));
    }
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    };
    let canon = canonical(&full);
    if stack.contains(&canon) {
        return Err(FioError::new(
            name,
            n,
            "include",
            format!("{} includes itself (an include loop)", full.display()),
        ));
    }
    if stack.len() >= MAX_INCLUDE_DEPTH {
        return Err(FioError::new(
            name,
            n,
            "include",
            format!("includes nested deeper than {MAX_INCLUDE_DEPTH}"),
        ));
    }
    let read_so_far: usize = out.sources.iter().map(|(_, t)| t.len()).sum();
    let left = MAX_FILE_BYTES.saturating_sub(read_so_far) as u64;
    let bytes = (src.read)(&full, left).map_err(|e| {
        let why = match e {
            InputError::TooLarge { .. } => format!(
                "{e}: a job file and its includes may have {MAX_FILE_BYTES} bytes together, \
                 {read_so_far} of them read before this include"
            ),
            e => e.to_string(),
        };
        FioError::new(name, n, "include", format!("{}: {why}", full.display()))
    })?;
    stack.push(canon);
    let shown = full.display().to_string();
    let r = read_into(&shown, &bytes, src, out, stack);
    stack.pop();
    r
}

/// Replaces every `${VAR}` from the environment; an unterminated one is an error, an unset
/// one is read as empty and kept in `unset` (the first).
fn substitute(
    name: &str,
    n: usize,
    line: &str,
    src: &Sources,
    unset: &mut Option<FioError>,
) -> Result<String, FioError> {
    if !line.contains("${") {
        return Ok(line.to_string());
    }
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(FioError::new(name, n, "${VAR}", "${ without a closing }"));
        };
        let var = &after[..end];
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(FioError::new(
                name,
                n,
                "${VAR}",
                "not a variable name (letters, digits and _)",
            ));
        }
        let value = (src.var)(var).unwrap_or_else(|| {
            unset.get_or_insert_with(|| {
                FioError::new(
                    name,
                    n,
                    format!("${{{var}}}"),
                    format!("the environment variable {var} is not set"),
                )
            });
            String::new()
        });
        out.push_str(&value);
        if out.len() > MAX_LINE {
            return Err(FioError::new(
                name,
                n,
                format!("${{{var}}}"),
                format!("the line is longer than {MAX_LINE} bytes once substituted"),
            ));
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(text: &str, files: &[(&str, &str)], vars: &[(&str, &str)]) -> Result<JobFile, FioError> {
        let files: HashMap<PathBuf, Vec<u8>> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.as_bytes().to_vec()))
            .collect();
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let read = |p: &Path, _: u64| {
            files
                .get(p)
                .cloned()
                .ok_or_else(|| InputError::Io(std::io::Error::from(std::io::ErrorKind::NotFound)))
        };
        let var = |v: &str| vars.get(v).cloned();
        parse(
            "/j/a.fio",
            text.as_bytes(),
            &Sources {
                read: &read,
                var: &var,
            },
        )
    }

    #[test]
    fn sections_comments_and_values() {
        let f = run(
            "; top\n[global]\nbs = 4k ; inline\ndirect\n# c\n[job one]\nrw=read\n",
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(f.sections.len(), 2);
        assert_eq!(f.sections[0].options[0].key, "bs");
        assert_eq!(f.sections[0].options[0].value.as_deref(), Some("4k"));
        assert_eq!(f.sections[0].options[1].value, None);
        assert_eq!(f.sections[1].name, "job one");
        assert_eq!(f.sections[1].options[0].line, 7);
    }

    #[test]
    fn variables_and_includes() {
        let f = run(
            "[j]\nsize=${SZ}\ninclude more.fio\n",
            &[("/j/more.fio", "bs=${BS}\n[k]\nrw=write\n")],
            &[("SZ", "1g"), ("BS", "8k")],
        )
        .unwrap();
        assert_eq!(f.sections[0].options[0].value.as_deref(), Some("1g"));
        assert_eq!(f.sections[0].options[1].value.as_deref(), Some("8k"));
        assert_eq!(f.sections[0].options[1].file, "/j/more.fio");
        assert_eq!(f.sources.len(), 2);
        // An unset variable reads as empty and is kept for the mapping to refuse the file
        // with (after an engine iolab cannot run, the more telling reason).
        let e = run("[j]\nsize=${NOPE}\n", &[], &[]).unwrap().unset.unwrap();
        assert_eq!(
            e.to_string(),
            "/j/a.fio:2: ${NOPE}: the environment variable NOPE is not set"
        );
    }

    #[test]
    fn refusals_name_file_and_line() {
        let e = run(
            "[j]\ninclude a.fio\n",
            &[("/j/a.fio", "[k]\ninclude a.fio\n")],
            &[],
        )
        .unwrap_err();
        assert_eq!((e.line, e.option.as_str()), (2, "include"));
        assert!(e.message.contains("loop"), "{e}");
        let e = run("bs=4k\n", &[], &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/j/a.fio:1: bs: an option before the first [section]"
        );
        assert_eq!(run("", &[], &[]).unwrap_err().option, "[section]");
        assert_eq!(run("[global]\nbs=4k\n", &[], &[]).unwrap_err().line, 1);
        assert_eq!(run("[j\n", &[], &[]).unwrap_err().option, "[section]");
        assert_eq!(run("[j]\n[j]\n", &[], &[]).unwrap_err().line, 2);
        let e = parse(
            "x.fio",
            b"[j]\n\xff\xfe\n",
            &Sources {
                read: &|_, _| Err(InputError::Io(std::io::ErrorKind::NotFound.into())),
                var: &|_| None,
            },
        )
        .unwrap_err();
        assert_eq!((e.line, e.option.as_str()), (2, "JOBFILE"));
    }
}
