//! Resource limits for one evaluation, and the per-evaluation budget that
//! enforces them. The budget is checked at every `evaluate` entry and inside the
//! loops of built-ins, so a runaway expression stops within a small margin of
//! the time limit instead of running to completion in the background.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// Limits applied to a single evaluation.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock budget; exceeded evaluations fail with `U1001`.
    pub timeout: Duration,
    /// Maximum nesting of evaluation (recursion) and of data values; exceeded
    /// evaluations fail with `U1001` (as the reference's stack guard does).
    pub max_depth: usize,
    /// Maximum size in bytes of any string built during evaluation and of the
    /// serialised result; exceeded evaluations fail with `U1002`.
    pub max_output_bytes: usize,
    /// Native stack the evaluation may use, measured from where it starts.
    /// Deep recursion fails with `U1001` before this is exceeded, so keep it
    /// below the stack size of the calling thread (2 MiB for Rust threads).
    pub max_stack_bytes: usize,
    /// Array elements one evaluation may create in total (about 24 bytes of
    /// memory each); exceeded evaluations fail with `U1002`. Bounds memory
    /// use of expressions such as `[1..1e7].[1..1e7]`.
    pub max_items: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(1),
            max_depth: 500,
            max_output_bytes: 16 * 1024 * 1024,
            max_stack_bytes: DEFAULT_STACK_BYTES,
            max_items: 20_000_000,
        }
    }
}

/// Hard ceiling on evaluation depth whatever the caller asks for: beyond it the
/// native stack of a default 2 MiB thread could be exhausted.
pub(crate) const HARD_MAX_DEPTH: usize = 1200;

/// Default native stack budget for an evaluation (half a default thread stack).
pub const DEFAULT_STACK_BYTES: usize = 1024 * 1024;

/// Stack budget for compiling an expression.
pub(crate) const COMPILE_STACK_BYTES: usize = 512 * 1024;

/// Measures native stack use relative to a base address taken when the
/// guarded operation starts, so recursion can stop with an error instead of
/// overflowing the thread's stack (which aborts the process).
#[derive(Clone, Copy)]
pub(crate) struct StackGuard {
    base: usize,
    budget: usize,
}

#[inline(always)]
fn stack_address() -> usize {
    let probe = 0u8;
    std::hint::black_box(&probe) as *const u8 as usize
}

impl StackGuard {
    pub(crate) fn new(budget: usize) -> StackGuard {
        StackGuard {
            base: stack_address(),
            budget,
        }
    }

    /// Stack still available under this guard's budget.
    pub(crate) fn remaining(&self) -> usize {
        self.budget
            .saturating_sub(self.base.abs_diff(stack_address()))
    }

    pub(crate) fn check(&self) -> Result<()> {
        if self.base.abs_diff(stack_address()) > self.budget {
            Err(Error::new(
                "U1001",
                "Stack overflow error: native stack budget exceeded",
            ))
        } else {
            Ok(())
        }
    }
}

/// Nesting bound for data values walked recursively (conversion, equality,
/// stringification, cloning).
pub(crate) const MAX_DATA_DEPTH: usize = 500;

/// Maximum number of elements a single array may hold.
pub(crate) const MAX_ARRAY_LEN: usize = 10_000_000;

/// The start of the message of the timeout error, which shares the `U1001` code with the depth
/// limits; [`Error::is_timeout`] tells them apart by it.
pub(crate) const TIMEOUT_MESSAGE: &str = "Expression evaluation timeout";

pub(crate) struct Budget {
    deadline: Instant,
    timeout: Duration,
    pub(crate) max_depth: usize,
    pub(crate) depth: usize,
    pub(crate) max_bytes: usize,
    ticks: u32,
    stack: StackGuard,
    items: usize,
    max_items: usize,
}

impl Budget {
    pub(crate) fn new(limits: &Limits) -> Self {
        let now = Instant::now();
        Budget {
            deadline: now
                .checked_add(limits.timeout)
                .unwrap_or(now + Duration::from_secs(86_400)),
            timeout: limits.timeout,
            max_depth: limits.max_depth.min(HARD_MAX_DEPTH),
            depth: 0,
            max_bytes: limits.max_output_bytes,
            ticks: 0,
            stack: StackGuard::new(limits.max_stack_bytes),
            items: 0,
            max_items: limits.max_items,
        }
    }

    /// Cheap progress check: reads the clock every 256 calls.
    #[inline]
    pub(crate) fn tick(&mut self) -> Result<()> {
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks & 0xff == 0 {
            self.check_time()
        } else {
            Ok(())
        }
    }

    /// Account for `n` newly created array elements (and the work to copy them).
    pub(crate) fn alloc(&mut self, n: usize) -> Result<()> {
        self.items = self.items.saturating_add(n);
        if self.items > self.max_items {
            return Err(Error::new(
                "U1002",
                format!(
                    "Evaluation created more than {} array elements",
                    self.max_items
                ),
            ));
        }
        self.tick_n(n)
    }

    /// Account for `n` units of work at once.
    pub(crate) fn tick_n(&mut self, n: usize) -> Result<()> {
        let before = self.ticks;
        self.ticks = self.ticks.wrapping_add(n.min(u32::MAX as usize) as u32);
        if n >= 256 || (before & !0xff) != (self.ticks & !0xff) {
            self.check_time()
        } else {
            Ok(())
        }
    }

    pub(crate) fn check_time(&self) -> Result<()> {
        if Instant::now() >= self.deadline {
            Err(Error::new(
                "U1001",
                format!("{TIMEOUT_MESSAGE}: {:?} exceeded", self.timeout),
            ))
        } else {
            Ok(())
        }
    }

    pub(crate) fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(Error::new(
                "U1001",
                "Stack overflow error: evaluation depth limit exceeded",
            ));
        }
        self.stack.check()?;
        self.tick()
    }

    pub(crate) fn stack_remaining(&self) -> usize {
        self.stack.remaining()
    }

    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    pub(crate) fn check_len(&self, bytes: usize) -> Result<()> {
        if bytes > self.max_bytes {
            Err(Error::new(
                "U1002",
                format!("Output size limit of {} bytes exceeded", self.max_bytes),
            ))
        } else {
            Ok(())
        }
    }
}

pub(crate) fn data_too_deep() -> Error {
    Error::new("U1001", "Stack overflow error: data nesting limit exceeded")
}
