//! Small operating-system queries for INFO: uname, RSS, CPU times.

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
