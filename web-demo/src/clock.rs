//! The playground's clock: the real clock, or a virtual one that can pause, step and run at
//! x0.1 to x100. Pure: the page feeds it real elapsed time (from `performance.now()`, through
//! gloo-timers ticks); the lock table only ever sees the integer milliseconds it returns.

/// The speeds the virtual clock offers.
pub const SPEEDS: [f64; 9] = [0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 100.0];

/// Real time, or a virtual clock under the user's control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Milliseconds of `performance.now()` since the page started.
    Real,
    /// Milliseconds the user lets pass: paused, stepped or sped up. Deterministic.
    Virtual,
}

/// The playground clock. `now()` never goes backwards, whatever the mode changes.
#[derive(Clone, Debug)]
pub struct Clock {
    mode: Mode,
    now: u64,
    paused: bool,
    speed: f64,
    /// Fraction of a virtual millisecond carried between ticks.
    carry: f64,
    /// Real instant (ms) at which the real clock reads `now` = 0.
    origin: f64,
}

impl Clock {
    /// A virtual clock at 0, paused, at x1: the deterministic default.
    #[must_use]
    pub fn new() -> Self {
        Clock {
            mode: Mode::Virtual,
            now: 0,
            paused: true,
            speed: 1.0,
            carry: 0.0,
            origin: 0.0,
        }
    }

    /// The current instant, in ms.
    #[must_use]
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The mode.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether the virtual clock is paused.
    #[must_use]
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// The virtual clock's speed.
    #[must_use]
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// A frame: `real_now` is `performance.now()`, `real_elapsed` the real ms since the last
    /// frame. Returns whether `now()` moved.
    pub fn tick(&mut self, real_now: f64, real_elapsed: f64) -> bool {
        let before = self.now;
        match self.mode {
            Mode::Real => {
                let t = (real_now - self.origin).max(0.0).floor() as u64;
                self.now = self.now.max(t);
            }
            Mode::Virtual if !self.paused => {
                let advance = real_elapsed.max(0.0) * self.speed + self.carry;
                let whole = advance.floor();
                self.carry = advance - whole;
                self.now = self.now.saturating_add(whole as u64);
            }
            Mode::Virtual => {}
        }
        self.now != before
    }

    /// Switches mode without moving `now`: the real clock continues from the virtual instant.
    pub fn set_mode(&mut self, mode: Mode, real_now: f64) {
        if mode == Mode::Real {
            self.origin = real_now - self.now as f64;
        }
        self.carry = 0.0;
        self.mode = mode;
    }

    /// Pauses or resumes the virtual clock.
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        self.carry = 0.0;
    }

    /// Sets the virtual speed (clamped to the offered range).
    pub fn set_speed(&mut self, speed: f64) {
        if speed.is_finite() {
            self.speed = speed.clamp(SPEEDS[0], SPEEDS[SPEEDS.len() - 1]);
        }
    }

    /// Moves the virtual clock forward by `ms` (a step). Ignored on the real clock.
    pub fn step(&mut self, ms: u64) {
        if self.mode == Mode::Virtual {
            self.now = self.now.saturating_add(ms);
        }
    }

    /// Moves the clock to `at` if that is later (replaying a scenario sets each step's `now`).
    pub fn advance_to(&mut self, at: u64, real_now: f64) {
        if at > self.now {
            self.now = at;
            if self.mode == Mode::Real {
                self.origin = real_now - self.now as f64;
            }
        }
    }

    /// Back to a fresh virtual clock at 0 (a new session).
    pub fn reset(&mut self) {
        *self = Clock::new();
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_virtual_clock_moves_only_by_steps() {
        let mut c = Clock::new();
        assert!(!c.tick(1000.0, 1000.0));
        c.step(250);
        assert_eq!(c.now(), 250);
    }

    #[test]
    fn speed_scales_real_time_and_carries_fractions() {
        let mut c = Clock::new();
        c.set_paused(false);
        c.set_speed(0.1);
        for _ in 0..10 {
            c.tick(0.0, 5.0); // 0.5 virtual ms each
        }
        assert_eq!(c.now(), 5);
        c.set_speed(100.0);
        c.tick(0.0, 16.0);
        assert_eq!(c.now(), 1605);
        c.set_speed(1000.0);
        assert_eq!(c.speed(), 100.0);
    }

    #[test]
    fn switching_modes_never_moves_time_backwards() {
        let mut c = Clock::new();
        c.step(5000);
        c.set_mode(Mode::Real, 100.0);
        c.tick(100.0, 0.0);
        assert_eq!(c.now(), 5000);
        c.tick(350.0, 250.0);
        assert_eq!(c.now(), 5250);
        c.set_mode(Mode::Virtual, 400.0);
        c.step(10);
        assert_eq!(c.now(), 5260);
        c.advance_to(100, 0.0);
        assert_eq!(c.now(), 5260);
    }
}
