package destinations

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/hostpattern"
	"github.com/seed2409de8f/retryhttp/internal/tail"
)

// ConfigError is one problem in a Config or in a
// destinations file: where it is, as a key path such as
// "destinations[2].backoff.base", and what is wrong. Set,
// New, Parse and LoadFile return every problem they
// find, each one of these, joined with errors.Join; errors.As finds the
// first.
type ConfigError struct {
	File    string // the file, for LoadFile; "" otherwise
	Path    string // the key path, with the file's key names
	Problem string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("retryhttp: ")
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// problems collects ConfigErrors.
type problems []error

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, &ConfigError{Path: path, Problem: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error { return errors.Join(ps...) }

// outside returns the problems of ps whose path is neither one of the paths
// of reported nor inside one (destinations[1].host is inside destinations[1]).
func (ps problems) outside(reported problems) problems {
	var out problems
	for _, e := range ps {
		if !reportedAt(reported, e.(*ConfigError).Path) {
			out = append(out, e)
		}
	}
	return out
}

// reportedAt reports whether one of reported is at path or encloses it.
func reportedAt(reported problems, path string) bool {
	for _, e := range reported {
		p := e.(*ConfigError).Path
		if path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return false
}

// validateConfig returns the problems of cfg, nil if there are none.
func validateConfig(cfg Config) error { return configProblems(cfg).err() }

// configProblems returns the problems of cfg.
func configProblems(cfg Config) problems {
	var ps problems
	def := cfg.Defaults
	if def.Name != "" {
		ps.add("defaults.name", "not allowed in defaults")
	}
	if def.Host != "" {
		ps.add("defaults.host", "not allowed in defaults: defaults apply to every request")
	}
	if def.Match != nil {
		ps.add("defaults.match", "not allowed in defaults: defaults apply to every request")
	}
	validatePolicy(&ps, "defaults", def)

	names := map[string]int{}
	var hosts []hostpattern.Pattern // of the Host destinations so far
	var hostIndex []int
	for i, d := range cfg.Destinations {
		path := fmt.Sprintf("destinations[%d]", i)
		if d.Name != "" {
			if j, ok := names[d.Name]; ok {
				ps.add(path+".name", "%q repeats destinations[%d].name", d.Name, j)
			}
			names[d.Name] = i
		}
		switch {
		case d.Host != "" && d.Match != nil:
			ps.add(path, "set host or match, not both")
		case d.Host == "" && d.Match == nil:
			ps.add(path+".host", "required: a host such as api.example.com, api.example.com:8443 or *.example.com")
		case d.Host != "":
			h, problem := hostpattern.Check(d.Host)
			if problem != "" {
				ps.add(path+".host", "%s, got %q", problem, d.Host)
				break
			}
			for k, earlier := range hosts {
				switch {
				case earlier == h:
					ps.add(path+".host", "%q repeats destinations[%d].host", d.Host, hostIndex[k])
				case earlier.Covers(h):
					ps.add(path+".host", "%q is never used: destinations[%d].host (%q) matches it first",
						d.Host, hostIndex[k], earlier.String())
				default:
					continue
				}
				break
			}
			hosts = append(hosts, h)
			hostIndex = append(hostIndex, i)
		}
		validatePolicy(&ps, path, d)
	}
	return ps
}

// validatePolicy adds the problems of the settings of d, found at path.
func validatePolicy(ps *problems, path string, d Destination) {
	if d.MaxRetries != nil && *d.MaxRetries < 0 {
		ps.add(path+".maxRetries", "must not be negative, got %d", *d.MaxRetries)
	}
	if b := d.Backoff; b != nil {
		if b.Base < 0 {
			ps.add(path+".backoff.base", "must be a positive duration, got %q", b.Base.String())
		}
		if b.Cap < 0 {
			ps.add(path+".backoff.cap", "must be a positive duration, got %q", b.Cap.String())
		}
		if b.Base > 0 && b.Cap > 0 && b.Cap < b.Base {
			ps.add(path+".backoff.cap", "must not be below backoff.base (%q), got %q", b.Base.String(), b.Cap.String())
		}
		if j := b.JitterMagnitude; math.IsNaN(j) || j > 1 {
			ps.add(path+".backoff.jitter", "must be a number from 0 to 1, got %v", j)
		}
	}
	if a := d.AttemptTimeout; a != nil && *a < 0 {
		ps.add(path+".attemptTimeout", "must not be negative (zero means none), got %q", a.String())
	}
	if h := d.Hedging; h != nil {
		switch {
		case h.MaxHedges < 0:
			ps.add(path+".hedging.maxHedges", "must not be negative (zero turns hedging off), got %d", h.MaxHedges)
		case h.Quantile != 0 && !(h.Quantile >= tail.MinQuantile && h.Quantile <= tail.MaxQuantile):
			ps.add(path+".hedging.quantile", "must be a number from %v to %v (zero: a fixed delay), got %v", tail.MinQuantile, tail.MaxQuantile, h.Quantile)
		case h.Quantile != 0 && h.Delay != 0:
			ps.add(path+".hedging.delay", "must be zero with a quantile (the delay follows the latency), got %q", h.Delay.String())
		case h.MaxHedges > 0 && h.Delay <= 0 && h.Quantile == 0:
			ps.add(path+".hedging.delay", "must be a positive duration when maxHedges is above 0, got %q", h.Delay.String())
		}
	}
	seen := map[int]bool{}
	for i, code := range d.RetryableStatusCodes {
		p := fmt.Sprintf("%s.retryableStatusCodes[%d]", path, i)
		switch {
		case code < 400 || code > 599:
			ps.add(p, "must be a status code from 400 to 599, got %d", code)
		case seen[code]:
			ps.add(p, "%d is listed twice", code)
		}
		seen[code] = true
	}
	if d.Budget != nil && d.NoBudget {
		ps.add(path+".budget", "set a budget of its own or no budget, not both")
	}
	if b := d.Budget; b != nil {
		if r := b.Ratio; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			ps.add(path+".budget.ratio", "must be a positive number (zero means the default, 0.1), got %v", r)
		}
		if b.Capacity < 0 || b.Capacity > budget.MaxCapacity {
			ps.add(path+".budget.capacity", "must be from 1 to %d (zero means the default, 10), got %d", budget.MaxCapacity, b.Capacity)
		}
		if b.MaxHosts < 0 {
			ps.add(path+".budget.maxHosts", "must be positive (zero means the default, 1024), got %d", b.MaxHosts)
		}
		if b.MaxWait < 0 {
			ps.add(path+".budget.maxWait", "must be a positive duration (zero means the default, 2s), got %q", b.MaxWait.String())
		}
		if b.MaxParked < 0 {
			ps.add(path+".budget.maxParked", "must be positive (zero means the default, 10000), got %d", b.MaxParked)
		}
	}
}
