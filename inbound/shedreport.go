package inbound

import (
	"net/http"
	"strconv"
	"time"
)

// What a LoadShedder reports: the reason of each decision, the decision
// given to an OnDecision hook, and its counters.

// ShedReason says why a request was shed; zero for a request admitted.
type ShedReason int

const (
	// ShedNone is the reason of a request admitted.
	ShedNone ShedReason = iota
	// ShedOverLimit: the limit was reached, and the queue, if any, full.
	ShedOverLimit
	// ShedQueueTimeout: the request waited MaxQueueWait in the queue.
	ShedQueueTimeout
	// ShedCanceled: the caller went away while the request waited in the
	// queue. Its 503 most likely reaches no one.
	ShedCanceled
	// ShedTooLate: the request's context has a deadline (see Deadline),
	// and the time left was shorter than the expected wait plus the usual
	// latency of the service: refused at once, before it queues.
	ShedTooLate
	// ShedExpired: the request's deadline passed while it waited in the
	// queue, or what was left when a slot came free was shorter than the
	// usual latency: dropped before the handler runs.
	ShedExpired
)

// String returns the reason in snake case: "none", "over_limit",
// "queue_timeout", "canceled", "too_late" or "expired", for metrics and
// logs.
func (r ShedReason) String() string {
	switch r {
	case ShedNone:
		return "none"
	case ShedOverLimit:
		return "over_limit"
	case ShedQueueTimeout:
		return "queue_timeout"
	case ShedCanceled:
		return "canceled"
	case ShedTooLate:
		return "too_late"
	case ShedExpired:
		return "expired"
	}
	return "ShedReason(" + strconv.Itoa(int(r)) + ")"
}

// ShedDecision is what a LoadShedder decided for one request, for an
// OnDecision hook.
type ShedDecision struct {
	// Req is the inbound request. The hook must not read its body.
	Req *http.Request

	// Shed is true for a request refused with 503, false for one handled.
	Shed bool

	// Reason says why it was shed; ShedNone when it was not.
	Reason ShedReason

	// MustPass reports a request admitted by the MustPass predicate,
	// without counting against the limit.
	MustPass bool

	// Limit is the limit when the decision was taken; InFlight the
	// requests in flight right after it, this one included if admitted
	// (requests admitted by MustPass are not counted); Queued the requests
	// waiting in the queue.
	Limit, InFlight, Queued int

	// Waited is the time the request spent in the queue, zero if it did
	// not wait.
	Waited time.Duration
}

// LoadShedderStats are the counters of a LoadShedder, from Stats.
type LoadShedderStats struct {
	Limit, InFlight, Queued int    // now
	Admitted, Shed          uint64 // since NewLoadShedder; MustPass requests count as admitted
	// Late counts, of Shed, the requests refused for their caller's
	// deadline: ShedTooLate and ShedExpired.
	Late uint64
}
