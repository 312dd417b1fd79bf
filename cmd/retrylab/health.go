package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The lab's figures are times and rates on a real machine: on a small shared
// one, a scheduler stall of 50ms shifts every bucket of a 100ms chart, and a
// server whose 20ms of work takes 30ms has a third less capacity than the
// scenario says. The lab measures both, and says when they were off by too
// much for the figures to mean anything, rather than printing them as if
// they did.

// Thresholds of the machine check, in model time and shares of nominal.
const (
	lagTick       = 5 * time.Millisecond   // the probe's sleep
	maxLagP99     = 25 * time.Millisecond  // a tenth of the metastable clients' attempt timeout, a quarter of a chart bucket
	maxLag        = 100 * time.Millisecond // one chart bucket: a stall that long fails requests by itself
	minCapacity   = 0.9                    // achieved over nominal server capacity
	lagProbeLimit = 1 << 16                // samples kept: 5 minutes of 5ms ticks
	rerunWindow   = 2 * time.Minute        // no row is run again after the lab has run this long
)

// lagProbe measures scheduler lag while a run goes on: a goroutine sleeps
// lagTick again and again, and records how late it wakes up.
type lagProbe struct {
	stop chan struct{}
	done chan struct{}
	lags []time.Duration // real time
}

// startLagProbe starts a probe sleeping tick (real time) at a time.
func startLagProbe(tick time.Duration) *lagProbe {
	p := &lagProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTimer(tick)
		defer t.Stop()
		for {
			t0 := time.Now()
			t.Reset(tick)
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			if len(p.lags) < lagProbeLimit {
				p.lags = append(p.lags, max(time.Since(t0)-tick, 0))
			}
		}
	}()
	return p
}

// finish stops the probe and returns the lags it saw, sorted.
func (p *lagProbe) finish() []time.Duration {
	close(p.stop)
	<-p.done
	slices.Sort(p.lags)
	return p.lags
}

// rerunBudget bounds the rows of a scenario run again by untilCalm: at most
// left more, and none once the lab has run until until (zero: no limit).
type rerunBudget struct {
	left  int
	until time.Time
}

// untilCalm runs a row, and runs it once more if check says the machine was
// too loaded for it and b allows (it is spent). It returns the last run and
// how many runs it took. A load spike from elsewhere on a shared machine
// then costs a second run, not the row's figures; a machine loaded all along
// is still reported, at a bounded cost in time.
func untilCalm[R any](ctx context.Context, b *rerunBudget, run func() (R, error), check func(R) machineCheck) (R, int, error) {
	r, err := run()
	if err != nil || ctx.Err() != nil || check(r).ok() || b.left <= 0 || (!b.until.IsZero() && time.Now().After(b.until)) {
		return r, 1, err
	}
	b.left--
	r, err = run()
	return r, 2, err
}

// reruns returns the rerun budget of a scenario of rows rows: half of them,
// so that a loaded machine costs at most half a scenario's time more, and
// none once the whole lab has run for rerunWindow (model time), so that it
// ends in bounded time.
func (c config) reruns(rows int) rerunBudget {
	if !c.rerun {
		return rerunBudget{}
	}
	b := rerunBudget{left: rows / 2}
	if !c.began.IsZero() {
		b.until = c.began.Add(c.scale(rerunWindow))
	}
	return b
}

// machineCheck is how faithfully the machine ran one policy's run: the
// scheduler lag seen by the probe, and, where the scenario measures it, the
// capacity its server achieved while saturated. Times are model times.
type machineCheck struct {
	lagP99, lagMax time.Duration
	capacity       float64 // achieved/nominal; NaN if not measured
	runs           int     // of the row, by untilCalm: 2 if it was run again
}

// newMachineCheck summarizes a probe's sorted lags (real time) in model time.
func newMachineCheck(cfg config, lags []time.Duration) machineCheck {
	m := machineCheck{capacity: math.NaN()}
	if len(lags) > 0 {
		m.lagP99, m.lagMax = cfg.model(percentile(lags, 0.99)), cfg.model(lags[len(lags)-1])
	}
	return m
}

// ok reports whether the run's figures can be trusted.
func (m machineCheck) ok() bool {
	return m.lagP99 <= maxLagP99 && m.lagMax <= maxLag && (math.IsNaN(m.capacity) || m.capacity >= minCapacity)
}

// cell is the check as a short table cell, "ok" or "TOO LOADED", that
// does not wrap a row: the section's notes give the lags.
func (m machineCheck) cell() string {
	s := "ok"
	if !m.ok() {
		s = "TOO LOADED"
	}
	if m.runs > 1 {
		s += " (run again)"
	}
	return s
}

// addMachineChecks adds to s the notes on the checks of its rows (named
// names): what was checked, the worst lag, and a warning naming the rows the
// machine was too loaded for, which it also records in s.loaded, and saying
// which of their figures (affected) do not mean anything.
func (s *section) addMachineChecks(cfg config, checks []machineCheck, names []string, affected string) {
	var worst, worstMax time.Duration
	var rerun []string
	for i, m := range checks {
		worst, worstMax = max(worst, m.lagP99), max(worstMax, m.lagMax)
		if m.runs > 1 {
			rerun = append(rerun, names[i])
		}
		if !m.ok() {
			s.loaded = append(s.loaded, names[i])
		}
	}
	s.notes = append(s.notes, fmt.Sprintf("Machine check: a probe sleeping %v measured the scheduler's lag (worst of a row: p99 %v, max %v). "+
		"A row whose lag exceeds %v at p99 or %v at most (model time), or whose server achieved under %s of its nominal "+
		"capacity while saturated, is marked too loaded.",
		lagTick, worst.Round(100*time.Microsecond), worstMax.Round(100*time.Microsecond), maxLagP99, maxLag, pct(minCapacity)))
	if len(rerun) > 0 {
		s.notes = append(s.notes, fmt.Sprintf("Run again because the machine was too loaded the first time: %s; the figures are the last run's.",
			strings.Join(rerun, ", ")))
	}
	if len(s.loaded) > 0 {
		s.notes = append(s.notes, fmt.Sprintf("WARNING: this machine was too loaded while running %s: those rows' %s "+
			"do not mean anything. Run again on a quieter machine, or slower with -timescale %g.",
			strings.Join(s.loaded, ", "), affected, min(10, 2*cfg.timescale)))
	}
}
