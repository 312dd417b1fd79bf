package retryhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxDestinationsFile bounds the size of a destinations file.
const maxDestinationsFile = 4 << 20

// LoadFile reads the JSON file name (as ParseDestinations describes) and,
// if it is valid, replaces the policies at once, as Set does. A file that
// cannot be read or is invalid changes nothing: the policies in place stay,
// and the error says why, naming the file and, for each problem, its key
// path (a *DestinationConfigError).
func (d *Destinations) LoadFile(name string) error {
	data, err := readFileLimited(name)
	if err != nil {
		return fmt.Errorf("retryhttp: reading destinations: %w", err)
	}
	cfg, err := ParseDestinations(data)
	if err == nil {
		err = d.Set(cfg)
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

// inFile sets File on every DestinationConfigError of err.
func inFile(err error, name string) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ce *DestinationConfigError
		if errors.As(e, &ce) {
			ce.File = name
		}
	}
	return err
}

// Keys of a destinations file, in the order the documentation gives them.
var (
	fileTopKeys     = []string{"defaults", "destinations"}
	filePolicyKeys  = []string{"name", "host", "maxRetries", "backoff", "attemptTimeout", "hedging", "retryableStatusCodes", "budget"}
	fileDefaultKeys = []string{"maxRetries", "backoff", "attemptTimeout", "hedging", "retryableStatusCodes", "budget"}
	fileBackoffKeys = []string{"base", "cap", "jitter"}
	fileHedgingKeys = []string{"delay", "maxHedges", "quantile"}
	fileBudgetKeys  = []string{"ratio", "capacity", "maxHosts", "noParking", "maxWait", "maxParked"}
)

// ParseDestinations reads a destinations file in JSON and validates it,
// returning every problem found (each a *DestinationConfigError naming its
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
//	    {"host": "legacy.internal", "budget": "off", "hedging": "off"}
//	  ]
//	}
//
// Durations are Go duration strings ("250ms", "2s", "1m30s"). Keys are
// case-sensitive; an unknown or repeated key is an error, and so is a value
// of the wrong type or out of range. A null value means the key is absent.
// In "backoff", "jitter" is the JitterMagnitude of CustomizedDelayFnOptions,
// from 0 (none) to 1; absent, it is 1/3. "budget" is "transport" (the
// transport's budget, as when absent), "off", or the options of a budget of
// the destination's own. "hedging" is "off" or its delay (or quantile:
// DestinationHedging) and maxHedges.
func ParseDestinations(data []byte) (DestinationConfig, error) {
	var cfg DestinationConfig
	var top json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return cfg, &DestinationConfigError{Problem: "not valid JSON: " + jsonErrorAt(data, err)}
	}
	p := &fileParser{}
	p.object(top, "", fileTopKeys, func(key string, v json.RawMessage, path string) {
		switch key {
		case "defaults":
			p.object(v, path, fileDefaultKeys, func(key string, v json.RawMessage, path string) {
				p.policyField(&cfg.Defaults, key, v, path)
			})
		case "destinations":
			p.array(v, path, func(v json.RawMessage, path string) {
				var d Destination
				p.object(v, path, filePolicyKeys, func(key string, v json.RawMessage, path string) {
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
		return DestinationConfig{}, ps.err()
	}
	return cfg, nil
}

// jsonErrorAt describes a JSON syntax error with its line and column.
func jsonErrorAt(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	// Offset counts the bytes read, the offending one included.
	before := data[:min(max(int(se.Offset)-1, 0), len(data))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d: %s", line, col, se.Error())
}

// fileParser turns the JSON values of a destinations file into a
// DestinationConfig, collecting problems.
type fileParser struct{ ps problems }

// object calls each for every key of the JSON object v, in order, after
// checking that the key is one of known and is not repeated.
func (p *fileParser) object(v json.RawMessage, path string, known []string, each func(key string, v json.RawMessage, path string)) {
	if jsonType(v) != "object" {
		p.ps.add(pathOr(path), "must be an object, got %s", describe(v))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	_, _ = dec.Token() // '{'; v is valid JSON
	seen := map[string]bool{}
	for dec.More() {
		tok, _ := dec.Token()
		key, _ := tok.(string)
		var val json.RawMessage
		_ = dec.Decode(&val)
		keyPath := join(path, key)
		switch {
		case !slices.Contains(known, key):
			p.ps.add(keyPath, "unknown key (known keys: %s)", strings.Join(known, ", "))
		case seen[key]:
			p.ps.add(keyPath, "repeated key")
		case string(val) == "null":
			// absent
		default:
			each(key, val, keyPath)
		}
		seen[key] = true
	}
}

// array calls each for every element of the JSON array v.
func (p *fileParser) array(v json.RawMessage, path string, each func(v json.RawMessage, path string)) {
	var elems []json.RawMessage
	if jsonType(v) != "array" || json.Unmarshal(v, &elems) != nil {
		p.ps.add(path, "must be an array, got %s", describe(v))
		return
	}
	for i, e := range elems {
		each(e, fmt.Sprintf("%s[%d]", path, i))
	}
}

// policyField sets in d the field key of a destination or of the defaults.
func (p *fileParser) policyField(d *Destination, key string, v json.RawMessage, path string) {
	switch key {
	case "name":
		d.Name = p.str(v, path)
		if d.Name == "" {
			p.ps.add(path, "must not be empty")
		}
	case "host":
		d.Host = p.str(v, path)
	case "maxRetries":
		n, ok := p.integer(v, path)
		d.MaxRetries = &n
		if ok && n < 0 {
			p.ps.add(path, "must not be negative, got %d", n)
		}
	case "attemptTimeout":
		a, ok := p.duration(v, path)
		d.AttemptTimeout = &a
		if ok && a < 0 {
			p.ps.add(path, "must not be negative (zero means none), got %s", describe(v))
		}
	case "backoff":
		d.Backoff = p.backoff(v, path)
	case "hedging":
		d.Hedging = p.hedging(v, path)
	case "retryableStatusCodes":
		d.RetryableStatusCodes = []int{}
		p.array(v, path, func(v json.RawMessage, path string) {
			n, _ := p.integer(v, path)
			d.RetryableStatusCodes = append(d.RetryableStatusCodes, n)
		})
	case "budget":
		if jsonType(v) == "string" {
			switch s := p.str(v, path); s {
			case "transport":
			case "off":
				d.NoBudget = true
			default:
				p.ps.add(path, `must be "transport", "off" or an object, got %s`, describe(v))
			}
			return
		}
		d.Budget = &RetryBudgetOptions{}
		p.object(v, path, fileBudgetKeys, func(key string, v json.RawMessage, path string) {
			switch key {
			case "ratio":
				d.Budget.Ratio = p.positive(v, path)
			case "capacity":
				d.Budget.Capacity = p.positiveInt(v, path)
			case "maxHosts":
				d.Budget.MaxHosts = p.positiveInt(v, path)
			case "noParking":
				d.Budget.NoParking = p.boolean(v, path)
			case "maxWait":
				d.Budget.MaxWait = p.positiveDuration(v, path)
			case "maxParked":
				d.Budget.MaxParked = p.positiveInt(v, path)
			}
		})
	}
}

// backoff reads the backoff object v.
func (p *fileParser) backoff(v json.RawMessage, path string) *CustomizedDelayFnOptions {
	b := &CustomizedDelayFnOptions{}
	p.object(v, path, fileBackoffKeys, func(key string, v json.RawMessage, path string) {
		switch key {
		case "base":
			b.Base = p.positiveDuration(v, path)
		case "cap":
			b.Cap = p.positiveDuration(v, path)
		case "jitter":
			j, ok := p.number(v, path)
			switch {
			case ok && !(j >= 0 && j <= 1):
				p.ps.add(path, "must be a number from 0 to 1, got %s", describe(v))
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
func (p *fileParser) hedging(v json.RawMessage, path string) *DestinationHedging {
	h := &DestinationHedging{}
	hasDelay, hasQuantile := false, false
	if jsonType(v) == "string" {
		if s := p.str(v, path); s != "off" {
			p.ps.add(path, `must be "off" or an object, got %s`, describe(v))
		}
		return h
	}
	p.object(v, path, fileHedgingKeys, func(key string, v json.RawMessage, path string) {
		switch key {
		case "delay":
			h.Delay, hasDelay = p.positiveDuration(v, path), true
		case "quantile":
			h.Quantile, hasQuantile = p.number(v, path)
		case "maxHedges":
			h.MaxHedges, _ = p.integer(v, path)
			if h.MaxHedges < 0 {
				p.ps.add(path, "must not be negative (zero turns hedging off), got %s", describe(v))
			}
		}
	})
	if h.MaxHedges > 0 && !hasDelay && !hasQuantile {
		p.ps.add(join(path, "delay"), "required when maxHedges is above 0")
	}
	return h
}

func (p *fileParser) str(v json.RawMessage, path string) string {
	var s string
	if jsonType(v) != "string" || json.Unmarshal(v, &s) != nil {
		p.ps.add(path, "must be a string, got %s", describe(v))
	}
	return s
}

func (p *fileParser) boolean(v json.RawMessage, path string) bool {
	var b bool
	if jsonType(v) != "boolean" || json.Unmarshal(v, &b) != nil {
		p.ps.add(path, "must be true or false, got %s", describe(v))
	}
	return b
}

func (p *fileParser) integer(v json.RawMessage, path string) (int, bool) {
	n, err := strconv.Atoi(string(v))
	if err != nil {
		p.ps.add(path, "must be a whole number, got %s", describe(v))
		return 0, false
	}
	return n, true
}

func (p *fileParser) positiveInt(v json.RawMessage, path string) int {
	n, ok := p.integer(v, path)
	if ok && n <= 0 {
		p.ps.add(path, "must be a positive whole number, got %s", describe(v))
	}
	return n
}

func (p *fileParser) number(v json.RawMessage, path string) (float64, bool) {
	if jsonType(v) != "number" {
		p.ps.add(path, "must be a number, got %s", describe(v))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		p.ps.add(path, "must be a finite number, got %s", describe(v))
		return 0, false
	}
	return f, true
}

func (p *fileParser) positive(v json.RawMessage, path string) float64 {
	f, ok := p.number(v, path)
	if ok && !(f > 0) {
		p.ps.add(path, "must be a positive number, got %s", describe(v))
	}
	return f
}

func (p *fileParser) duration(v json.RawMessage, path string) (time.Duration, bool) {
	if jsonType(v) != "string" {
		p.ps.add(path, `must be a duration string such as "250ms" or "2s", got %s`, describe(v))
		return 0, false
	}
	s := p.str(v, path)
	d, err := time.ParseDuration(s)
	if err != nil {
		p.ps.add(path, `must be a duration such as "250ms" or "2s", got %s`, describe(v))
		return 0, false
	}
	return d, true
}

func (p *fileParser) positiveDuration(v json.RawMessage, path string) time.Duration {
	d, ok := p.duration(v, path)
	if ok && d <= 0 {
		p.ps.add(path, "must be a positive duration, got %s", describe(v))
	}
	return d
}

// jsonType returns the type of the JSON value v: "object", "array",
// "string", "number", "boolean" or "null".
func jsonType(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// describe spells the JSON value v for an error: a scalar as it is written
// (cut after 40 bytes), a container by its type.
func describe(v json.RawMessage) string {
	switch jsonType(v) {
	case "object":
		return "an object"
	case "array":
		return "an array"
	}
	if len(v) > 40 {
		return string(v[:37]) + "..."
	}
	return string(v)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOr(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}
