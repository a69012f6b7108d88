//! Load errors: every one names the file and line of the directive that caused it, so an
//! operator can go straight to the offending rule.

use std::fmt;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl Error {
    pub fn new(file: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Self {
        Error {
            file: file.into(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

impl std::error::Error for Error {}
