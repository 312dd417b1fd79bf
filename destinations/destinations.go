// Package destinations gives each destination of a retryhttp.Transport a
// retry policy of its own: by host (exact, with a port, or a wildcard) or
// by any property of the request, written in Go or read from a JSON file,
// and replaced at run time while requests run.
//
// A Config compiles each destination to a retryhttp.Policy of the
// transport's own options (WithMaxRetries, WithDelayFn, WithAttemptTimeout,
// WithHedging or WithAdaptiveHedging, WithHoldDuringPause,
// WithCustomizedShouldRetryFn, WithRetryBudget); a Table holds
// the compiled form and finds the Policy of a request without allocating.
// A Transport applies it through retryhttp.WithPolicyFunc:
//
//	table, err := destinations.New(cfg) // or a zero Table and LoadFile
//	tr := retryhttp.New(retryhttp.WithPolicyFunc(table.Policy))
//
// docs/options.md has the rules and the file format in full.
package destinations

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// Destination is the retry policy of one destination: the requests whose
// host is Host, or for which Match returns true. Each field left unset (nil)
// is inherited, from Config.Defaults and then from the Transport's options.
// The options named below are retryhttp's. docs/options.md has the rules in
// full.
type Destination struct {
	// Name labels the destination in errors; optional, unique when set.
	// A destination's own retry budget is kept across reloads under its
	// Name (or its Host, when it has no Name).
	Name string

	// Host selects requests by the host of their URL:
	//   - "api.example.com" matches that host on any port;
	//   - "api.example.com:8443" matches it on port 8443 only (a URL with
	//     no port has its scheme's: 80 for http, 443 for https);
	//   - "*.example.com" matches every host ending in ".example.com", at
	//     any depth and on any port, but not example.com itself.
	// Host names are compared without regard to case. IPv6 addresses are
	// written in brackets when a port follows: "[::1]:8080".
	Host string

	// Match selects requests by any property of the request, for a policy
	// that Host cannot express. Exactly one of Host and Match is set. It is
	// called on the request as the caller sent it, once per request; it
	// must be safe for concurrent use and must not modify the request.
	Match func(*http.Request) bool

	// MaxRetries replaces WithMaxRetries. Not negative.
	MaxRetries *int

	// Backoff makes the delay CustomizedDelayFn(*Backoff), replacing
	// WithDelayFn; its zero fields mean the defaults of
	// CustomizedDelayFnOptions, not the transport's.
	// Base and Cap must not be negative, nor Cap below a set Base;
	// JitterMagnitude must not be NaN nor above 1 (negative: no jitter).
	Backoff *retryhttp.CustomizedDelayFnOptions

	// AttemptTimeout replaces WithAttemptTimeout; zero means no
	// per-attempt timeout. Not negative.
	AttemptTimeout *time.Duration

	// Hedging replaces WithHedging; a MaxHedges of zero turns hedging off.
	Hedging *Hedging

	// HoldDuringPause replaces WithHoldDuringPause: every request to the
	// destination's host waits while the pause its server stated runs.
	HoldDuringPause *bool

	// RetryableStatusCodes sets WithCustomizedShouldRetryFn with these
	// status codes (400 to 599, no repeats), replacing WithShouldRetryFn. An empty non-nil slice
	// retries no status code but 429 and those with Retry-After.
	RetryableStatusCodes []int

	// Budget gives the destination a retry budget of its own with these
	// options, instead of the transport's (WithRetryBudget); a wildcard or
	// a Match destination keeps one bucket per host in it, as usual.
	// NoBudget turns the budget off for the destination. At most one of
	// them is set; without either, the transport's budget applies.
	Budget   *retryhttp.RetryBudgetOptions
	NoBudget bool
}

// Hedging is the hedging of a Destination, as retryhttp.WithHedging
// describes it: another attempt after Delay without an answer, at most
// MaxHedges in flight beyond the first. A MaxHedges of zero turns hedging
// off; otherwise Delay must be positive, or Quantile set.
type Hedging struct {
	Delay     time.Duration
	MaxHedges int
	// Quantile, if not zero, makes the delay follow the destination's
	// latency as WithAdaptiveHedging describes: the Quantile-th quantile of
	// its recent successful first attempts. It is from 0.5 to 0.999, and
	// Delay is then zero.
	Quantile float64
}

// Config is a set of destination policies: what a file read by Parse
// holds, and what Table.Set installs.
type Config struct {
	// Defaults applies to every request sent through the transport,
	// matched or not: a destination inherits each field it leaves unset
	// from Defaults, and a request that matches no destination gets
	// Defaults alone. Its Name, Host and Match must be empty. A budget of
	// its own (Defaults.Budget) is one budget shared by every destination
	// that inherits it.
	Defaults Destination

	// Destinations are tried in order; the first that matches a request
	// applies. A Host destination that an earlier one always shadows
	// (a repeated host, a host under an earlier wildcard) is an error.
	Destinations []Destination
}

// Table holds the destination policies of one or more Transports and lets
// them be replaced at run time; a Transport applies them through
// retryhttp.WithPolicyFunc(table.Policy). The zero value holds none:
// requests use the transports' options, as without it.
//
// Set and LoadFile replace every policy at once; a request uses the
// policies that were in place when it started, for all its attempts. A
// Table is safe for concurrent use. It must not be copied after first use.
type Table struct {
	current atomic.Pointer[destSet] // immutable once stored; nil: none
	mu      sync.Mutex              // serialises Set, so budgets carry over
}

// New returns a Table holding cfg, or the errors that make cfg invalid.
func New(cfg Config) (*Table, error) {
	t := &Table{}
	if err := t.Set(cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// Set validates cfg and, if it is valid, replaces the policies at once.
// Requests already started keep the policies they started with. An invalid
// cfg changes nothing: Set returns every problem found, each a
// *ConfigError naming its field, joined with errors.Join.
//
// A destination with a budget of its own (Budget) keeps its budget's state
// across Set when its Name (or, without one, its Host) and its
// retryhttp.RetryBudgetOptions are unchanged.
func (t *Table) Set(cfg Config) error {
	if err := validateConfig(cfg); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.current.Store(compile(cfg, t.current.Load()))
	return nil
}

// Policy returns the policy of req in the policies in place now: that of
// the first destination matching it, else that of the defaults, nil if
// there is none. It is the function to give retryhttp.WithPolicyFunc: for
// a request, a setting then comes from the first of its context's options
// (retryhttp.SetOptions), the destination's policy, the transport's option
// and the default. It does not allocate, unless req's host name has
// upper-case letters or a Match function allocates.
func (t *Table) Policy(req *http.Request) *retryhttp.Policy {
	ds := t.current.Load()
	if ds == nil {
		return nil
	}
	if p := ds.lookup(req); p != nil {
		return p.policy
	}
	return nil
}

// destSet is the compiled, immutable form of a Config: the
// policies in order, and indexes that find the first match of a request
// without allocating.
type destSet struct {
	policies []*destPolicy
	exact    map[string][]portRule // by lower-case host name
	wildcard map[string]int        // "example.com" for "*.example.com": index
	matchers []matchRule           // in order
	defaults *destPolicy           // nil when Defaults sets nothing
}

type portRule struct {
	port  string // "" for any port
	index int
}

type matchRule struct {
	index int
	match func(*http.Request) bool
}

// lookup returns the policy of req: that of the first destination matching
// it, else the defaults (nil when there are none).
func (ds *destSet) lookup(req *http.Request) *destPolicy {
	if req.URL == nil {
		return ds.defaults // the base transport refuses it; don't call Match
	}
	best := len(ds.policies)
	if len(ds.exact) > 0 || len(ds.wildcard) > 0 {
		host, port := requestHostPort(req)
		for _, r := range ds.exact[host] {
			if r.index < best && (r.port == "" || r.port == port) {
				best = r.index
			}
		}
		if len(ds.wildcard) > 0 {
			for i := 0; i < len(host); i++ {
				if host[i] != '.' {
					continue
				}
				if index, ok := ds.wildcard[host[i+1:]]; ok && index < best {
					best = index
				}
			}
		}
	}
	for _, m := range ds.matchers {
		if m.index >= best {
			break
		}
		if m.match(req) {
			best = m.index
			break
		}
	}
	if best < len(ds.policies) {
		return ds.policies[best]
	}
	return ds.defaults
}

// requestHostPort returns the lower-case host name of req's URL, without a
// trailing dot, and its port (the scheme's default when the URL has none).
// It allocates only for a host name with upper-case letters.
func requestHostPort(req *http.Request) (host, port string) {
	host, port = req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = hostmap.DefaultPort(req.URL.Scheme)
	}
	host = strings.TrimSuffix(host, ".")
	for i := 0; i < len(host); i++ {
		if 'A' <= host[i] && host[i] <= 'Z' {
			return strings.ToLower(host), port
		}
	}
	return host, port
}
