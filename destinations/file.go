package destinations

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/jsonwalk"
)

// maxDestinationsFile bounds the size of a destinations file.
const maxDestinationsFile = 4 << 20

// LoadFile reads the JSON file name (as Parse describes) and,
// if it is valid, replaces the policies at once, as Set does. A file that
// cannot be read or is invalid changes nothing: the policies in place stay,
// and the error says why, naming the file and, for each problem, its key
// path (a *ConfigError).
func (t *Table) LoadFile(name string) error {
	data, err := readFileLimited(name)
	if err != nil {
		return fmt.Errorf("retryhttp: reading destinations: %w", err)
	}
	cfg, err := Parse(data)
	if err == nil {
		err = t.Set(cfg)
	}
	if err != nil {
		return inFile(err, name)
	}
	return nil
}

func readFileLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDestinationsFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDestinationsFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxDestinationsFile)
	}
	return data, nil
}

// inFile sets File on every ConfigError of err.
func inFile(err error, name string) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ce *ConfigError
		if errors.As(e, &ce) {
			ce.File = name
		}
	}
	return err
}

// Keys of a destinations file, in the order the documentation gives them.
var (
	fileTopKeys     = []string{"defaults", "destinations"}
	filePolicyKeys  = []string{"name", "host", "maxRetries", "backoff", "attemptTimeout", "hedging", "retryableStatusCodes", "budget", "holdDuringPause"}
	fileDefaultKeys = []string{"maxRetries", "backoff", "attemptTimeout", "hedging", "retryableStatusCodes", "budget", "holdDuringPause"}
	fileBackoffKeys = []string{"base", "cap", "jitter"}
	fileHedgingKeys = []string{"delay", "maxHedges", "quantile"}
	fileBudgetKeys  = []string{"ratio", "capacity", "maxHosts", "noParking", "maxWait", "maxParked"}
)

// Parse reads a destinations file in JSON and validates it,
// returning every problem found (each a *ConfigError naming its
// key path, such as destinations[2].backoff.base), joined with errors.Join.
// docs/options.md describes the format; in short:
//
//	{
//	  "defaults": {"maxRetries": 2},
//	  "destinations": [
//	    {"name": "payments", "host": "payments.internal:8443", "maxRetries": 0},
//	    {"host": "*.search.internal", "attemptTimeout": "800ms",
//	     "backoff": {"base": "50ms", "cap": "2s", "jitter": 0.2},
//	     "hedging": {"delay": "100ms", "maxHedges": 1},
//	     "retryableStatusCodes": [502, 503, 504],
//	     "budget": {"ratio": 0.2, "capacity": 20, "maxWait": "1s"}},
//	    {"host": "legacy.internal", "budget": "off", "hedging": "off"},
//	    {"host": "api.github.com", "holdDuringPause": true}
//	  ]
//	}
//
// Durations are Go duration strings ("250ms", "2s", "1m30s"). Keys are
// case-sensitive; an unknown or repeated key is an error, and so is a value
// of the wrong type or out of range. A null value means the key is absent.
// In "backoff", "jitter" is the JitterMagnitude of retryhttp.CustomizedDelayFnOptions,
// from 0 (none) to 1; absent, it is that field's default. "budget" is "transport" (the
// transport's budget, as when absent), "off", or the options of a budget of
// the destination's own. "hedging" is "off" or its delay (or quantile:
// Hedging) and maxHedges. "holdDuringPause" is a boolean
// (retryhttp.WithHoldDuringPause).
func Parse(data []byte) (Config, error) {
	var cfg Config
	var top json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return cfg, &ConfigError{Problem: "not valid JSON: " + jsonwalk.SyntaxError(data, err)}
	}
	p := newFileParser()
	p.Object(top, "", fileTopKeys, func(key string, v json.RawMessage, path string) {
		switch key {
		case "defaults":
			p.Object(v, path, fileDefaultKeys, func(key string, v json.RawMessage, path string) {
				p.policyField(&cfg.Defaults, key, v, path)
			})
		case "destinations":
			p.Array(v, path, func(v json.RawMessage, path string) {
				var d Destination
				p.Object(v, path, filePolicyKeys, func(key string, v json.RawMessage, path string) {
					p.policyField(&d, key, v, path)
				})
				cfg.Destinations = append(cfg.Destinations, d)
			})
		}
	})
	// A value that could not be read is left at its zero value; the checks
	// of the whole config still run on the rest, so that one pass reports
	// every problem, but say nothing more at a path already reported.
	ps := append(p.ps, configProblems(cfg).outside(p.ps)...)
	if len(ps) > 0 {
		return Config{}, ps.err()
	}
	return cfg, nil
}

// fileParser turns the JSON values of a destinations file into a
// Config, collecting problems: the walk of the JSON and the
// reading of scalars are jsonwalk's, the schema is here.
type fileParser struct {
	jsonwalk.Walker
	ps problems
}

// newFileParser returns a fileParser whose walker reports to its problems.
func newFileParser() *fileParser {
	p := &fileParser{}
	p.Report = func(path, problem string) { p.ps.add(path, "%s", problem) }
	return p
}

// policyField sets in d the field key of a destination or of the defaults.
func (p *fileParser) policyField(d *Destination, key string, v json.RawMessage, path string) {
	switch key {
	case "name":
		d.Name = p.Str(v, path)
		if d.Name == "" {
			p.ps.add(path, "must not be empty")
		}
	case "host":
		d.Host = p.Str(v, path)
	case "maxRetries":
		n, ok := p.Integer(v, path)
		d.MaxRetries = &n
		if ok && n < 0 {
			p.ps.add(path, "must not be negative, got %d", n)
		}
	case "attemptTimeout":
		a, ok := p.Duration(v, path)
		d.AttemptTimeout = &a
		if ok && a < 0 {
			p.ps.add(path, "must not be negative (zero means none), got %s", jsonwalk.Describe(v))
		}
	case "holdDuringPause":
		b := p.Boolean(v, path)
		d.HoldDuringPause = &b
	case "backoff":
		d.Backoff = p.backoff(v, path)
	case "hedging":
		d.Hedging = p.hedging(v, path)
	case "retryableStatusCodes":
		d.RetryableStatusCodes = []int{}
		p.Array(v, path, func(v json.RawMessage, path string) {
			n, _ := p.Integer(v, path)
			d.RetryableStatusCodes = append(d.RetryableStatusCodes, n)
		})
	case "budget":
		if jsonwalk.Type(v) == "string" {
			switch s := p.Str(v, path); s {
			case "transport":
			case "off":
				d.NoBudget = true
			default:
				p.ps.add(path, `must be "transport", "off" or an object, got %s`, jsonwalk.Describe(v))
			}
			return
		}
		d.Budget = &retryhttp.RetryBudgetOptions{}
		p.Object(v, path, fileBudgetKeys, func(key string, v json.RawMessage, path string) {
			switch key {
			case "ratio":
				d.Budget.Ratio = p.Positive(v, path)
			case "capacity":
				d.Budget.Capacity = p.PositiveInt(v, path)
			case "maxHosts":
				d.Budget.MaxHosts = p.PositiveInt(v, path)
			case "noParking":
				d.Budget.NoParking = p.Boolean(v, path)
			case "maxWait":
				d.Budget.MaxWait = p.PositiveDuration(v, path)
			case "maxParked":
				d.Budget.MaxParked = p.PositiveInt(v, path)
			}
		})
	}
}

// backoff reads the backoff object v.
func (p *fileParser) backoff(v json.RawMessage, path string) *retryhttp.CustomizedDelayFnOptions {
	b := &retryhttp.CustomizedDelayFnOptions{}
	p.Object(v, path, fileBackoffKeys, func(key string, v json.RawMessage, path string) {
		switch key {
		case "base":
			b.Base = p.PositiveDuration(v, path)
		case "cap":
			b.Cap = p.PositiveDuration(v, path)
		case "jitter":
			j, ok := p.Number(v, path)
			switch {
			case ok && !(j >= 0 && j <= 1):
				p.ps.add(path, "must be a number from 0 to 1, got %s", jsonwalk.Describe(v))
			case j == 0:
				b.JitterMagnitude = -1 // none, where the Go zero value means 1/3
			default:
				b.JitterMagnitude = j
			}
		}
	})
	return b
}

// hedging reads the hedging value v: "off" or an object.
func (p *fileParser) hedging(v json.RawMessage, path string) *Hedging {
	h := &Hedging{}
	hasDelay, hasQuantile := false, false
	if jsonwalk.Type(v) == "string" {
		if s := p.Str(v, path); s != "off" {
			p.ps.add(path, `must be "off" or an object, got %s`, jsonwalk.Describe(v))
		}
		return h
	}
	p.Object(v, path, fileHedgingKeys, func(key string, v json.RawMessage, path string) {
		switch key {
		case "delay":
			h.Delay, hasDelay = p.PositiveDuration(v, path), true
		case "quantile":
			h.Quantile, hasQuantile = p.Number(v, path)
		case "maxHedges":
			h.MaxHedges, _ = p.Integer(v, path)
			if h.MaxHedges < 0 {
				p.ps.add(path, "must not be negative (zero turns hedging off), got %s", jsonwalk.Describe(v))
			}
		}
	})
	if h.MaxHedges > 0 && !hasDelay && !hasQuantile {
		p.ps.add(jsonwalk.Join(path, "delay"), "required when maxHedges is above 0")
	}
	return h
}
