package retryhttp

import (
	"iter"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// HostBudget is the state of one destination host in a RetryBudget, as
// RetryBudget.Hosts reports it: what an operator watches to see a storm
// being refused (Tokens at zero, Parked growing, Window small).
type HostBudget struct {
	// Destination is the host, as scheme://host:port.
	Destination string

	// Tokens is the number of retries the host's bucket can still send at
	// once, fractional (a success deposits Ratio); Capacity is the size
	// of the bucket.
	Tokens   float64
	Capacity int

	// Window is the number of parked retries the host lets be in flight at
	// once, as of its latest change (it starts at its cap, is halved by
	// failures, and a window unused for MaxWait starts again at its cap
	// when it is next used); InFlight is the number of its slots held, and
	// Parked the number of retries waiting for one.
	Window, InFlight, Parked int
}

// Hosts returns the hosts b tracks, with their state, in no particular
// order: at most about MaxHosts of them (RetryBudgetOptions.MaxHosts),
// those with retries parked or in flight added. A host the budget has
// forgotten, or never saw fail, has a full bucket and nothing parked.
//
// It is safe to call at any time, concurrently with requests, which it
// never blocks: it takes no lock and reads each value with one atomic
// load, so the values of one host may be a few updates apart. It
// allocates one string per host (Destination), and nothing else. A nil
// budget has no hosts.
func (b *RetryBudget) Hosts() iter.Seq[HostBudget] {
	return func(yield func(HostBudget) bool) {
		b.inner().Each(func(k hostmap.Key, h budget.HostState) bool {
			return yield(HostBudget{
				Destination: k.String(),
				Tokens:      h.Tokens,
				Capacity:    h.Capacity,
				Window:      h.Window,
				InFlight:    h.InFlight,
				Parked:      h.Parked,
			})
		})
	}
}

// DefaultRetryBudget returns the budget of the process shared by every
// Transport made without WithRetryBudget (see WithRetryBudget), for
// reading its state with Hosts: otelretryhttp.ObserveRetryBudget reports
// it as metrics. It is made on first use.
func DefaultRetryBudget() *RetryBudget { return defaultBudget() }
