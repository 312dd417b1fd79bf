package budget

import (
	"sync/atomic"
	"time"
)

// hostStats are a host's recent outcomes, kept without a lock: first
// attempts per slot of statSlot (a success in the slot it ended in, a
// failure in the one it was sent in), with the lowest latency of their
// successes, and the times of the latest success and failure of any
// attempt. Counts may be off by the few updates that race with a slot's
// reuse; the pacing only needs shares and orders of magnitude.
type hostStats struct {
	slots    [statSlots]statsSlot
	lastOK   atomic.Int64 // budget clock of the latest successful attempt
	lastFail atomic.Int64 // of the latest failed one
	streak   atomic.Int64 // attempts failed in a row since the latest success
	unseen   atomic.Int64 // of streak, those assumed of a host that never answered (newHost)
	outEnd   atomic.Int64 // budget clock of the success that ended the latest outage
	slowAt   atomic.Int64 // budget clock of the latest failure that took half its timeout or more
}

type statsSlot struct {
	epoch    atomic.Int64 // which statSlot of the clock the counts are for
	ok, fail atomic.Int64 // first attempts
	minLat   atomic.Int64 // nanoseconds; 0: no success measured
}

// record counts an attempt's outcome at time at.
func (st *hostStats) record(at int64, ok, first bool, latency time.Duration) {
	if ok {
		// Most successes find the time recent enough and write nothing.
		if at-st.lastOK.Load() > int64(time.Millisecond) {
			st.lastOK.Store(at)
		}
		if n := st.streak.Load(); n != 0 {
			if n >= outageStreak && at-st.lastFail.Load() < int64(probeQuiet) {
				// The end of an outage (the failures are recent: a
				// host's first success after a quiet spell ends none).
				st.outEnd.Store(at)
			}
			st.streak.Store(0)
			st.unseen.Store(0)
		}
	} else {
		st.lastFail.Store(at)
		st.streak.Add(1)
	}
	if !first {
		return
	}
	if !ok {
		// Counted when it was sent: an attempt that timed out after the
		// host recovered tells of the host it was sent to, not of the
		// host now.
		if s := st.slot(max(at-int64(latency), 0)); s != nil {
			s.fail.Add(1)
		}
		return
	}
	s := st.slot(at)
	if s == nil {
		return // a time read long ago: the slot moved on
	}
	s.ok.Add(1)
	if lat := int64(max(latency, 1)); latency > 0 {
		for {
			m := s.minLat.Load()
			if m != 0 && m <= lat || s.minLat.CompareAndSwap(m, lat) {
				break
			}
		}
	}
}

// slot returns the slot of time at, emptied if it held an older one; nil
// if it holds a newer one (at is older than the statistics' span).
func (st *hostStats) slot(at int64) *statsSlot {
	e := at / int64(statSlot)
	s := &st.slots[uint64(e)%statSlots] // at ≥ 0: the slot e%statSlots, masked
	old := s.epoch.Load()
	if old > e {
		return nil
	}
	if old != e && s.epoch.CompareAndSwap(old, e) {
		s.ok.Store(0)
		s.fail.Store(0)
		s.minLat.Store(0)
	}
	return s
}

// since returns the first attempts of the last gateSlots slots that
// succeeded and failed, counting only the slots that began after time
// from.
func (st *hostStats) since(at, from int64) (ok, fail int64) {
	e := at / int64(statSlot)
	first := from/int64(statSlot) + 1
	for i := range st.slots {
		s := &st.slots[i]
		if se := s.epoch.Load(); se <= e && e-se < gateSlots && se >= first {
			ok, fail = ok+s.ok.Load(), fail+s.fail.Load()
		}
	}
	return ok, fail
}

// recent returns the first attempts of the last gateSlots slots that
// succeeded and failed, the rate of first attempts per second over all the
// slots, and their successes' lowest latency (0 if none).
func (st *hostStats) recent(at int64) (ok, fail int64, rate float64, minLat time.Duration) {
	e := at / int64(statSlot)
	var all int64
	for i := range st.slots {
		s := &st.slots[i]
		se := s.epoch.Load()
		if se > e || e-se >= statSlots {
			continue
		}
		o, f := s.ok.Load(), s.fail.Load()
		all += o + f
		if e-se < gateSlots {
			ok, fail = ok+o, fail+f
		}
		if m := time.Duration(s.minLat.Load()); m > 0 && (minLat == 0 || m < minLat) {
			minLat = m
		}
	}
	span := time.Duration(statSlots-1)*statSlot + time.Duration(at-e*int64(statSlot))
	return ok, fail, float64(all) / span.Seconds(), minLat
}
