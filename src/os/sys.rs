//! Small operating-system calls: queries for INFO (uname, RSS, CPU
//! times), the heap trim, and the vectored positional write of the spill
//! thread.

/// `<sysname> <release> <machine>`.
pub fn os_string() -> String {
    // SAFETY: uname fills a caller-owned struct; strings are NUL terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".to_string();
        }
        let s = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine))
    }
}

/// Resident set size in bytes (0 if unknown).
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// (system, user) CPU seconds used by this process.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage fills a caller-owned struct.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return (0.0, 0.0);
        }
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        (t(ru.ru_stime), t(ru.ru_utime))
    }
}

/// Hand the allocator's free pages back to the kernel now (mimalloc's
/// `mi_collect`, which purges the pages its heaps no longer use): bodies
/// freed all over the heap otherwise stay resident until its purge delay.
pub fn release_free_heap() {
    // SAFETY: mi_collect only walks mimalloc's own heaps and free lists.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// Write `bufs` back to back at `off` of `file` (`pwritev`, looping over
/// short writes), as `FileExt::write_all_at` does for one buffer.
pub fn write_all_vectored_at(
    file: &std::fs::File,
    bufs: &[&[u8]],
    mut off: u64,
) -> std::io::Result<()> {
    use std::io::{Error, ErrorKind, IoSlice};
    use std::os::fd::AsRawFd;
    let mut slices: Vec<IoSlice<'_>> = bufs.iter().map(|b| IoSlice::new(b)).collect();
    let mut rest = &mut slices[..];
    IoSlice::advance_slices(&mut rest, 0);
    while !rest.is_empty() {
        // At most IOV_MAX (1024 on Linux) buffers a call.
        let n = rest.len().min(1024) as libc::c_int;
        let at = libc::off_t::try_from(off).map_err(|_| Error::from(ErrorKind::InvalidInput))?;
        // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix
        // (std guarantees it); the `n` slices are live borrows for the
        // duration of the call, and the kernel only reads them.
        let r = unsafe { libc::pwritev(file.as_raw_fd(), rest.as_ptr().cast(), n, at) };
        if r < 0 {
            let e = Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Err(ErrorKind::WriteZero.into());
        }
        off += r as u64;
        IoSlice::advance_slices(&mut rest, r as usize);
    }
    Ok(())
}
