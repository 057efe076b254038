//! Turns Nagle's algorithm off on the database connections (`TCP_NODELAY`).
//!
//! sqlx 0.9.0 no longer sets `TCP_NODELAY` on the sockets it opens (upstream issue 4335, fixed
//! after that release and not yet published). Over TLS, rustls hands a request to the kernel in more
//! than one write, and with Nagle's algorithm on, the last small segment waits until the server
//! acknowledges the first one; the server's delayed acknowledgement holds it for up to 40 ms. Each
//! claim then stalled a round trip by 40 ms while both cores sat idle: a 200,000-row drain over TLS
//! fell from about 20,000 to 8,000 rows a second at `outbox.batchSize` 200 (`bench/RESULTS.md`).
//!
//! sqlx gives no access to its socket, so after each new connection this module looks through the
//! process's own descriptors (`/proc/self/fd`), takes a duplicate of each TCP socket connected to
//! the database's port through a pidfd (`pidfd_getfd`, Linux 5.6 and later; no unsafe code), and
//! sets the option on it: a duplicate shares the socket, so the option reaches sqlx's descriptor. A
//! socket that already has the option is left alone. Remove this module once a sqlx release sets
//! the option itself.

use std::io;

/// What one pass over the process's sockets did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NodelayPass {
    /// Connected TCP sockets to the database's port that were found.
    pub found: usize,
    /// Of those, the ones whose option this pass turned on.
    pub changed: usize,
}

/// Sets `TCP_NODELAY` on every TCP socket of this process connected to a peer on `port`.
///
/// # Errors
/// When the process's descriptors cannot be listed or a pidfd of this process cannot be opened
/// (an older kernel, or a seccomp profile that refuses `pidfd_open`/`pidfd_getfd`). A descriptor
/// that closes or is reused while the pass runs is skipped.
pub fn set_on_sockets_to_port(port: u16) -> io::Result<NodelayPass> {
    let mut pass = NodelayPass::default();
    for_each_socket_to_port(port, |on, set| {
        pass.found += 1;
        if !on && set(true) {
            pass.changed += 1;
        }
    })?;
    Ok(pass)
}

/// Whether `TCP_NODELAY` is on, for each TCP socket of this process connected to a peer on `port`
/// (in descriptor order): what the tests check, and a way to look at a running process.
///
/// # Errors
/// As [`set_on_sockets_to_port`].
pub fn state_of_sockets_to_port(port: u16) -> io::Result<Vec<bool>> {
    let mut states = Vec::new();
    for_each_socket_to_port(port, |on, _| states.push(on))?;
    Ok(states)
}

/// Calls `visit` with each TCP socket of this process whose peer is on `port`: whether its
/// `TCP_NODELAY` is on, and a setter that reports whether setting it worked.
#[cfg(target_os = "linux")]
fn for_each_socket_to_port(
    port: u16,
    mut visit: impl FnMut(bool, &dyn Fn(bool) -> bool),
) -> io::Result<()> {
    use rustix::net::{SocketType, getpeername, sockopt};
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};

    let pidfd = pidfd_open(getpid(), PidfdFlags::empty())?;
    let mut fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(Result::ok)
        .filter(|entry| {
            // A socket's link reads `socket:[inode]`.
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .filter_map(|entry| entry.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    fds.sort_unstable();
    for fd in fds {
        let socket = match pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()) {
            Ok(socket) => socket,
            // Closed since it was listed.
            Err(rustix::io::Errno::BADF) => continue,
            Err(error) => return Err(error.into()),
        };
        let peer_port = match getpeername(&socket) {
            Ok(Some(address)) => std::net::SocketAddr::try_from(address)
                .ok()
                .map(|address| address.port()),
            _ => None,
        };
        if peer_port != Some(port) || sockopt::socket_type(&socket) != Ok(SocketType::STREAM) {
            continue;
        }
        let Ok(on) = sockopt::tcp_nodelay(&socket) else {
            continue;
        };
        visit(on, &|value| {
            sockopt::set_tcp_nodelay(&socket, value).is_ok()
        });
    }
    Ok(())
}

/// Elsewhere the option stays as sqlx leaves it, and no socket is visited.
#[cfg(not(target_os = "linux"))]
fn for_each_socket_to_port(
    _port: u16,
    _visit: impl FnMut(bool, &dyn Fn(bool) -> bool),
) -> io::Result<()> {
    Ok(())
}
