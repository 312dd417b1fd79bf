package main

import "time"

// settled measures what a reader means by "recovered" after a fault that
// ended at end (a time from the load's start, as outcome.at): the first
// moment from which the fault has no effect left, that is when both
//
//   - the backlog is drained: every request sent before end has its answer
//     (success or failure; parked and delayed retries included), and
//   - every request sent from then on succeeds.
//
// It returns how long after end that moment came. It reports false if a
// request sent in the load's last period (last-period to last) failed: the
// run ended before the clients were served again, or it never recovered.
// The moment may come after the load's end, when the backlog outlives it.
func settled(outcomes []outcome, end, period, last time.Duration) (time.Duration, bool) {
	at := end
	for _, o := range outcomes {
		switch {
		case o.at < end:
			at = max(at, o.at+o.latency) // answered
		case !o.ok:
			if o.at >= last-period {
				return 0, false
			}
			at = max(at, o.at+time.Nanosecond) // from the next request on
		}
	}
	return at - end, true
}

// settledCell formats what settled returned, in model time.
func settledCell(cfg config, d time.Duration, ok bool) string {
	if !ok {
		return "not in run"
	}
	return roundCell(cfg.model(d))
}

// roundCell formats d to 0.1s, or to 1ms below 1s.
func roundCell(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
