//! Process limits a proxy needs: every connection is a file descriptor, and the usual soft
//! limit of 1024 would cap hoist at about a thousand clients. Raise the soft limit to the hard
//! limit at start, as nginx (worker_rlimit_nofile) and Go programs do.

use rustix::process::{getrlimit, setrlimit, Resource};

pub fn raise_fd_limit() {
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return;
    }
    let raised = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::debug!("file descriptor limit raised to {:?}", limit.maximum),
        Err(e) => tracing::warn!("cannot raise the file descriptor limit: {e}"),
    }
}
