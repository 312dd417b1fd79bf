package retryhttp

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/seed2409de8f/retryhttp/internal/hostpattern"
)

// Destination is the retry policy of one destination: the requests whose
// host is Host, or for which Match returns true. Each field left unset (nil)
// is inherited, from DestinationConfig.Defaults and then from the
// Transport's options. docs/options.md has the rules in full.
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
	// CustomizedDelayFnOptions (250ms, 10s, 1/3), not the transport's.
	// Base and Cap must not be negative, nor Cap below a set Base;
	// JitterMagnitude must not be NaN nor above 1 (negative: no jitter).
	Backoff *CustomizedDelayFnOptions

	// AttemptTimeout replaces WithAttemptTimeout; zero means no
	// per-attempt timeout. Not negative.
	AttemptTimeout *time.Duration

	// Hedging replaces WithHedging; a MaxHedges of zero turns hedging off.
	Hedging *DestinationHedging

	// RetryableStatusCodes makes the ShouldRetryFn
	// CustomizedShouldRetryFn with these status codes (400 to 599, no
	// repeats), replacing WithShouldRetryFn. An empty non-nil slice
	// retries no status code but 429 and those with Retry-After.
	RetryableStatusCodes []int

	// Budget gives the destination a retry budget of its own with these
	// options, instead of the transport's (WithRetryBudget); a wildcard or
	// a Match destination keeps one bucket per host in it, as usual.
	// NoBudget turns the budget off for the destination. At most one of
	// them is set; without either, the transport's budget applies.
	Budget   *RetryBudgetOptions
	NoBudget bool
}

// DestinationHedging is the hedging of a Destination, as WithHedging
// describes it: another attempt after Delay without an answer, at most
// MaxHedges in flight beyond the first. A MaxHedges of zero turns hedging
// off; otherwise Delay must be positive, or Quantile set.
type DestinationHedging struct {
	Delay     time.Duration
	MaxHedges int
	// Quantile, if not zero, makes the delay follow the destination's
	// latency as WithAdaptiveHedging describes: the Quantile-th quantile of
	// its recent successful first attempts. It is from 0.5 to 0.999, and
	// Delay is then zero.
	Quantile float64
}

// DestinationConfig is a set of destination policies: what a file read by
// ParseDestinations holds, and what Destinations.Set installs.
type DestinationConfig struct {
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

// Destinations holds the destination policies of one or more Transports
// (WithDestinations) and lets them be replaced at run time. The zero value
// holds none: requests use the transports' options, as without it.
//
// Set and LoadFile replace every policy at once; a request uses the
// policies that were in place when it started, for all its attempts. A
// Destinations is safe for concurrent use. It must not be copied after
// first use.
type Destinations struct {
	current atomic.Pointer[destSet] // immutable once stored; nil: none
	mu      sync.Mutex              // serialises Set, so budgets carry over
}

// NewDestinations returns a Destinations holding cfg, or the errors that
// make cfg invalid.
func NewDestinations(cfg DestinationConfig) (*Destinations, error) {
	d := &Destinations{}
	if err := d.Set(cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// Set validates cfg and, if it is valid, replaces the policies at once.
// Requests already started keep the policies they started with. An invalid
// cfg changes nothing: Set returns every problem found, each a
// *DestinationConfigError naming its field, joined with errors.Join.
//
// A destination with a budget of its own (Budget) keeps its budget's state
// across Set when its Name (or, without one, its Host) and its
// RetryBudgetOptions are unchanged.
func (d *Destinations) Set(cfg DestinationConfig) error {
	if err := validateConfig(cfg); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.current.Store(compile(cfg, d.current.Load()))
	return nil
}

// WithDestinations makes the transport apply the policies of d by
// destination: for a request, a setting comes from the first of its
// context's override (Set…), the destination's policy, the transport's
// option (With…) and the default. nil, the default, means no destination
// policies. A Destinations may be shared by several transports.
func WithDestinations(d *Destinations) Option {
	return func(t *Transport) { t.destinations = d }
}

// lookup returns the policy of req in the policies in place now, nil if
// there is none. It does not allocate, unless req's host name has
// upper-case letters or a Match function allocates.
func (d *Destinations) lookup(req *http.Request) *destPolicy {
	ds := d.current.Load()
	if ds == nil {
		return nil
	}
	return ds.lookup(req)
}

// destSet is the compiled, immutable form of a DestinationConfig: the
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

// destPolicy is the compiled policy of one destination, its inherited
// fields filled in from the defaults: patches to the settings, the same
// patches as the options' (options.go). It is never modified once built.
type destPolicy struct {
	key        string // what its own budget is kept under (budgetKey)
	patches    []patch
	budget     *RetryBudget // its own (Budget), nil if none
	budgetOpts *RetryBudgetOptions
}

// apply sets in s what the policy sets.
func (p *destPolicy) apply(s *settings) {
	for _, patch := range p.patches {
		patch(s)
	}
}

// compile builds the destSet of a valid cfg. Budgets of prev's policies are
// kept for policies with the same key and budget options.
func compile(cfg DestinationConfig, prev *destSet) *destSet {
	budgets := map[string]*destPolicy{}
	if prev != nil {
		for _, p := range prev.policies {
			budgets[p.key] = p
		}
		if prev.defaults != nil {
			budgets["defaults"] = prev.defaults
		}
	}
	defaults := compilePolicy(cfg.Defaults, Destination{}, "defaults", budgets, nil)
	ds := &destSet{exact: map[string][]portRule{}, wildcard: map[string]int{}}
	if len(defaults.patches) > 0 {
		ds.defaults = defaults
	}
	for i, d := range cfg.Destinations {
		// Those who inherit the defaults' budget share it.
		p := compilePolicy(d, cfg.Defaults, budgetKey(d), budgets, defaults.budget)
		ds.policies = append(ds.policies, p)
		if d.Match != nil {
			ds.matchers = append(ds.matchers, matchRule{i, d.Match})
			continue
		}
		h := hostpattern.Parse(d.Host)
		if h.Wildcard {
			if _, ok := ds.wildcard[h.Name]; !ok {
				ds.wildcard[h.Name] = i
			}
			continue
		}
		ds.exact[h.Name] = append(ds.exact[h.Name], portRule{h.Port, i})
	}
	return ds
}

// compilePolicy compiles d, with the fields it leaves unset taken from def,
// whose own budget, if it has one, is defBudget.
func compilePolicy(d, def Destination, key string, prev map[string]*destPolicy, defBudget *RetryBudget) *destPolicy {
	p := &destPolicy{key: key}
	add := func(f patch) { p.patches = append(p.patches, f) }
	if r := firstSet(d.MaxRetries, def.MaxRetries); r != nil {
		add(withMaxRetries(*r))
	}
	if b := firstSet(d.Backoff, def.Backoff); b != nil {
		add(withDelay(CustomizedDelayFn(*b)))
	}
	codes := d.RetryableStatusCodes
	if codes == nil {
		codes = def.RetryableStatusCodes
	}
	if codes != nil {
		add(withRetryPolicy(newRetryPolicy(CustomizedShouldRetryFnOptions{RetryableStatusCodes: codes})))
	}
	if a := firstSet(d.AttemptTimeout, def.AttemptTimeout); a != nil {
		add(withAttemptTimeout(*a))
	}
	if h := firstSet(d.Hedging, def.Hedging); h != nil {
		if h.Quantile != 0 {
			add(withAdaptiveHedging(h.Quantile, h.MaxHedges))
		} else {
			add(withHedging(h.Delay, h.MaxHedges))
		}
	}
	switch {
	case d.NoBudget:
		add(withBudget(nil))
	case d.Budget != nil:
		opts := *d.Budget // a copy: the caller may change theirs
		p.budgetOpts = &opts
		if old, ok := prev[key]; ok && key != "" && old.budgetOpts != nil && *old.budgetOpts == *d.Budget {
			p.budget = old.budget
		} else {
			p.budget = NewRetryBudget(*d.Budget)
		}
		add(withBudget(p.budget))
	case def.NoBudget:
		add(withBudget(nil))
	case def.Budget != nil:
		add(withBudget(defBudget))
	}
	return p
}

// budgetKey is what the budget of d is kept under across Set: its Name, or
// its Host; "" (not kept) for a Match destination without a name.
func budgetKey(d Destination) string {
	switch {
	case d.Name != "":
		return "name:" + d.Name
	case d.Host != "":
		h := hostpattern.Parse(d.Host)
		return "host:" + h.String()
	}
	return ""
}

// firstSet returns a if it is set, else b.
func firstSet[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}
