package destinations

import (
	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/hostpattern"
)

// destPolicy is the compiled policy of one destination, its inherited
// fields filled in from the defaults: a retryhttp.Policy of the options
// they stand for. It is never modified once built.
type destPolicy struct {
	key        string // what its own budget is kept under (budgetKey)
	policy     *retryhttp.Policy
	set        int                    // how many options policy holds
	budget     *retryhttp.RetryBudget // its own (Budget), nil if none
	budgetOpts *retryhttp.RetryBudgetOptions
}

// compile builds the destSet of a valid cfg. Budgets of prev's policies are
// kept for policies with the same key and budget options.
func compile(cfg Config, prev *destSet) *destSet {
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
	if defaults.set > 0 {
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
func compilePolicy(d, def Destination, key string, prev map[string]*destPolicy, defBudget *retryhttp.RetryBudget) *destPolicy {
	p := &destPolicy{key: key}
	opts := options(inherit(d, def))
	switch {
	case d.NoBudget:
		opts = append(opts, retryhttp.WithRetryBudget(nil))
	case d.Budget != nil:
		budgetOpts := *d.Budget // a copy: the caller may change theirs
		p.budgetOpts = &budgetOpts
		if old, ok := prev[key]; ok && key != "" && old.budgetOpts != nil && *old.budgetOpts == *d.Budget {
			p.budget = old.budget
		} else {
			p.budget = retryhttp.NewRetryBudget(*d.Budget)
		}
		opts = append(opts, retryhttp.WithRetryBudget(p.budget))
	case def.NoBudget:
		opts = append(opts, retryhttp.WithRetryBudget(nil))
	case def.Budget != nil:
		opts = append(opts, retryhttp.WithRetryBudget(defBudget))
	}
	p.policy, p.set = retryhttp.NewPolicy(opts...), len(opts)
	return p
}

// inherit returns the settings of d, each one it leaves unset taken from
// def; budgets are compilePolicy's.
func inherit(d, def Destination) Destination {
	d.MaxRetries = firstSet(d.MaxRetries, def.MaxRetries)
	d.Backoff = firstSet(d.Backoff, def.Backoff)
	d.AttemptTimeout = firstSet(d.AttemptTimeout, def.AttemptTimeout)
	d.Hedging = firstSet(d.Hedging, def.Hedging)
	d.HoldDuringPause = firstSet(d.HoldDuringPause, def.HoldDuringPause)
	if d.RetryableStatusCodes == nil {
		d.RetryableStatusCodes = def.RetryableStatusCodes
	}
	return d
}

// options returns the options that the settings of d stand for, budgets
// left out.
func options(d Destination) []retryhttp.Option {
	var opts []retryhttp.Option
	if r := d.MaxRetries; r != nil {
		opts = append(opts, retryhttp.WithMaxRetries(*r))
	}
	if b := d.Backoff; b != nil {
		opts = append(opts, retryhttp.WithDelayFn(retryhttp.CustomizedDelayFn(*b)))
	}
	if codes := d.RetryableStatusCodes; codes != nil {
		opts = append(opts, retryhttp.WithCustomizedShouldRetryFn(
			retryhttp.CustomizedShouldRetryFnOptions{RetryableStatusCodes: codes}))
	}
	if a := d.AttemptTimeout; a != nil {
		opts = append(opts, retryhttp.WithAttemptTimeout(*a))
	}
	if h := d.HoldDuringPause; h != nil {
		opts = append(opts, retryhttp.WithHoldDuringPause(*h))
	}
	if h := d.Hedging; h != nil {
		if h.Quantile != 0 {
			opts = append(opts, retryhttp.WithAdaptiveHedging(h.Quantile, h.MaxHedges))
		} else {
			opts = append(opts, retryhttp.WithHedging(h.Delay, h.MaxHedges))
		}
	}
	return opts
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
