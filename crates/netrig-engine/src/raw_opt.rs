//! getsockopt(2) and setsockopt(2) of the int options socket2 does not
//! cover, by hand: the lowest module of the engine's socket code, which
//! `sockopt` (socket settings) and `transport` (which protocol a socket
//! is) both use.

use std::io;

/// getsockopt(2) of an int option (those socket2 does not cover: TCP_INQ,
/// SO_RCVLOWAT, UDP_SEGMENT, ...).
pub fn get_int(fd: std::os::fd::RawFd, level: libc::c_int, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: out-pointers of the sizes given, for the duration of the call;
    // a stale descriptor only makes the call fail.
    let rc = unsafe { libc::getsockopt(fd, level, opt, (&mut v as *mut libc::c_int).cast(), &mut len) };
    if rc == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// setsockopt(2) of an int option (those socket2 does not cover).
pub fn set_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a c_int of the size given, for the duration of the call; a
    // stale descriptor only makes the call fail.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
